//! The pods a DaemonSet claims, by node: almost always one on each.

use std::ops::Deref;

use super::cells::{Cells, Claim};
use super::keyed::Slot;
use super::node_ids::NodeId;
use crate::model::FastMap;

/// The pods a DaemonSet claims on the nodes whose cell says `Claim::Several`: the rare second
/// pod on a node (a replacement beside its predecessor), or one whose slot a cell cannot hold.
/// The rest are in the cells, 4 bytes per node number shared with the tables' bits, where a
/// UID would take 24 bytes and a hash table keyed by name 41 per bucket.
#[derive(Debug, Default)]
pub(super) struct Several(FastMap<NodeId, Vec<Slot>>);

impl Several {
    /// What the nodes with several pods take in memory, besides the cells.
    pub(super) fn heap_bytes(&self) -> usize {
        let slots: usize = self.0.values().map(|slots| slots.capacity() * size_of::<Slot>()).sum();
        // A bucket: its node number, its vector and a control byte.
        self.0.capacity() * (size_of::<(NodeId, Vec<Slot>)>() + 1) + slots
    }
}

/// The slots of the pods claimed on one node: almost always one, read out of its cell.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pods<'a> {
    One(Slot),
    Several(&'a [Slot]),
}

impl<'a> Pods<'a> {
    /// The slots, by value.
    pub(super) fn slots(self) -> impl Iterator<Item = Slot> + 'a {
        let (one, several) = match self {
            Self::One(slot) => (Some(slot), &[][..]),
            Self::Several(slots) => (None, slots),
        };
        one.into_iter().chain(several.iter().copied())
    }
}

impl Deref for Pods<'_> {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        match self {
            Self::One(slot) => std::slice::from_ref(slot),
            Self::Several(slots) => slots,
        }
    }
}

/// A DaemonSet's claimed pods, by node number (`NodeIds`).
#[derive(Clone, Copy)]
pub(super) struct Claims<'a> {
    cells: &'a Cells,
    several: &'a Several,
}

impl<'a> Claims<'a> {
    pub(super) fn new(cells: &'a Cells, several: &'a Several) -> Self {
        Self { cells, several }
    }

    /// The pods claimed on `node`, if any.
    pub(super) fn get(self, node: NodeId) -> Option<Pods<'a>> {
        self.pods(node, self.cells.claim(node))
    }

    /// The nodes with a pod, by number.
    pub(super) fn iter(self) -> impl Iterator<Item = (NodeId, Pods<'a>)> {
        self.cells.claimed().filter_map(move |(node, claim)| Some((node, self.pods(node, claim)?)))
    }

    /// The pods that `node`'s cell, already read as `claim`, points to.
    fn pods(self, node: NodeId, claim: Claim) -> Option<Pods<'a>> {
        match claim {
            Claim::None => None,
            Claim::Several => self.several.0.get(&node).map(|slots| Pods::Several(slots)),
            Claim::One(slot) => Some(Pods::One(slot)),
        }
    }
}

/// A DaemonSet's claimed pods, to change.
pub(super) struct ClaimsMut<'a> {
    cells: &'a mut Cells,
    several: &'a mut Several,
}

impl<'a> ClaimsMut<'a> {
    pub(super) fn new(cells: &'a mut Cells, several: &'a mut Several) -> Self {
        Self { cells, several }
    }

    /// Adds the pod in `slot` on `node`, in a cluster whose node numbers are below `bound`.
    pub(super) fn push(self, node: NodeId, slot: Slot, bound: usize) {
        let first = match self.cells.claim(node) {
            Claim::None if self.cells.set_claim(node, Claim::One(slot), bound) => return,
            Claim::None => None,
            Claim::Several => {
                self.several.0.entry(node).or_default().push(slot);
                return;
            }
            Claim::One(first) => Some(first),
        };
        // Always held: `Several` fits in any cell.
        let moved = self.cells.set_claim(node, Claim::Several, bound);
        debug_assert!(moved);
        self.several.0.insert(node, first.into_iter().chain([slot]).collect());
    }

