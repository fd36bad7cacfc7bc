//! Shares repeated strings, label sets and placements between cached objects.
//!
//! 200,000 daemon pods carry a few hundred distinct label sets and templates;
//! storing each once is most of what keeps the cache small.

use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::ControlFlow;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::model::PlacementSpec;
use crate::model::text::{same_pair, same_toleration};
use crate::model::{
    FastSet, Keys, Label, LabelSet, Labels, NodeSelectorTerm, OwnedFields, Placement, PodId, PodScope, Str, ThinStr,
    Toleration, TolerationParts,
};

/// Interned values are dropped by `collect_garbage` once only the interner holds them.
///
/// Label sets and placements are looked up by their parts before anything is built:
/// most objects repeat a set the interner already holds, and building one just to
/// find it again was most of the cost of converting a pod.
#[derive(Default)]
pub struct Interner {
    strings: FastSet<Str>,
    /// The one empty string, outside `strings` so that it is never collected.
    empty: Str,
    label_sets: HashTable<Labels>,
    /// The pairs the sets are made of (`Label`), shared across sets.
    label_pairs: HashTable<Label>,
    placements: HashTable<Arc<Placement>>,
    pod_scopes: HashTable<Arc<PodScope>>,
    owned_fields: HashTable<Arc<OwnedFields>>,
    thin_strs: HashTable<ThinStr>,
    key_lists: HashTable<Keys>,
    hasher: foldhash::fast::RandomState,
    inserts_since_gc: usize,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner")
            .field("strings", &self.strings.len())
            .field("label_sets", &self.label_sets.len())
            .field("placements", &self.placements.len())
            .field("pod_scopes", &self.pod_scopes.len())
            .field("owned_fields", &self.owned_fields.len())
            .field("thin_strs", &self.thin_strs.len())
            .field("key_lists", &self.key_lists.len())
            .field("label_pairs", &self.label_pairs.len())
            .finish()
    }
}

/// How many new entries trigger a sweep, so that churn (node names, hashes) cannot grow it forever.
const GC_EVERY: usize = 50_000;

impl Interner {
    pub fn str(&mut self, s: &str) -> Str {
        // Not looked up: comparing an empty string is slow (`text::same_str`), and common.
        if s.is_empty() {
            return self.empty.clone();
        }
        if let Some(existing) = self.strings.get(s) {
            return existing.clone();
        }
        let new: Str = Arc::from(s);
        self.note_insert();
        self.strings.insert(new.clone());
        new
    }

    /// The shared thin pointer to `s` (a pod's node name).
    pub fn thin_str(&mut self, s: &str) -> ThinStr {
        if let Some(existing) = self.existing_thin_str(s) {
            return existing.clone();
        }
        let hash = self.hasher.hash_one(s);
        let thin = ThinStr::new(self.str(s));
        let hasher = &self.hasher;
        self.thin_strs.insert_unique(hash, thin.clone(), |t| hasher.hash_one(&***t));
        self.note_insert();
        thin
    }

    /// The thin pointer to `s` if one is shared already; changes nothing, so that a batch of
    /// pod events can look their node names up ahead of converting them (`Indexed::warm`).
    pub fn existing_thin_str(&self, s: &str) -> Option<&ThinStr> {
        self.thin_strs.find(self.hasher.hash_one(s), |t| ***t == *s)
    }

