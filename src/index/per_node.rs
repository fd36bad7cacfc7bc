//! A value for some nodes, by node number, with a bit per number saying which have one.

use bit_vec::BitVec;

use super::node_ids::{NodeId, NodeIds};
use crate::model::{FastMap, Str};

/// Nodes with a value, by number (`NodeIds`), and a bit per number saying which have one. A
/// node event refreshes every DaemonSet's entry for its node, and almost always finds none
/// there. At 65,000 nodes a bucket of the map is a trip to memory where the bit (8 KiB per
/// DaemonSet) is in cache, so the map is probed only where the bit says there is an entry,
/// or one is added. Keyed by number, not name: cloning or dropping a name is an atomic
/// write, which waits on every miss before it, and a drain adds or takes an entry in most
/// DaemonSets. Every entry's node is cached, so keeps its number while it has an entry.
#[derive(Debug)]
pub(super) struct PerNode<V> {
    map: FastMap<NodeId, V>,
    /// Bit `id` is set when the node numbered `id` has an entry.
    has: BitVec,
}

impl<V> Default for PerNode<V> {
    fn default() -> Self {
        Self { map: FastMap::default(), has: BitVec::new() }
    }
}

impl<V> PerNode<V> {
    /// Whether the node numbered `id` has an entry; a node without a number has none.
    pub(super) fn has(&self, id: Option<NodeId>) -> bool {
        id.is_some_and(|id| self.has.get(id.index()).unwrap_or(false))
    }

    /// The entry of the node numbered `id`.
    pub(super) fn at(&self, id: NodeId) -> Option<&V> {
        if !self.has(Some(id)) {
            return None;
        }
        self.map.get(&id)
    }

    /// The entry of the node named `node`.
    pub(super) fn get(&self, ids: &NodeIds, node: &str) -> Option<&V> {
        self.at(ids.get(node)?)
    }

    /// The entries, each with its node's name.
    pub(super) fn iter<'a>(&'a self, ids: &'a NodeIds) -> impl Iterator<Item = (&'a Str, &'a V)> {
        self.map.iter().filter_map(|(&id, value)| {
            let name = ids.name(id);
            // A view that left a node out would understate; where the tests run, say so.
            debug_assert!(name.is_some(), "{id:?} has an entry but no name");
            Some((name?, value))
        })
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many entries the map holds before it grows (`footprint`).
    pub(super) fn capacity(&self) -> usize {
        self.map.capacity()
    }

    /// The bytes of the bit column (`footprint`).
    pub(super) fn bits_bytes(&self) -> usize {
        self.has.capacity().div_ceil(8)
    }

    /// Asks for the word holding the bit of the node numbered `id` (`prefetch`).
    pub(super) fn prefetch(&self, id: NodeId) {
        if let Some(word) = self.has.storage().get(id.index() / 32) {
            super::prefetch::prefetch(word);
        }
    }

    /// Looks the node numbered `id` up in the map and keeps nothing, so that a write there
    /// soon after finds its bucket in cache (`Index::prefetch_pairs`).
    pub(super) fn warm(&self, id: NodeId) {
        std::hint::black_box(self.map.get(&id));
    }

    /// Gives the node numbered `id` `value` unless it has one.
    pub(super) fn insert_new(&mut self, id: NodeId, value: V) {
        if self.has(Some(id)) {
            return;
        }
        self.mark(id);
        self.map.insert(id, value);
    }

    /// Gives the node numbered `id` `value`; returns the value it replaces.
    pub(super) fn replace(&mut self, id: NodeId, value: V) -> Option<V> {
        self.mark(id);
        self.map.insert(id, value)
    }

    /// Sets the bit of the node numbered `id`, growing the column to reach it.
    fn mark(&mut self, id: NodeId) {
        let at = id.index();
        if at >= self.has.len() {
            self.has.grow(at + 1 - self.has.len(), false);
        }
        self.has.set(at, true);
    }

    /// Takes the entry of the node numbered `id` away; a node without a number has none.
    pub(super) fn remove(&mut self, id: Option<NodeId>) -> Option<V> {
        let id = id?;
        if !self.has(Some(id)) {
            // Where the tests run, every skipped probe checks the bits against the map.
            debug_assert!(!self.map.contains_key(&id), "{id:?} has an entry its bit does not show");
            return None;
        }
        self.has.set(id.index(), false);
        self.map.remove(&id)
    }

    /// Keeps the entries `keep` says to, given each node's number.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(NodeId) -> bool) {
        let has = &mut self.has;
        self.map.retain(|&id, _| {
            let kept = keep(id);
            if !kept {
                has.set(id.index(), false);
            }
            kept
        });
    }

    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.has.truncate(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bits_follow_the_entries() {
        let mut ids = NodeIds::default();
        let (n3, n5) = (Str::from("n3"), Str::from("n5"));
        let (three, five) = (ids.assign(&n3), ids.assign(&n5));
        let mut nodes = PerNode::default();
        assert!(!nodes.has(Some(five)) && !nodes.has(None), "beyond the column: no entry");
        nodes.insert_new(five, 1);
        nodes.insert_new(five, 2);
        nodes.insert_new(three, 3);
        assert_eq!((nodes.get(&ids, "n5"), nodes.len()), (Some(&1), 2), "an entry is kept, not replaced");
        let mut named: Vec<_> = nodes.iter(&ids).map(|(name, &v)| (name.to_string(), v)).collect();
        named.sort();
        assert_eq!(named, [("n3".to_string(), 3), ("n5".to_string(), 1)]);
        assert!(nodes.has(Some(five)) && nodes.has(Some(three)) && !nodes.has(Some(NodeId::at(4))));
        assert_eq!(nodes.remove(Some(five)), Some(1));
        assert_eq!(nodes.remove(None), None, "a node without a number has no entry");
        assert!(!nodes.has(Some(five)) && nodes.get(&ids, "n5").is_none() && nodes.at(five).is_none());
        assert_eq!(nodes.remove(Some(five)), None);

        nodes.clear();
        nodes.insert_new(three, 4);
        nodes.retain(|id| id != three);
        assert!(nodes.is_empty() && !nodes.has(Some(three)));
        nodes.insert_new(three, 5);
        assert_eq!(nodes.get(&ids, "n3"), Some(&5), "cleared and retained bits let entries back in");
        assert_eq!((nodes.replace(three, 6), nodes.replace(five, 7)), (Some(5), None), "replace replaces");
        assert!(nodes.has(Some(five)) && nodes.at(three) == Some(&6));
    }
}
