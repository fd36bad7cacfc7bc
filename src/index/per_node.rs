//! Values for some nodes, by node number, in tables whose entries a bit of each node's cell
//! shows (`Cells`).

use super::cells::{Cells, Table};
use super::node_ids::{NodeId, NodeIds};
use crate::model::{FastMap, Str};

/// One table of values by node number, read through the cells' bits. A node event refreshes
/// every DaemonSet's entries for its node, and almost always finds none. At 65,000 nodes a
/// bucket of a table is a trip to memory, where the node's cell is one the event reads
/// anyway: a table is probed only where its bit says there is an entry, or one is added.
/// Keyed by number, not name: cloning or dropping a name is an atomic write, which waits on
/// every miss before it, and a drain adds or takes an entry in most DaemonSets. Every entry's
/// node is cached, so keeps its number while it has an entry.
#[derive(Clone, Copy)]
pub(super) struct PerNode<'a, V> {
    map: &'a FastMap<NodeId, V>,
    cells: &'a Cells,
    table: Table,
}

impl<'a, V> PerNode<'a, V> {
    pub(super) fn new(map: &'a FastMap<NodeId, V>, cells: &'a Cells, table: Table) -> Self {
        Self { map, cells, table }
    }

    /// Whether the node numbered `id` has an entry; a node without a number has none.
    pub(super) fn has(&self, id: Option<NodeId>) -> bool {
        self.cells.has(id, self.table)
    }

    /// The entry of the node numbered `id`.
    pub(super) fn at(&self, id: NodeId) -> Option<&'a V> {
        if !self.has(Some(id)) {
            return None;
        }
        self.map.get(&id)
    }

    /// The entry of the node named `node`.
    pub(super) fn get(&self, ids: &NodeIds, node: &str) -> Option<&'a V> {
        self.at(ids.get(node)?)
    }

    /// The entries, each with its node's name.
    pub(super) fn iter(&self, ids: &'a NodeIds) -> impl Iterator<Item = (&'a Str, &'a V)> + use<'a, V> {
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

    /// How many entries the table holds before it grows (`footprint`).
    pub(super) fn capacity(&self) -> usize {
        self.map.capacity()
    }

    /// Looks the node numbered `id` up in the table and keeps nothing, so that a write there
    /// soon after finds its bucket in cache (`Index::prefetch_pairs`).
    pub(super) fn warm(&self, id: NodeId) {
        std::hint::black_box(self.map.get(&id));
    }
}

/// One table of values by node number, written with the cells' bits.
pub(super) struct PerNodeMut<'a, V> {
    map: &'a mut FastMap<NodeId, V>,
    cells: &'a mut Cells,
    table: Table,
}

impl<'a, V> PerNodeMut<'a, V> {
    pub(super) fn new(map: &'a mut FastMap<NodeId, V>, cells: &'a mut Cells, table: Table) -> Self {
        Self { map, cells, table }
    }

    fn has(&self, id: Option<NodeId>) -> bool {
        self.cells.has(id, self.table)
    }

    /// Gives the node numbered `id` `value` unless it has one.
    pub(super) fn insert_new(self, id: NodeId, value: V) {
        if self.has(Some(id)) {
            return;
        }
        self.cells.set(id, self.table, true);
        self.map.insert(id, value);
    }

