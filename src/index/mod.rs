//! The cluster index: compact caches of the four watched resources, plus the
//! per-DaemonSet state the metrics are read from, kept up to date one event at
//! a time.
//!
//! Sans-IO: feed it `watcher::Event`s (from a live watch or a snapshot) with
//! [`Index::apply`]; read it with [`Index::daemonsets`]. A node event re-evaluates
//! that node for each DaemonSet; a pod event touches only that pod's node; a
//! DaemonSet event re-evaluates that DaemonSet. Scrapes read only the
//! misscheduled nodes, so their cost does not grow with the cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet as K8sDaemonSet};
use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use kube::runtime::watcher::Event;
use smallvec::SmallVec;

use crate::k8s::convert::{self, ConvertError};
use crate::k8s::slim::{DaemonPod, NodeTaints};
use crate::model::interner::Interner;
use crate::model::{DaemonSet, FastMap, FastSet, Node, Pod, Revision, Str, Timestamp};
use crate::rules::eligibility::{Skip, selector_matches, should_run};
use crate::rules::reason::{Classification, DrainTaints, Reason, classify};

/// The four watched resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Nodes,
    DaemonSets,
    ControllerRevisions,
    Pods,
}

impl Resource {
    pub const ALL: [Resource; 4] =
        [Resource::Nodes, Resource::DaemonSets, Resource::ControllerRevisions, Resource::Pods];

    /// The API kind, for messages.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Nodes => "Node",
            Resource::DaemonSets => "DaemonSet",
            Resource::ControllerRevisions => "ControllerRevision",
            Resource::Pods => "Pod",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Nodes => "nodes",
            Resource::DaemonSets => "daemonsets",
            Resource::ControllerRevisions => "controllerrevisions",
            Resource::Pods => "pods",
        }
    }
}

/// Which watch stream an event came from: a namespace, or `None` for a
/// cluster-wide watch. A relist replaces only its own scope.
pub type Scope<'a> = Option<&'a str>;

/// A reflector-style cache: during a relist the old contents stay visible and
/// the new ones are buffered; `InitDone` swaps them.
#[derive(Debug)]
pub struct Store<T> {
    objects: FastMap<Str, T>,
    /// Relists under way, one per scope (a namespace, or `None` for all): a short list.
    /// Each buffers its objects in list order; a key listed twice is applied twice, the
    /// later one winning, as in a map.
    relists: Vec<(Option<String>, Vec<T>)>,
    synced_scopes: FastSet<Option<String>>,
    /// How many scopes (watch streams) feed this store.
    scopes: usize,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Self { objects: FastMap::default(), relists: Vec::new(), synced_scopes: FastSet::default(), scopes: 1 }
    }
}

impl<T> Store<T> {
    fn synced(&self) -> bool {
        self.synced_scopes.len() >= self.scopes
    }

    /// The buffer of the relist under way for `scope`, created if there is none. Looked
    /// up by the borrowed scope: this runs once per listed object.
    fn relist_buffer(&mut self, scope: Scope<'_>) -> &mut Vec<T> {
        let at = match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => at,
            None => {
                // A relist usually returns about as many objects as the cache holds.
                let expected = self.objects.len() / self.scopes.max(1);
                self.relists.push((scope.map(str::to_owned), Vec::with_capacity(expected)));
                self.relists.len() - 1
            }
        };
        &mut self.relists[at].1
    }

    fn take_relist(&mut self, scope: Scope<'_>) -> Vec<T> {
        match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => self.relists.swap_remove(at).1,
            None => Vec::new(),
        }
    }
}

/// When a (DaemonSet, node) pair became misscheduled, as the index saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Since {
    at: Timestamp,
    /// The index saw the transition happen live (all caches synced, not replaying a relist),
    /// so `at` is the real moment rather than an upper bound.
    observed: bool,
}

