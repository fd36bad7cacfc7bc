//! The pods a DaemonSet claims, by node: almost always one on each.

use super::keyed::Slot;
use super::node_ids::NodeId;
use crate::model::FastMap;

/// A DaemonSet's claimed pods, as a column indexed by node number (`NodeIds`) of the pods'
/// slots in the pod store: 4 bytes per node. The column has a slot per node number for
/// each DaemonSet, 2.6M at 65,000 nodes × 40 DaemonSets, where a UID would take 24 bytes
/// and a hash table keyed by name 41 per bucket. The rare second pod on a node (a
/// replacement beside its predecessor) sends the node's pods to `several`.
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// The one pod's slot, or `NONE`, or `SEVERAL`: the pods are in `several`.
    column: Vec<Slot>,
    several: FastMap<NodeId, Vec<Slot>>,
}

/// Two numbers no stored object gets (`Slot::reserved`), so that an entry is 4 bytes.
const NONE: Slot = Slot::reserved(0);
const SEVERAL: Slot = Slot::reserved(1);

impl Claims {
    /// The slots of the pods claimed on `node`, if any.
    pub(super) fn get(&self, node: NodeId) -> Option<&[Slot]> {
        match self.column.get(node.index())? {
            &NONE => None,
            &SEVERAL => self.several.get(&node).map(Vec::as_slice),
            slot => Some(std::slice::from_ref(slot)),
        }
    }

    /// Asks for `node`'s entry ahead of a read (`prefetch`).
    pub(super) fn prefetch(&self, node: NodeId) {
        if let Some(entry) = self.column.get(node.index()) {
            super::prefetch::prefetch(entry);
        }
    }

    /// Adds the pod in `slot` on `node`, in a cluster whose node numbers are below `bound`.
    pub(super) fn push(&mut self, node: NodeId, slot: Slot, bound: usize) {
        let at = node.index();
        if at >= self.column.len() {
            // To every node numbered yet at once, and by a quarter at least: a list that
            // numbers nodes one by one does not copy the column each time.
            let len = self.column.len();
            let want = bound.max(at + 1).max(len + len / 4 + 16);
            self.column.reserve_exact(want - len);
            self.column.resize(want, NONE);
        }
        let entry = &mut self.column[at];
        match *entry {
            NONE => *entry = slot,
            SEVERAL => self.several.entry(node).or_default().push(slot),
            first => {
                *entry = SEVERAL;
                self.several.insert(node, vec![first, slot]);
            }
        }
    }

    /// Removes the pod in `slot` from `node`, if it is there.
    pub(super) fn remove(&mut self, node: NodeId, slot: Slot) {
        let Some(entry) = self.column.get_mut(node.index()) else { return };
        match *entry {
            NONE => {}
            SEVERAL => {
                let Some(slots) = self.several.get_mut(&node) else { return };
                slots.retain(|&s| s != slot);
                if let [only] = slots[..] {
                    *entry = only;
                    self.several.remove(&node);
                }
            }
            // Every pod delete comes here: no hashing for the common case.
            only => {
                if only == slot {
                    *entry = NONE;
                }
            }
        }
    }

    /// The nodes with a pod, by number.
    pub(super) fn iter(&self) -> impl Iterator<Item = (NodeId, &[Slot])> {
        (0..self.column.len()).filter_map(|at| Some((NodeId::at(at), self.get(NodeId::at(at))?)))
    }

    pub(super) fn clear(&mut self) {
        self.column.fill(NONE);
        self.several.clear();
    }

    /// What the column and the nodes with several pods take in memory.
    pub(super) fn heap_bytes(&self) -> usize {
        let several: usize = self.several.values().map(|slots| slots.capacity() * size_of::<Slot>()).sum();
        // A `several` bucket: its node number, its vector and a control byte.
        let bucket = size_of::<(NodeId, Vec<Slot>)>() + 1;
        self.column.capacity() * size_of::<Slot>() + self.several.capacity() * bucket + several
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_grows_to_several_pods_and_shrinks_back_to_one_inline() {
        let (node, other) = (NodeId::at(3), NodeId::at(5));
        let slots: Vec<Slot> = (0..4).map(Slot::at).collect();
        let mut claims = Claims::default();
        claims.push(node, slots[1], 10);
        claims.push(node, slots[2], 10);
        claims.push(node, slots[3], 10);
        claims.push(other, slots[0], 10);
        assert_eq!(claims.get(node), Some(&slots[1..]));
        claims.remove(node, slots[2]);
        assert_eq!(claims.get(node), Some(&[slots[1], slots[3]][..]));
        claims.remove(node, slots[1]);
        assert_eq!((claims.get(node), claims.several.len()), (Some(&slots[3..]), 0), "back to one, inline");
        claims.remove(node, slots[0]);
        assert_eq!(claims.get(node), Some(&slots[3..]), "another pod's slot leaves it be");
        claims.remove(node, slots[3]);
        assert_eq!(claims.get(node), None);
        let listed: Vec<_> = claims.iter().collect();
        assert_eq!(listed, [(other, &slots[..1])]);
        assert_eq!(claims.get(NodeId::at(1000)), None, "a number past the column");
    }
}