    /// The entry of the node numbered `id`, to change in place.
    pub(super) fn at_mut(self, id: NodeId) -> Option<&'a mut V> {
        if !self.has(Some(id)) {
            return None;
        }
        self.map.get_mut(&id)
    }

    /// Gives the node numbered `id` `value`; returns the value it replaces.
    pub(super) fn replace(self, id: NodeId, value: V) -> Option<V> {
        self.cells.set(id, self.table, true);
        self.map.insert(id, value)
    }

    /// Takes the entry of the node numbered `id` away; a node without a number has none.
    pub(super) fn remove(self, id: Option<NodeId>) -> Option<V> {
        let id = id?;
        if !self.has(Some(id)) {
            // Where the tests run, every skipped probe checks the bits against the table.
            debug_assert!(!self.map.contains_key(&id), "{id:?} has an entry its flag does not show");
            return None;
        }
        self.cells.set(id, self.table, false);
        self.map.remove(&id)
    }

    /// Keeps the entries `keep` says to, given the cells (whose claims it may read) and each
    /// node's number.
    pub(super) fn retain(self, mut keep: impl FnMut(&Cells, NodeId) -> bool) {
        let (cells, table) = (self.cells, self.table);
        self.map.retain(|&id, _| {
            let kept = keep(cells, id);
            if !kept {
                cells.set(id, table, false);
            }
            kept
        });
    }

    pub(super) fn clear(self) {
        self.map.clear();
        self.cells.clear(self.table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Map = FastMap<NodeId, u8>;

    fn write<'a>(map: &'a mut Map, flags: &'a mut Cells) -> PerNodeMut<'a, u8> {
        PerNodeMut::new(map, flags, Table::Misscheduled)
    }

    fn read<'a>(map: &'a Map, flags: &'a Cells) -> PerNode<'a, u8> {
        PerNode::new(map, flags, Table::Misscheduled)
    }

    #[test]
    fn the_bits_follow_the_entries() {
        let mut ids = NodeIds::default();
        let (n3, n5) = (Str::from("n3"), Str::from("n5"));
        let (three, five) = (ids.assign(&n3), ids.assign(&n5));
        let (mut flags, mut nodes, mut others) = (Cells::default(), Map::default(), Map::default());
        assert!(!read(&nodes, &flags).has(Some(five)), "beyond the column: no entry");
        write(&mut nodes, &mut flags).insert_new(five, 1);
        write(&mut nodes, &mut flags).insert_new(five, 2);
        write(&mut nodes, &mut flags).insert_new(three, 3);
        PerNodeMut::new(&mut others, &mut flags, Table::Uncovered).insert_new(five, 9);
        let table = read(&nodes, &flags);
        assert_eq!((table.get(&ids, "n5"), table.len()), (Some(&1), 2), "an entry is kept, not replaced");
        let mut named: Vec<_> = table.iter(&ids).map(|(name, &v)| (name.to_string(), v)).collect();
        named.sort();
        assert_eq!(named, [("n3".to_string(), 3), ("n5".to_string(), 1)]);
        assert!(table.has(Some(five)) && table.has(Some(three)) && !table.has(Some(NodeId::at(4))) && !table.has(None));

        assert_eq!(write(&mut nodes, &mut flags).remove(Some(five)), Some(1));
        assert_eq!(write(&mut nodes, &mut flags).remove(None), None, "a node without a number has no entry");
        assert_eq!(write(&mut nodes, &mut flags).remove(Some(five)), None);
        let table = read(&nodes, &flags);
        assert!(!table.has(Some(five)) && table.get(&ids, "n5").is_none() && table.at(five).is_none());
        let uncovered = PerNode::new(&others, &flags, Table::Uncovered);
        assert_eq!(uncovered.at(five), Some(&9), "another table's flag stays");

        write(&mut nodes, &mut flags).clear();
        write(&mut nodes, &mut flags).insert_new(three, 4);
        write(&mut nodes, &mut flags).retain(|_, id| id != three);
        assert!(read(&nodes, &flags).is_empty() && !read(&nodes, &flags).has(Some(three)));
        write(&mut nodes, &mut flags).insert_new(three, 5);
        assert_eq!(read(&nodes, &flags).get(&ids, "n3"), Some(&5), "cleared and retained bits let entries back in");
        assert_eq!(write(&mut nodes, &mut flags).replace(three, 6), Some(5), "replace replaces");
        assert_eq!(write(&mut nodes, &mut flags).replace(five, 7), None);
        assert!(read(&nodes, &flags).has(Some(five)) && read(&nodes, &flags).at(three) == Some(&6));
        let uncovered = PerNode::new(&others, &flags, Table::Uncovered);
        assert_eq!(uncovered.at(five), Some(&9), "untouched by the other table's clear");
    }
}
