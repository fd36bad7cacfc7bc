//! A value for some nodes, by name, with a bit per node number saying which have one.

use std::ops::Deref;

use bit_vec::BitVec;

use super::node_ids::{NodeId, NodeIds};
use crate::model::{FastMap, Str};

/// Nodes with a value, by name, and whether each has one, by number (`NodeIds`). A node
/// event refreshes every DaemonSet's entry for its node, and almost always finds none there.
/// At 65,000 nodes a bucket of the map is a trip to memory where the bit (8 KiB per
/// DaemonSet) is in cache, so the map is probed only where the bit says there is an entry,
/// or one is added. Read as the map it holds; written only here, which keeps the two alike.
#[derive(Debug)]
pub(super) struct PerNode<V> {
    map: FastMap<Str, V>,
    /// Bit `id` is set when the node numbered `id` has an entry. Every entry's node is cached,
    /// so numbered, and keeps its number while it has an entry.
    has: BitVec,
}

impl<V> Default for PerNode<V> {
    fn default() -> Self {
        Self { map: FastMap::default(), has: BitVec::new() }
    }
}

impl<V> Deref for PerNode<V> {
    type Target = FastMap<Str, V>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<V> PerNode<V> {
    /// Whether the node numbered `id` has an entry; a node without a number has none.
    pub(super) fn has(&self, id: Option<NodeId>) -> bool {
        id.is_some_and(|id| self.has.get(id.index()).unwrap_or(false))
    }

    /// Gives `node`, numbered `id`, `value` unless it has one: the name is cloned (an atomic
    /// write) only for a new entry.
    pub(super) fn insert_new(&mut self, (node, id): (&Str, NodeId), value: V) {
        if self.has(Some(id)) {
            return;
        }
        let at = id.index();
        if at >= self.has.len() {
            self.has.grow(at + 1 - self.has.len(), false);
        }
        self.has.set(at, true);
        self.map.insert(node.clone(), value);
    }

    /// Takes `node`'s entry away. `id`: its number; a node without one has no entry.
    pub(super) fn remove(&mut self, (node, id): (&Str, Option<NodeId>)) -> Option<V> {
        let Some(id) = id.filter(|&id| self.has(Some(id))) else {
            // Where the tests run, every skipped probe checks the bits against the map.
            debug_assert!(!self.map.contains_key(node), "{node} has an entry its bit does not show");
            return None;
        };
        self.has.set(id.index(), false);
        self.map.remove(node)
    }

    /// Keeps the entries `keep` says to, given each node's number in `ids`.
    pub(super) fn retain(&mut self, ids: &NodeIds, mut keep: impl FnMut(&Str, Option<NodeId>) -> bool) {
        let has = &mut self.has;
        self.map.retain(|node, _| {
            let id = ids.get(node);
            let kept = keep(node, id);
            if let (false, Some(id)) = (kept, id) {
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
        let mut nodes = PerNode::default();
        let (n3, n5) = (Str::from("n3"), Str::from("n5"));
        let (three, five) = (NodeId::at(3), NodeId::at(5));
        assert!(!nodes.has(Some(five)) && !nodes.has(None), "beyond the column: no entry");
        nodes.insert_new((&n5, five), 1);
        nodes.insert_new((&n5, five), 2);
        nodes.insert_new((&n3, three), 3);
        assert_eq!((nodes.get("n5"), nodes.len()), (Some(&1), 2), "an entry is kept, not replaced");
        assert!(nodes.has(Some(five)) && nodes.has(Some(three)) && !nodes.has(Some(NodeId::at(4))));
        assert_eq!(nodes.remove((&n5, Some(five))), Some(1));
        assert_eq!(nodes.remove((&n5, None)), None, "a node without a number has no entry");
        assert!(!nodes.has(Some(five)) && nodes.get("n5").is_none());
        assert_eq!(nodes.remove((&n5, Some(five))), None);

        let mut ids = NodeIds::default();
        let numbered = ids.assign(&n3);
        nodes.clear();
        nodes.insert_new((&n3, numbered), 4);
        nodes.retain(&ids, |_, id| id != Some(numbered));
        assert!(nodes.is_empty() && !nodes.has(Some(numbered)));
        nodes.insert_new((&n3, numbered), 5);
        assert_eq!(nodes.get("n3"), Some(&5), "cleared and retained bits let entries back in");
    }
}