    /// Removes the pod in `slot` from `node`, if it is there.
    pub(super) fn remove(self, node: NodeId, slot: Slot) {
        match self.cells.claim(node) {
            Claim::None => {}
            Claim::Several => {
                let Some(slots) = self.several.0.get_mut(&node) else { return };
                slots.retain(|&s| s != slot);
                let back = match slots[..] {
                    [] => Claim::None,
                    [only] => Claim::One(only),
                    _ => return,
                };
                // A slot no cell holds stays here, alone.
                if self.cells.set_claim(node, back, 0) {
                    self.several.0.remove(&node);
                }
            }
            // Every pod delete comes here: no hashing for the common case.
            Claim::One(only) => {
                if only == slot {
                    let cleared = self.cells.set_claim(node, Claim::None, 0);
                    debug_assert!(cleared);
                }
            }
        }
    }

    pub(super) fn clear(self) {
        self.cells.clear_claims();
        self.several.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_grows_to_several_pods_and_shrinks_back_to_one_inline() {
        let (node, other) = (NodeId::at(3), NodeId::at(5));
        let slots: Vec<Slot> = (0..4).map(Slot::at).collect();
        let (mut cells, mut several) = (Cells::default(), Several::default());
        for (node, slot) in [(node, slots[1]), (node, slots[2]), (node, slots[3]), (other, slots[0])] {
            ClaimsMut::new(&mut cells, &mut several).push(node, slot, 10);
        }
        assert_eq!(Claims::new(&cells, &several).get(node).as_deref(), Some(&slots[1..]));
        ClaimsMut::new(&mut cells, &mut several).remove(node, slots[2]);
        assert_eq!(Claims::new(&cells, &several).get(node).as_deref(), Some(&[slots[1], slots[3]][..]));
        ClaimsMut::new(&mut cells, &mut several).remove(node, slots[1]);
        let claims = Claims::new(&cells, &several);
        assert_eq!(claims.get(node).as_deref(), Some(&slots[3..]));
        assert_eq!((cells.claim(node), several.0.len()), (Claim::One(slots[3]), 0), "back to one, inline");
        ClaimsMut::new(&mut cells, &mut several).remove(node, slots[0]);
        assert_eq!(Claims::new(&cells, &several).get(node).as_deref(), Some(&slots[3..]), "another pod's slot");
        ClaimsMut::new(&mut cells, &mut several).remove(node, slots[3]);
        let claims = Claims::new(&cells, &several);
        assert!(claims.get(node).is_none());
        let listed: Vec<_> = claims.iter().map(|(node, pods)| (node, pods.to_vec())).collect();
        assert_eq!(listed, [(other, slots[..1].to_vec())]);
        assert!(claims.get(NodeId::at(1000)).is_none(), "a number past the column");
    }

    /// A pod whose slot no cell holds is kept with the several, alone or not.
    #[test]
    fn a_slot_past_what_a_cell_holds_is_kept_with_the_several() {
        let (node, far, near) = (NodeId::at(1), Slot::at(u32::MAX - 8), Slot::at(4));
        let (mut cells, mut several) = (Cells::default(), Several::default());
        ClaimsMut::new(&mut cells, &mut several).push(node, far, 4);
        assert_eq!(Claims::new(&cells, &several).get(node).as_deref(), Some(&[far][..]));
        ClaimsMut::new(&mut cells, &mut several).push(node, near, 4);
        ClaimsMut::new(&mut cells, &mut several).remove(node, near);
        assert_eq!(Claims::new(&cells, &several).get(node).as_deref(), Some(&[far][..]), "still there, alone");
        ClaimsMut::new(&mut cells, &mut several).remove(node, far);
        assert!(Claims::new(&cells, &several).get(node).is_none() && several.0.is_empty());
    }
}