    /// The shared list of `keys`, in their order, looked up before anything is built.
    pub fn keys<'a>(&mut self, keys: impl Iterator<Item = &'a str> + Clone) -> Keys {
        let hash = hash_keys(&self.hasher, keys.clone());
        if let Some(existing) =
            self.key_lists.find(hash, |list| same_items(list.iter(), keys.clone(), |a, b| **a == *b))
        {
            return existing.clone();
        }
        let list: Keys = keys.map(|key| self.str(key)).collect();
        let hasher = &self.hasher;
        self.key_lists.insert_unique(hash, list.clone(), |l| hash_keys(hasher, l.iter().map(|k| &**k)));
        self.note_insert();
        list
    }

    /// What a managedFields entry owns, shared by the nodes whose entry of `manager` owns the
    /// same label keys (interned first, then told apart by address) and taints.
    pub fn owned_fields<'a>(
        &mut self,
        manager: &str,
        labels: impl Iterator<Item = &'a str> + Clone,
        taints: bool,
    ) -> Arc<OwnedFields> {
        let labels = self.keys(labels);
        let key = |o: &OwnedFields| (Arc::as_ptr(&o.labels), o.taints);
        let hash = self.hasher.hash_one((manager, (Arc::as_ptr(&labels), taints)));
        let same = |o: &Arc<OwnedFields>| *o.manager == *manager && key(o) == (Arc::as_ptr(&labels), taints);
        if let Some(existing) = self.owned_fields.find(hash, same) {
            return existing.clone();
        }
        let owned = Arc::new(OwnedFields { manager: self.str(manager), labels, taints });
        let hasher = &self.hasher;
        self.owned_fields.insert_unique(hash, owned.clone(), |o| hasher.hash_one((&*o.manager, key(o))));
        self.note_insert();
        owned
    }

    /// The shared label set equal to `pairs`, which come sorted by key (from a map).
    pub fn labels<'a, I>(&mut self, pairs: I) -> Labels
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: Clone,
    {
        let pairs = pairs.into_iter();
        let hash = hash_pairs(&self.hasher, pairs.clone());
        let same = |set: &Labels| same_items(set.iter().map(|(k, v)| (&**k, &**v)), pairs.clone(), same_pair);
        if let Some(existing) = self.label_sets.find(hash, same) {
            return existing.clone();
        }
        let set: Labels = Arc::new(pairs.map(|(k, v)| self.label(k, v)).collect::<LabelSet>());
        let hasher = &self.hasher;
        self.label_sets.insert_unique(hash, set.clone(), |l| hash_pairs(hasher, l.iter().map(|(k, v)| (&**k, &**v))));
        self.note_insert();
        set
    }

    /// The shared pair `key`=`value`: a node's labels repeat its pool's but for a few.
    fn label(&mut self, key: &str, value: &str) -> Label {
        let hash = self.hasher.hash_one((key, value));
        if let Some(existing) = self.label_pairs.find(hash, |l| same_pair((l.key(), l.value()), (key, value))) {
            return existing.clone();
        }
        let label = Label::new(self.str(key), self.str(value));
        let hasher = &self.hasher;
        self.label_pairs.insert_unique(hash, label.clone(), |l| hasher.hash_one((&**l.key(), &**l.value())));
        self.note_insert();
        label
    }

    /// The shared placement equal to `placement`.
    pub fn placement(&mut self, placement: Placement) -> Arc<Placement> {
        let hash = hash_placement(&self.hasher, &placement);
        if let Some(existing) = self.placements.find(hash, |p| **p == placement) {
            return existing.clone();
        }
        self.insert_placement(hash, Arc::new(placement))
    }

    /// The shared placement of a pod's own spec (no nodeName, no required terms: the
    /// controller rewrites those), looked up before anything is built.
    pub fn own_placement(&mut self, spec: Option<&impl PlacementSpec>) -> Arc<Placement> {
        let selector = || spec.into_iter().flat_map(|s| s.node_selector());
        let tolerations = || spec.into_iter().flat_map(|s| s.tolerations());
        let host_network = spec.is_some_and(|s| s.host_network());
        let hash = hash_parts(&self.hasher, None, None, selector(), tolerations(), host_network);
        if let Some(existing) = self.placements.find(hash, |p| is_own_placement(p, spec)) {
            return existing.clone();
        }
        let placement = Placement {
            node_name: None,
            node_selector: self.pairs(selector()),
            required_terms: None,
            tolerations: self.tolerations(tolerations()),
            host_network,
        };
        self.insert_placement(hash, Arc::new(placement))
    }

    /// The id of pod `name` in `namespace` owned by `controller`, with these (interned)
    /// labels and own placement: all but the end of its name shared with the other pods of
    /// its DaemonSet's revision. Labels and placement are told apart by address, as the
    /// interner shares each.
    pub fn pod_id(
        &mut self,
        namespace: &str,
        name: &str,
        controller: Option<&str>,
        labels: Labels,
        own_placement: Arc<Placement>,
    ) -> PodId {
        let (prefix, rest) = PodId::split(name);
        let shared = (Arc::as_ptr(&labels), Arc::as_ptr(&own_placement));
        let hash = self.hasher.hash_one((namespace, prefix, controller, shared));
        let same = |scope: &Arc<PodScope>| {
            *scope.namespace == *namespace
                && *scope.prefix == *prefix
                && scope.controller_uid.as_deref() == controller
                && (Arc::as_ptr(&scope.labels), Arc::as_ptr(&scope.own_placement)) == shared
        };
        if let Some(existing) = self.pod_scopes.find(hash, same) {
            return PodId::new(existing.clone(), rest);
        }
        let controller_uid = controller.map(|uid| self.str(uid));
        let (namespace, prefix) = (self.str(namespace), self.str(prefix));
        let scope = Arc::new(PodScope { namespace, prefix, controller_uid, labels, own_placement });
        let hasher = &self.hasher;
        let rehash = |s: &Arc<PodScope>| {
            let shared = (Arc::as_ptr(&s.labels), Arc::as_ptr(&s.own_placement));
            hasher.hash_one((&*s.namespace, &*s.prefix, s.controller_uid.as_deref(), shared))
        };
        self.pod_scopes.insert_unique(hash, scope.clone(), rehash);
        self.note_insert();
        PodId::new(scope, rest)
    }

    /// Shared strings for a sorted list of pairs (a nodeSelector).
    pub fn pairs<'a>(&mut self, pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<(Str, Str)> {
        pairs.map(|(k, v)| (self.str(k), self.str(v))).collect()
    }

    pub fn tolerations<'a>(&mut self, parts: impl Iterator<Item = TolerationParts<'a>>) -> Vec<Toleration> {
        parts
            .map(|(key, operator, value, effect)| Toleration {
                key: self.str(key),
                operator,
                value: self.str(value),
                effect,
            })
            .collect()
    }

    fn insert_placement(&mut self, hash: u64, placement: Arc<Placement>) -> Arc<Placement> {
        let hasher = &self.hasher;
        self.placements.insert_unique(hash, placement.clone(), |p| hash_placement(hasher, p));
        self.note_insert();
        placement
    }

    fn note_insert(&mut self) {
        self.inserts_since_gc += 1;
        if self.inserts_since_gc >= GC_EVERY {
            self.collect_garbage();
        }
    }

    /// Forget values no cached object refers to any more.
    pub fn collect_garbage(&mut self) {
        // Before what scopes and owned fields hold, which a dropped one lets go of.
        self.pod_scopes.retain(|s| Arc::strong_count(s) > 1);
        self.owned_fields.retain(|o| Arc::strong_count(o) > 1);
        self.thin_strs.retain(|t| !t.is_unshared());
        self.key_lists.retain(|l| Arc::strong_count(l) > 1);
        self.placements.retain(|p| Arc::strong_count(p) > 1);
        self.label_sets.retain(|l| Arc::strong_count(l) > 1);
        // After the sets, which a dropped set lets go of.
        self.label_pairs.retain(|l| !l.is_unshared());
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.inserts_since_gc = 0;
    }

    pub fn len(&self) -> usize {
        let shared = self.label_sets.len() + self.placements.len() + self.pod_scopes.len() + self.owned_fields.len();
        self.strings.len() + shared + self.thin_strs.len() + self.key_lists.len() + self.label_pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `placement` is what `Interner::own_placement` makes of `spec`.
pub fn is_own_placement(placement: &Placement, spec: Option<&impl PlacementSpec>) -> bool {
    if placement.node_name.is_some() || placement.required_terms.is_some() {
        return false;
    }
    let Some(spec) = spec else {
        return !placement.host_network && placement.node_selector.is_empty() && placement.tolerations.is_empty();
    };
    placement.host_network == spec.host_network()
        && same_items(spec.node_selector(), placement.node_selector.iter().map(|(k, v)| (&**k, &**v)), same_pair)
        && same_items(spec.tolerations(), placement.tolerations.iter().map(Toleration::parts), same_toleration)
}

/// `Iterator::eq` for items borrowed for different lifetimes (its bound takes one type).
/// Like it, `a` is walked internally (`try_for_each`): pass the nested iterator there.
pub(crate) fn same_items<A, B>(
    mut a: impl Iterator<Item = A>,
    mut b: impl Iterator<Item = B>,
    eq: impl Fn(A, B) -> bool,
) -> bool {
    let all_equal = a.try_for_each(|x| match b.next() {
        Some(y) => {
            if eq(x, y) {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        }
        None => ControlFlow::Break(()),
    });
    all_equal.is_continue() && b.next().is_none()
}

fn hash_pairs<'a>(hasher: &impl BuildHasher, pairs: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    let mut state = hasher.build_hasher();
    pairs.for_each(|pair| pair.hash(&mut state));
    state.finish()
}

fn hash_keys<'a>(hasher: &impl BuildHasher, keys: impl Iterator<Item = &'a str>) -> u64 {
    let mut state = hasher.build_hasher();
    keys.for_each(|key| key.hash(&mut state));
    state.finish()
}

fn hash_placement(hasher: &impl BuildHasher, p: &Placement) -> u64 {
    hash_parts(
        hasher,
        p.node_name.as_deref(),
        p.required_terms.as_deref(),
        p.node_selector.iter().map(|(k, v)| (&**k, &**v)),
        p.tolerations.iter().map(Toleration::parts),
        p.host_network,
    )
}

/// One hash for a built placement and for the parts of one, so either finds the other.
fn hash_parts<'a>(
    hasher: &impl BuildHasher,
    node_name: Option<&str>,
    required_terms: Option<&[NodeSelectorTerm]>,
    node_selector: impl Iterator<Item = (&'a str, &'a str)>,
    tolerations: impl Iterator<Item = TolerationParts<'a>>,
    host_network: bool,
) -> u64 {
    let mut state = hasher.build_hasher();
    (node_name, required_terms, host_network).hash(&mut state);
    node_selector.for_each(|pair| pair.hash(&mut state));
    // Separates the two sequences, so that they cannot run into each other.
    state.write_u8(0xfe);
    tolerations.for_each(|t| t.hash(&mut state));
    state.finish()
}

#[cfg(test)]
mod tests;