#[derive(Debug, Default)]
struct DaemonSetState {
    /// Nodes where `shouldRun` is false, and why.
    skips: FastMap<Str, Skip>,
    /// `daemonset_ineligible_nodes`: counts of `skips` by (reason, key).
    skip_counts: FastMap<(&'static str, Str), u32>,
    /// Claimed pods by target node: almost always one, kept inline.
    claimed: FastMap<Str, SmallVec<[Str; 1]>>,
    /// Nodes that exist, are skipped, and have a claimed pod.
    misscheduled: BTreeMap<Str, Since>,
}

impl DaemonSetState {
    fn set_skip(&mut self, node: &Str, skip: Option<Skip>) -> bool {
        let old = match skip.clone() {
            Some(s) => self.skips.insert(node.clone(), s),
            None => self.skips.remove(node),
        };
        if old == skip {
            return false;
        }
        if let Some(old) = old {
            let key = (old.reason(), old.shared_key());
            if let Some(count) = self.skip_counts.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.skip_counts.remove(&key);
                }
            }
        }
        if let Some(new) = skip {
            *self.skip_counts.entry((new.reason(), new.shared_key())).or_default() += 1;
        }
        true
    }

    fn refresh(&mut self, node: &Str, node_exists: bool, since: Since) {
        let misscheduled =
            node_exists && self.skips.contains_key(node) && self.claimed.get(node).is_some_and(|pods| !pods.is_empty());
        if misscheduled {
            self.misscheduled.entry(node.clone()).or_insert(since);
        } else {
            self.misscheduled.remove(node);
        }
    }
}

/// Tunables of classification.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub drain_taints: DrainTaints,
    /// How many namespaces namespaced resources are watched in (0 means all, one stream).
    pub namespace_scopes: usize,
}

#[derive(Debug, Default)]
pub struct Index {
    config: Config,
    interner: Interner,
    now: Timestamp,
    replaying: bool,
    nodes: Store<Node>,
    daemonsets: Store<DaemonSet>,
    revisions: Store<Revision>,
    pods: Store<Pod>,
    state: FastMap<Str, DaemonSetState>,
    /// Pods by the UID of their controller ownerReference, claimed or not.
    owned_pods: FastMap<Str, FastSet<Str>>,
    /// Orphans a DaemonSet may adopt (no controller, not terminating), by namespace.
    orphans: FastMap<Str, FastSet<Str>>,
    /// Orphan → the one DaemonSet that adopts it, and so counts it, in its next sync.
    adopted_by: FastMap<Str, Str>,
    /// Orphans that several DaemonSets select: which one adopts it is a race, so none
    /// counts it. Kept so that each is logged once.
    contested: FastSet<Str>,
    /// (owner UID, controller-revision-hash) → revision UID.
    revision_by_hash: FastMap<(Str, Str), Str>,
    /// Bumped by every change that can alter what the index reports; readers cache on it.
    generation: u64,
}

/// A watched k8s-openapi type the index can take.
pub trait Indexed: kube::Resource<DynamicType = ()> + Sized {
    type Compact;
    const RESOURCE: Resource;
    /// Nodes are cached by name, everything else by UID.
    const KEYED_BY_NAME: bool;
    /// The cache key, straight from the metadata (a delete needs nothing more).
    fn raw_key(&self) -> Result<&str, ConvertError> {
        let meta = self.meta();
        let (key, field) = if Self::KEYED_BY_NAME {
            (meta.name.as_deref(), "metadata.name")
        } else {
            (meta.uid.as_deref(), "metadata.uid")
        };
        key.filter(|k| !k.is_empty()).ok_or_else(|| ConvertError {
            kind: Self::RESOURCE.kind(),
            name: convert::describe(meta),
            problem: format!("missing {field}"),
        })
    }
    fn convert(&self, interner: &mut Interner) -> Result<Self::Compact, ConvertError>;
    /// Whether the index already holds exactly what `convert` would produce, so the
    /// event can be skipped without converting. `false` when unsure.
    fn unchanged(&self, index: &Index) -> bool;
    fn key_of(obj: &Self::Compact) -> &Str;
    /// `None` for cluster-scoped objects.
    fn namespace_of(obj: &Self::Compact) -> Option<&Str>;
    fn store(index: &mut Index) -> &mut Store<Self::Compact>;
    fn upsert(index: &mut Index, obj: Self::Compact);
    fn remove(index: &mut Index, key: &str);
}

