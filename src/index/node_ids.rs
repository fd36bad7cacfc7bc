//! Node names as small numbers, so that what a DaemonSet keeps per node can be a column
//! indexed by node rather than a hash table keyed by name.

use crate::model::{FastMap, Str};

/// A node name's number. Numbers of names nothing uses any more are reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct NodeId(u32);

impl NodeId {
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }

    /// The number at `index` of a column, which is below `NodeIds::bound`.
    pub(super) fn at(index: usize) -> Self {
        Self(index as u32)
    }
}

/// The numbers of the cached nodes and of the node names pods were claimed on. A name gets
/// one when its node is cached or a DaemonSet first claims a pod there; it is freed by a
/// sweep once neither is true, so that nodes coming and going under new names (an
/// autoscaler's) do not grow it forever.
#[derive(Debug, Default)]
pub(super) struct NodeIds {
    ids: FastMap<Str, NodeId>,
    /// Each number's name and node; `None` when the number is free.
    names: Vec<Option<Numbered>>,
    free: Vec<NodeId>,
    /// How many names had a number after the last sweep.
    kept_by_last_sweep: usize,
}

/// Numbered names beyond twice the nodes, and this many more, are worth a sweep: a sweep
/// reads every DaemonSet's column, so it runs after about as many names died as there are
/// nodes. As many new names again are due before the next, so that pods listed ahead of
/// their nodes, which a sweep cannot free, do not make every new name sweep.
const SWEEP_SLACK: usize = 1024;

#[derive(Debug)]
struct Numbered {
    name: Str,
    /// Whether its node is cached: a pod event asks whether its node exists, and at 65,000
    /// nodes the node table's lookup by name misses the cache three times where this column,
    /// read by the number the event has already, misses once.
    cached: bool,
}

impl NodeIds {
    pub(super) fn get(&self, name: &str) -> Option<NodeId> {
        self.ids.get(name).copied()
    }

    /// `name`'s number, given one if it has none.
    pub(super) fn assign(&mut self, name: &Str) -> NodeId {
        if let Some(id) = self.get(name) {
            return id;
        }
        let numbered = Numbered { name: name.clone(), cached: false };
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id.index()] = Some(numbered);
                id
            }
            None => {
                let id = NodeId(u32::try_from(self.names.len()).expect("fewer than 4 billion node names"));
                self.names.push(Some(numbered));
                id
            }
        };
        self.ids.insert(name.clone(), id);
        id
    }

    /// The name numbered `id`, while it is in use.
    pub(super) fn name(&self, id: NodeId) -> Option<&Str> {
        self.names.get(id.index())?.as_ref().map(|numbered| &numbered.name)
    }

    /// Records whether the node numbered `id` is cached.
    pub(super) fn set_cached(&mut self, id: NodeId, cached: bool) {
        if let Some(Some(numbered)) = self.names.get_mut(id.index()) {
            numbered.cached = cached;
        }
    }

    /// Asks for `id`'s entry ahead of `is_cached` (`prefetch`).
    pub(super) fn prefetch(&self, id: NodeId) {
        if let Some(entry) = self.names.get(id.index()) {
            super::prefetch::prefetch(entry);
        }
    }

    /// Whether the node numbered `id` is cached; a name without a number has no node cached.
    pub(super) fn is_cached(&self, id: Option<NodeId>) -> bool {
        id.and_then(|id| self.names.get(id.index())?.as_ref()).is_some_and(|numbered| numbered.cached)
    }

    /// How many names have a number.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// One past the highest number given: how long a column must be to hold every node.
    pub(super) fn bound(&self) -> usize {
        self.names.len()
    }

    /// Whether enough names may have died, with `nodes` nodes cached, for a sweep to pay.
    pub(super) fn sweep_due(&self, nodes: usize) -> bool {
        self.len() > (2 * nodes).max(self.kept_by_last_sweep) + SWEEP_SLACK
    }

    /// Frees the numbers of the nodes not cached that `in_use` says nothing uses.
    pub(super) fn sweep(&mut self, in_use: impl Fn(NodeId) -> bool) {
        for (at, entry) in self.names.iter_mut().enumerate() {
            let id = NodeId::at(at);
            if let Some(numbered) = entry.take_if(|numbered| !numbered.cached && !in_use(id)) {
                self.ids.remove(&numbered.name);
                self.free.push(id);
            }
        }
        self.kept_by_last_sweep = self.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stable_and_reused_after_a_sweep() {
        let mut ids = NodeIds::default();
        let (a, b) = (ids.assign(&Str::from("a")), ids.assign(&Str::from("b")));
        assert_eq!(ids.assign(&Str::from("a")), a, "a name keeps its number");
        assert_eq!((ids.len(), ids.bound()), (2, 2));
        ids.sweep(|id| id == b);
        assert_eq!((ids.get("a"), ids.name(a), ids.name(b).map(|n| &**n)), (None, None, Some("b")));
        assert_eq!(ids.assign(&Str::from("c")), a, "a freed number is given again");
        assert_eq!((ids.len(), ids.bound()), (2, 2));
        assert!(!ids.sweep_due(0));
    }

    #[test]
    fn a_cached_nodes_number_outlives_its_claims_and_goes_after_the_node() {
        let mut ids = NodeIds::default();
        let (cached, claimed) = (ids.assign(&Str::from("cached")), ids.assign(&Str::from("claimed")));
        ids.set_cached(cached, true);
        assert_eq!(
            (ids.is_cached(Some(cached)), ids.is_cached(Some(claimed)), ids.is_cached(None)),
            (true, false, false)
        );
        ids.sweep(|_| false);
        assert_eq!((ids.get("cached"), ids.get("claimed")), (Some(cached), None), "kept while cached");
        ids.set_cached(cached, false);
        ids.sweep(|_| false);
        assert_eq!(
            (ids.get("cached"), ids.is_cached(Some(cached))),
            (None, false),
            "freed once neither cached nor claimed"
        );
    }

    #[test]
    fn a_sweep_that_frees_nothing_is_not_due_again_until_as_many_new_names() {
        let mut ids = NodeIds::default();
        let name = |i: usize| Str::from(format!("n{i}"));
        (0..=SWEEP_SLACK).for_each(|i| _ = ids.assign(&name(i)));
        assert!(ids.sweep_due(0), "no nodes cached, and more names than the slack");
        ids.sweep(|_| true);
        assert!(!ids.sweep_due(0), "every name still in use");
        (0..SWEEP_SLACK).for_each(|i| _ = ids.assign(&name(SWEEP_SLACK + 1 + i)));
        assert!(!ids.sweep_due(0));
        ids.assign(&name(3 * SWEEP_SLACK));
        assert!(ids.sweep_due(0));
    }
}
