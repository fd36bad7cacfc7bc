//! Where the index's bytes go: an estimate per structure, from the tables' capacities and
//! jemalloc's size classes, for the benchmark to show per daemon pod and per node. It
//! counts what each structure holds for itself; shared strings and label sets are the
//! interner's, and the allocator's own overhead and free pages are not here (the
//! benchmark's RSS rows have them).

use std::mem::size_of;

use super::Index;
use super::keyed::Slot;
use super::node_ids::NodeId;
use super::per_node::PerNode;
use crate::model::{FieldOwner, Node, Pod, Taint, Uid};

/// One structure's estimated heap bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub name: &'static str,
    pub bytes: usize,
    /// What it grows with, and so what the benchmark divides it by.
    pub grows_with: Grows,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grows {
    Pods,
    Nodes,
}

impl Index {
    /// The estimated heap bytes of each structure that grows with the pods or the nodes.
    pub fn footprint(&self) -> Vec<Part> {
        let pods = &self.pods.objects;
        let states = || self.states.values();
        let nodes = &self.nodes.objects;
        let node_bytes: usize = nodes.values().map(node_heap).sum();
        vec![
            Part { name: "pod cache: table by UID", bytes: set::<Slot>(pods.capacity()), grows_with: Grows::Pods },
            Part {
                name: "pod cache: the pods, in slots",
                bytes: pods.slot_capacity() * size_of::<Option<Pod>>(),
                grows_with: Grows::Pods,
            },
            Part {
                name: "claims: per DaemonSet, a cell per node (its pod, and the tables' bits)",
                bytes: states().map(|s| s.claims_bytes()).sum(),
                grows_with: Grows::Pods,
            },
            Part {
                name: "owned pods that count nowhere",
                bytes: self.uncounted_owned.values().map(|uids| set::<Uid>(uids.capacity())).sum(),
                grows_with: Grows::Pods,
            },
            Part {
                name: "per DaemonSet: skipped nodes, with since when misscheduled ones are",
                bytes: states().map(|s| per_node(s.skips())).sum(),
                grows_with: Grows::Pods,
            },
            Part {
                name: "per DaemonSet: uncovered nodes",
                bytes: states().map(|s| per_node(s.uncovered())).sum(),
                grows_with: Grows::Pods,
            },
            Part {
                name: "node cache: table and slots",
                bytes: set::<Slot>(nodes.capacity()) + nodes.slot_capacity() * size_of::<Option<Node>>(),
                grows_with: Grows::Nodes,
            },
            Part { name: "node cache: each node's own vectors", bytes: node_bytes, grows_with: Grows::Nodes },
        ]
    }
}

/// A node's own allocations: its taint list and its field owners (the key lists they and
/// NFD's annotations name are the interner's, shared).
fn node_heap(node: &Node) -> usize {
    let vec = |len: usize, each: usize| heap(len * each);
    vec(node.taints.len(), size_of::<Taint>())
        + vec(node.managers.owners.len(), size_of::<FieldOwner>())
        + node.managers.seen_bytes()
}

/// A `PerNode` table; the flags it shares are counted with the skipped nodes.
fn per_node<V>(column: PerNode<'_, V>) -> usize {
    table::<NodeId, V>(column.capacity())
}

/// An allocation of `bytes`, if any.
fn heap(bytes: usize) -> usize {
    if bytes == 0 { 0 } else { size_class(bytes) }
}

/// A hashbrown table of `capacity` items: its buckets, one control byte each, and a group.
fn table<K, V>(capacity: usize) -> usize {
    let buckets = buckets(capacity);
    if buckets == 0 { 0 } else { size_class(buckets * (size_of::<(K, V)>() + 1) + 16) }
}

fn set<T>(capacity: usize) -> usize {
    table::<T, ()>(capacity)
}

/// The bucket count behind a capacity (hashbrown keeps 7/8 of the buckets usable, all of
/// them below 8).
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        c if c < 8 => (c + 1).next_power_of_two(),
        c => (c * 8 / 7).next_power_of_two(),
    }
}

/// jemalloc's size class for an allocation of `n` bytes: 8 and 16, then four classes per
/// doubling.
fn size_class(n: usize) -> usize {
    if n <= 16 {
        return if n <= 8 { 8 } else { 16 };
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let step = n.next_power_of_two() / 8;
    n.div_ceil(step) * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_jemallocs() {
        let classes: Vec<usize> = [1, 9, 17, 100, 128, 129, 160, 161, 257, 1000].map(size_class).to_vec();
        assert_eq!(classes, [8, 16, 32, 112, 128, 160, 160, 192, 320, 1024]);
    }

    #[test]
    fn buckets_follow_hashbrowns_load_factor() {
        assert_eq!([0, 1, 3, 7, 14, 28, 57_344, 57_345].map(buckets), [0, 2, 4, 8, 16, 32, 65_536, 131_072]);
    }
}