impl Index {
    pub fn new(config: Config) -> Self {
        let scopes = config.namespace_scopes.max(1);
        let mut index = Self { config, ..Self::default() };
        index.daemonsets.scopes = scopes;
        index.revisions.scopes = scopes;
        index.pods.scopes = scopes;
        index
    }

    /// Sets the clock used to stamp transitions. The caller owns time, so tests can too.
    pub fn set_now(&mut self, now: Timestamp) {
        self.now = now;
    }

    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Apply one event of a cluster-wide watch. See [`Index::apply_scoped`].
    pub fn apply<K: Indexed>(&mut self, event: Event<K>) -> Result<(), ConvertError> {
        self.apply_scoped(None, event)
    }

    /// Apply one watch event from the stream for `scope`. A malformed object is
    /// rejected with an error that names it; the cache is left as it was.
    pub fn apply_scoped<K: Indexed>(&mut self, scope: Scope<'_>, event: Event<K>) -> Result<(), ConvertError> {
        match event {
            Event::Apply(obj) => {
                if obj.unchanged(self) {
                    return Ok(());
                }
                let compact = obj.convert(&mut self.interner)?;
                K::upsert(self, compact);
            }
            Event::Delete(obj) => {
                // Only the key is needed: read it from the metadata rather than convert the object.
                K::remove(self, obj.raw_key()?);
            }
            Event::Init => {
                // A relist restarted mid-way starts from an empty buffer.
                K::store(self).relist_buffer(scope).clear();
            }
            Event::InitApply(obj) => {
                let compact = obj.convert(&mut self.interner)?;
                K::store(self).relist_buffer(scope).push(compact);
            }
            Event::InitDone => {
                let store = K::store(self);
                let fresh = store.take_relist(scope);
                let in_scope =
                    |obj: &K::Compact| scope.is_none_or(|ns| K::namespace_of(obj).is_some_and(|n| **n == *ns));
                let gone: Vec<Str> = if store.objects.is_empty() {
                    Vec::new()
                } else {
                    let listed: FastSet<&str> = fresh.iter().map(|obj| &**K::key_of(obj)).collect();
                    store
                        .objects
                        .iter()
                        .filter(|(k, obj)| in_scope(obj) && !listed.contains(&***k))
                        .map(|(k, _)| k.clone())
                        .collect()
                };
                store.objects.reserve(fresh.len().saturating_sub(store.objects.len()));
                self.replaying = true;
                for key in gone {
                    K::remove(self, &key);
                }
                for obj in fresh {
                    K::upsert(self, obj);
                }
                self.replaying = false;
                K::store(self).synced_scopes.insert(scope.map(str::to_owned));
                self.interner.collect_garbage();
            }
        }
        Ok(())
    }

    /// Every resource has completed its first list.
    pub fn synced(&self) -> bool {
        Resource::ALL.iter().all(|&r| self.is_synced(r))
    }

    pub fn is_synced(&self, resource: Resource) -> bool {
        match resource {
            Resource::Nodes => self.nodes.synced(),
            Resource::DaemonSets => self.daemonsets.synced(),
            Resource::ControllerRevisions => self.revisions.synced(),
            Resource::Pods => self.pods.synced(),
        }
    }

    pub fn len(&self, resource: Resource) -> usize {
        match resource {
            Resource::Nodes => self.nodes.objects.len(),
            Resource::DaemonSets => self.daemonsets.objects.len(),
            Resource::ControllerRevisions => self.revisions.objects.len(),
            Resource::Pods => self.pods.objects.len(),
        }
    }

