//! The pods a DaemonSet claims, by node: almost always one on each.

use std::ops::Deref;

use super::node_ids::NodeId;
use crate::model::Uid;

/// A DaemonSet's claimed pods, as a column indexed by node number (`NodeIds`): 24 bytes per
/// node where a hash table keyed by name took 41 per bucket, with twice the buckets as
/// nodes at worst (65,000 nodes fill 131,072). An empty slot is an empty `Many`, which
/// allocates nothing.
#[derive(Debug, Default)]
pub(super) struct Claims {
    column: Vec<ClaimedPods>,
}

impl Claims {
    pub(super) fn get(&self, node: NodeId) -> Option<&ClaimedPods> {
        self.column.get(node.index()).filter(|pods| !pods.is_empty())
    }

    /// Adds `pod` on `node`, in a cluster whose node numbers are below `bound`.
    pub(super) fn push(&mut self, node: NodeId, pod: Uid, bound: usize) {
        let at = node.index();
        if at >= self.column.len() {
            // To every node numbered yet at once, and by a quarter at least: a list that
            // numbers nodes one by one does not copy the column each time.
            let len = self.column.len();
            let want = bound.max(at + 1).max(len + len / 4 + 16);
            self.column.reserve_exact(want - len);
            self.column.resize_with(want, ClaimedPods::none);
        }
        let pods = &mut self.column[at];
        if pods.is_empty() {
            *pods = ClaimedPods::One(pod);
        } else {
            pods.push(pod);
        }
    }

    /// Removes `pod` from `node`, if it is there.
    pub(super) fn remove(&mut self, node: NodeId, pod: &Uid) {
        if let Some(pods) = self.column.get_mut(node.index()) {
            pods.retain(|uid| uid != pod);
        }
    }

    /// The nodes with a pod, by number.
    pub(super) fn iter(&self) -> impl Iterator<Item = (NodeId, &ClaimedPods)> {
        let numbered = self.column.iter().enumerate().map(|(at, pods)| (NodeId::at(at), pods));
        numbered.filter(|(_, pods)| !pods.is_empty())
    }

    pub(super) fn clear(&mut self) {
        self.column.fill_with(ClaimedPods::none);
    }

    /// The column's slots, full or not: what it takes in memory.
    pub(super) fn capacity(&self) -> usize {
        self.column.capacity()
    }
}

/// One pod inline, the rare others (a replacement beside its predecessor) boxed: 24 bytes
/// in each slot of a column with a slot per node per DaemonSet, where a `SmallVec` of one
/// takes 32. The one pod is the whole slot at 65,000 nodes × 40 DaemonSets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ClaimedPods {
    One(Uid),
    Many(Box<[Uid]>),
}

const _: () = assert!(std::mem::size_of::<ClaimedPods>() == std::mem::size_of::<Uid>());

impl ClaimedPods {
    /// An empty slot of `Claims`.
    fn none() -> Self {
        Self::Many(Box::default())
    }

    pub(super) fn push(&mut self, uid: Uid) {
        match self {
            Self::One(first) => *self = Self::Many(Box::new([first.clone(), uid])),
            Self::Many(uids) => *uids = uids.iter().cloned().chain([uid]).collect(),
        }
    }

    /// Keeps the pods `keep` says to; it may leave none (the caller drops the entry).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Uid) -> bool) {
        if let Self::One(only) = self {
            // Every pod delete comes here: no allocation for the common case.
            if !keep(only) {
                *self = Self::Many(Box::default());
            }
            return;
        }
        let mut kept: Vec<Uid> = self.iter().cloned().collect();
        kept.retain(keep);
        *self = match <[Uid; 1]>::try_from(kept) {
            Ok([only]) => Self::One(only),
            Err(kept) => Self::Many(kept.into_boxed_slice()),
        };
    }
}

impl Deref for ClaimedPods {
    type Target = [Uid];

    fn deref(&self) -> &[Uid] {
        match self {
            Self::One(uid) => std::slice::from_ref(uid),
            Self::Many(uids) => uids,
        }
    }
}

impl<'a> IntoIterator for &'a ClaimedPods {
    type Item = &'a Uid;
    type IntoIter = std::slice::Iter<'a, Uid>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_shrinks_back_to_one_inline() {
        let uid = |n: u8| Uid::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}"));
        let mut pods = ClaimedPods::One(uid(1));
        pods.push(uid(2));
        pods.push(uid(3));
        assert_eq!(&*pods, &[uid(1), uid(2), uid(3)]);
        pods.retain(|u| *u != uid(2));
        assert_eq!(&*pods, &[uid(1), uid(3)]);
        pods.retain(|u| *u != uid(1));
        assert_eq!(pods, ClaimedPods::One(uid(3)));
        pods.retain(|_| false);
        assert!(pods.is_empty());
    }
}
