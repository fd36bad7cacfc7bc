//! The pods a DaemonSet claims on one node: almost always one.

use std::ops::Deref;

use crate::model::Uid;

/// One pod inline, the rare others (a replacement beside its predecessor) boxed: 24 bytes
/// in each bucket of a map with a bucket per node per DaemonSet, where a `SmallVec` of one
/// takes 32. The one pod is the whole bucket at 65,000 nodes × 40 DaemonSets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ClaimedPods {
    One(Uid),
    Many(Box<[Uid]>),
}

const _: () = assert!(std::mem::size_of::<ClaimedPods>() == std::mem::size_of::<Uid>());

impl ClaimedPods {
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