    /// Changes whenever anything the index reports may have changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn since(&self) -> Since {
        Since { at: self.now, observed: self.synced() && !self.replaying }
    }

    // --- nodes ---------------------------------------------------------------

    fn upsert_node(&mut self, node: Node) {
        if self.nodes.objects.get(&node.name) == Some(&node) {
            return;
        }
        self.generation += 1;
        let since = self.since();
        for (uid, ds) in &self.daemonsets.objects {
            let state = self.state.entry(uid.clone()).or_default();
            state.set_skip(&node.name, should_run(&node, &ds.template));
            state.refresh(&node.name, true, since);
        }
        self.nodes.objects.insert(node.name.clone(), node);
    }

    fn remove_node(&mut self, name: &str) {
        let Some(node) = self.nodes.objects.remove(name) else { return };
        self.generation += 1;
        let since = self.since();
        for state in self.state.values_mut() {
            state.set_skip(&node.name, None);
            state.refresh(&node.name, false, since);
        }
    }

    // --- daemonsets ----------------------------------------------------------

    fn upsert_daemonset(&mut self, ds: DaemonSet) {
        let old = self.daemonsets.objects.get(&ds.uid);
        if old == Some(&ds) {
            return;
        }
        self.generation += 1;
        let selector_changed = old.is_none_or(|o| o.selector != ds.selector);
        let template_changed = old.is_none_or(|o| o.template != ds.template);
        // Who may adopt orphans changed: a new DaemonSet, a new selector, or a delete begun.
        let adopters_changed =
            selector_changed || old.is_none_or(|o| o.is_synced_by_controller() != ds.is_synced_by_controller());
        let (uid, namespace) = (ds.uid.clone(), ds.id.namespace.clone());
        self.daemonsets.objects.insert(uid.clone(), ds);
        let ds = &self.daemonsets.objects[&uid];
        let state = self.state.entry(uid.clone()).or_default();
        if template_changed {
            for node in self.nodes.objects.values() {
                state.set_skip(&node.name, should_run(node, &ds.template));
            }
        }
        if selector_changed {
            state.claimed.clear();
            for pod_uid in self.owned_pods.get(&uid).into_iter().flatten() {
                if let Some(pod) = self.pods.objects.get(pod_uid)
                    && let Some(node) = counted_node(ds, pod)
                {
                    state.claimed.entry(node.clone()).or_default().push(pod.uid.clone());
                }
            }
        }
        // Re-adopt before refreshing, so that a node whose adopted pod stays adopted keeps
        // the moment it became misscheduled.
        let readopted = if adopters_changed { self.readopt(&namespace) } else { Vec::new() };
        if template_changed || selector_changed {
            let since = self.since();
            let nodes = &self.nodes.objects;
            if let Some(state) = self.state.get_mut(&uid) {
                let candidates: FastSet<Str> = state.claimed.keys().chain(state.misscheduled.keys()).cloned().collect();
                for node in candidates {
                    state.refresh(&node, nodes.contains_key(&node), since);
                }
            }
        }
        self.refresh_touched(readopted);
    }

    fn remove_daemonset(&mut self, uid: &str) {
        self.state.remove(uid);
        let Some(ds) = self.daemonsets.objects.remove(uid) else { return };
        self.generation += 1;
        let readopted = self.readopt(&ds.id.namespace);
        self.refresh_touched(readopted);
    }

    // --- pods ----------------------------------------------------------------

    fn upsert_pod(&mut self, pod: Pod) {
        // Most pod events are status updates, which leave the compact pod as it was.
        if self.pods.objects.get(&pod.uid) == Some(&pod) {
            return;
        }
        self.generation += 1;
        let old = self.pods.objects.remove(&pod.uid);
        // Unclaim and claim before refreshing, so that an update that keeps the
        // pod where it was does not reset when its node became misscheduled.
        let touched = [old.as_ref().and_then(|o| self.unclaim(o)), self.claim(&pod)];
        self.refresh_touched(touched.into_iter().flatten());
        self.pods.objects.insert(pod.uid.clone(), pod);
    }

    fn remove_pod(&mut self, uid: &str) {
        let Some(pod) = self.pods.objects.remove(uid) else { return };
        self.generation += 1;
        self.contested.remove(uid);
        let touched = self.unclaim(&pod);
        self.refresh_touched(touched);
    }

    /// Records ownership (or adoption) and the claim; returns the (DaemonSet, node)
    /// whose claim set grew.
    fn claim(&mut self, pod: &Pod) -> Option<(Str, Str)> {
        let claimant = match &pod.controller_uid {
            Some(owner) => {
                self.owned_pods.entry(owner.clone()).or_default().insert(pod.uid.clone());
                owner.clone()
            }
            // Terminating orphans are never adopted.
            None if pod.deletion.is_some() => return None,
            None => {
                self.orphans.entry(pod.id.namespace.clone()).or_default().insert(pod.uid.clone());
                let adopter = self.adopter(pod)?;
                self.adopted_by.insert(pod.uid.clone(), adopter.clone());
                adopter
            }
        };
        let node = counted_node(self.daemonsets.objects.get(&claimant)?, pod)?;
        let state = self.state.entry(claimant.clone()).or_default();
        state.claimed.entry(node.clone()).or_default().push(pod.uid.clone());
        Some((claimant, node.clone()))
    }

    /// Undoes `claim`; returns the (DaemonSet, node) whose claim set shrank.
    fn unclaim(&mut self, pod: &Pod) -> Option<(Str, Str)> {
        let claimant = match &pod.controller_uid {
            Some(owner) => {
                if let Some(owned) = self.owned_pods.get_mut(owner) {
                    owned.remove(&pod.uid);
                    if owned.is_empty() {
                        self.owned_pods.remove(owner);
                    }
                }
                owner.clone()
            }
            None => {
                if let Some(orphans) = self.orphans.get_mut(&pod.id.namespace) {
                    orphans.remove(&pod.uid);
                    if orphans.is_empty() {
                        self.orphans.remove(&pod.id.namespace);
                    }
                }
                self.adopted_by.remove(&pod.uid)?
            }
        };
        let node = pod.target_node.as_ref()?;
        let state = self.state.get_mut(&claimant)?;
        let pods = state.claimed.get_mut(node)?;
        pods.retain(|uid| *uid != pod.uid);
        if pods.is_empty() {
            state.claimed.remove(node);
        }
        Some((claimant, node.clone()))
    }

    /// `ClaimPods` adopts an orphan into the DaemonSet being synced. When exactly one live
    /// DaemonSet in its namespace selects it, that one adopts it; when several do, it
    /// depends on which syncs first, so no count includes it.
    fn adopter(&mut self, pod: &Pod) -> Option<Str> {
        let mut selecting = self.daemonsets.objects.values().filter(|ds| {
            ds.is_synced_by_controller()
                && ds.id.namespace == pod.id.namespace
                && selector_matches(&ds.selector, &pod.labels)
        });
        let first = selecting.next()?;
        let Some(second) = selecting.next() else { return Some(first.uid.clone()) };
        if self.contested.insert(pod.uid.clone()) {
            tracing::warn!(
                namespace = %pod.id.namespace,
                pod = %pod.id.name,
                daemonsets = %format_args!("{}, {}", first.id.name, second.id.name),
                "orphan pod selected by more than one DaemonSet: the first to sync adopts it, so no count includes it until then"
            );
        }
        None
    }

    /// Re-decides every orphan in `namespace` after its DaemonSets changed; returns the
    /// (DaemonSet, node) pairs to refresh.
    fn readopt(&mut self, namespace: &Str) -> Vec<(Str, Str)> {
        let Some(orphans) = self.orphans.get(namespace) else { return Vec::new() };
        let orphans: Vec<Pod> = orphans.iter().filter_map(|uid| self.pods.objects.get(uid)).cloned().collect();
        let mut touched = Vec::new();
        for pod in orphans {
            touched.extend(self.unclaim(&pod));
            touched.extend(self.claim(&pod));
        }
        touched
    }

    fn refresh_touched(&mut self, touched: impl IntoIterator<Item = (Str, Str)>) {
        let since = self.since();
        for (owner, node) in touched {
            if let Some(state) = self.state.get_mut(&owner) {
                state.refresh(&node, self.nodes.objects.contains_key(&node), since);
            }
        }
    }

    // --- revisions -----------------------------------------------------------

    fn upsert_revision(&mut self, rev: Revision) {
        if self.revisions.objects.get(&rev.uid) == Some(&rev) {
            return;
        }
        self.generation += 1;
        self.remove_revision(&rev.uid.clone());
        if let (Some(owner), Some(hash)) = (&rev.owner_uid, &rev.hash) {
            self.revision_by_hash.insert((owner.clone(), hash.clone()), rev.uid.clone());
        }
        self.revisions.objects.insert(rev.uid.clone(), rev);
    }

    fn remove_revision(&mut self, uid: &str) {
        let Some(rev) = self.revisions.objects.remove(uid) else { return };
        self.generation += 1;
        if let (Some(owner), Some(hash)) = (rev.owner_uid, rev.hash) {
            let key = (owner, hash);
            if self.revision_by_hash.get(&key).is_some_and(|u| **u == *uid) {
                self.revision_by_hash.remove(&key);
            }
        }
    }

    // --- reading -------------------------------------------------------------

    /// DaemonSets sorted by namespace and name. Those the controller does not sync (being
    /// deleted, or with a refused selector) get no status from it and are left out.
    pub fn daemonsets(&self) -> Vec<DaemonSetView<'_>> {
        let mut views: Vec<_> = self
            .daemonsets
            .objects
            .values()
            .filter(|ds| ds.is_synced_by_controller())
            .filter_map(|ds| Some(DaemonSetView { index: self, ds, state: self.state.get(&ds.uid)? }))
            .collect();
        views.sort_by(|a, b| a.ds.id.cmp(&b.ds.id));
        views
    }

    fn revision_of(&self, ds: &DaemonSet, pod: &Pod) -> Option<&Revision> {
        let key = (ds.uid.clone(), pod.revision_hash.clone()?);
        self.revisions.objects.get(self.revision_by_hash.get(&key)?)
    }
}

/// The node a pod this DaemonSet owns (or adopts) counts on: the selector still matches
/// (else `ClaimPods` releases it), the status sync does not skip it, and it names a
/// target node.
fn counted_node<'p>(ds: &DaemonSet, pod: &'p Pod) -> Option<&'p Str> {
    if !selector_matches(&ds.selector, &pod.labels) || !pod.counts_for_status() {
        return None;
    }
    pod.target_node.as_ref()
}

/// One DaemonSet's results.
#[derive(Clone, Copy)]
pub struct DaemonSetView<'a> {
    index: &'a Index,
    pub ds: &'a DaemonSet,
    state: &'a DaemonSetState,
}

/// Count each misscheduled node once, under its first (oldest) pod's reason.
pub fn nodes_by_reason(pods: &[MisscheduledPod<'_>]) -> [u32; Reason::ALL.len()] {
    let mut counts = [0; Reason::ALL.len()];
    for pod in pods.iter().filter(|p| p.counts_node) {
        counts[pod.classification.reason.index()] += 1;
    }
    counts
}

/// A misscheduled pod and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MisscheduledPod<'a> {
    pub pod: &'a Pod,
    pub node: &'a Str,
    pub classification: Classification,
    /// When the pod became misscheduled (unix seconds).
    pub since: Timestamp,
    /// The first pod on its node: its reason is the node's reason.
    pub counts_node: bool,
}

impl<'a> DaemonSetView<'a> {
    /// `desiredNumberScheduled`: nodes where `shouldRun` is true.
    pub fn eligible_nodes(&self) -> usize {
        self.index.nodes.objects.len().saturating_sub(self.state.skips.len())
    }

    /// Skipped nodes by (reason, key), sorted.
    pub fn ineligible_nodes(&self) -> Vec<(&'static str, &'a Str, u32)> {
        let mut rows: Vec<_> = self.state.skip_counts.iter().map(|((r, k), n)| (*r, k, *n)).collect();
        rows.sort();
        rows
    }

    /// `currentNumberScheduled`: nodes where `shouldRun` is true that have a counted pod.
    pub fn scheduled_nodes(&self) -> usize {
        let nodes = &self.index.nodes.objects;
        self.state.claimed.keys().filter(|n| nodes.contains_key(*n) && !self.state.skips.contains_key(*n)).count()
    }

    pub fn misscheduled_node_count(&self) -> usize {
        self.state.misscheduled.len()
    }

    /// Misscheduled nodes by reason, indexed by `Reason::index`; sums to the node count.
    pub fn misscheduled_nodes_by_reason(&self) -> [u32; Reason::ALL.len()] {
        nodes_by_reason(&self.misscheduled_pods())
    }

    /// Every claimed pod on a misscheduled node, by node; on each node the oldest
    /// pod (the one the controller looks at first) comes first and decides the node's reason.
    pub fn misscheduled_pods(&self) -> Vec<MisscheduledPod<'a>> {
        let index = self.index;
        let mut out = Vec::new();
        for (node_name, since) in &self.state.misscheduled {
            let (Some(node), Some(skip), Some(pod_uids)) = (
                index.nodes.objects.get(node_name),
                self.state.skips.get(node_name),
                self.state.claimed.get(node_name),
            ) else {
                continue;
            };
            let mut pods: Vec<&Pod> = pod_uids.iter().filter_map(|uid| index.pods.objects.get(uid)).collect();
            pods.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
            for (i, pod) in pods.into_iter().enumerate() {
                let origin = index.revision_of(self.ds, pod).map(|r| &*r.placement);
                let classification = classify(skip, node, &self.ds.template, pod, origin, &index.config.drain_taints);
                let at = if since.observed {
                    since.at
                } else {
                    classification.evidence_since.map_or(since.at, |e| e.min(since.at))
                };
                out.push(MisscheduledPod { pod, node: &node.name, classification, since: at, counts_node: i == 0 });
            }
        }
        out
    }
}

// --- the four resources --------------------------------------------------------

macro_rules! indexed {
    ($k8s:ty => $compact:ty, $resource:ident, $store:ident, $convert:path, $unchanged:path, $key:ident, |$obj:ident| $namespace:expr, $upsert:ident, $remove:ident) => {
        impl Indexed for $k8s {
            type Compact = $compact;
            const RESOURCE: Resource = Resource::$resource;
            const KEYED_BY_NAME: bool = matches!(Resource::$resource, Resource::Nodes);
            fn convert(&self, interner: &mut Interner) -> Result<$compact, ConvertError> {
                $convert(self, interner)
            }
            fn unchanged(&self, index: &Index) -> bool {
                $unchanged(self, index)
            }
            fn key_of(obj: &$compact) -> &Str {
                &obj.$key
            }
            fn namespace_of($obj: &$compact) -> Option<&Str> {
                $namespace
            }
            fn store(index: &mut Index) -> &mut Store<$compact> {
                &mut index.$store
            }
            fn upsert(index: &mut Index, obj: $compact) {
                index.$upsert(obj)
            }
            fn remove(index: &mut Index, key: &str) {
                index.$remove(key)
            }
        }
    };
}

indexed!(NodeTaints => Node, Nodes, nodes, convert::node, cached_node_unchanged, name, |_node| None, upsert_node, remove_node);
indexed!(K8sNode => Node, Nodes, nodes, node_from_full, unsure, name, |_node| None, upsert_node, remove_node);
indexed!(K8sDaemonSet => DaemonSet, DaemonSets, daemonsets, convert::daemonset, unsure, uid, |d| Some(&d.id.namespace), upsert_daemonset, remove_daemonset);
indexed!(ControllerRevision => Revision, ControllerRevisions, revisions, convert::revision, unsure, uid, |r| Some(&r.id.namespace), upsert_revision, remove_revision);
indexed!(DaemonPod => Pod, Pods, pods, convert::pod, cached_pod_unchanged, uid, |p| Some(&p.id.namespace), upsert_pod, remove_pod);
indexed!(K8sPod => Pod, Pods, pods, pod_from_full, unsure, uid, |p| Some(&p.id.namespace), upsert_pod, remove_pod);

fn unsure<K>(_obj: &K, _index: &Index) -> bool {
    false
}

fn cached_node_unchanged(node: &NodeTaints, index: &Index) -> bool {
    let cached = node.metadata.name.as_deref().and_then(|name| index.nodes.objects.get(name));
    cached.is_some_and(|cached| convert::node_unchanged(node, cached))
}

fn cached_pod_unchanged(pod: &DaemonPod, index: &Index) -> bool {
    let cached = pod.metadata.uid.as_deref().and_then(|uid| index.pods.objects.get(uid));
    cached.is_some_and(|cached| convert::pod_unchanged(pod, cached))
}

// Full API objects (tests, tools) go through the same conversion as the watched shapes.
fn node_from_full(node: &K8sNode, interner: &mut Interner) -> Result<Node, ConvertError> {
    convert::node(&NodeTaints::from(node.clone()), interner)
}

fn pod_from_full(pod: &K8sPod, interner: &mut Interner) -> Result<Pod, ConvertError> {
    convert::pod(&DaemonPod::from(pod.clone()), interner)
}
