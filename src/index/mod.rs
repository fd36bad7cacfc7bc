//! The cluster index: compact caches of the four watched resources, plus the
//! per-DaemonSet state the metrics are read from, kept up to date one event at
//! a time.
//!
//! Sans-IO: feed it `watcher::Event`s (from a live watch or a snapshot) with
//! [`Index::apply`]; read it with [`Index::daemonsets`]. A node event re-evaluates
//! that node for each DaemonSet; a pod event touches only that pod's node; a
//! DaemonSet event re-evaluates that DaemonSet. Scrapes read only the
//! misscheduled nodes, so their cost does not grow with the cluster.

mod adoption;
mod cells;
mod chunks;
mod claimed;
pub mod coverage;
mod daemonset;
mod daemonset_state;
mod excerpt;
mod failed_create;
mod footprint;
mod keyed;
mod node;
mod node_ids;
mod per_node;
mod pod;
mod prefetch;
mod refresh;
mod resource;
mod restore;
mod revision;
mod skip_counts;
mod states;
mod store;
mod uncovered;
mod view;

use kube::runtime::watcher::Event;

pub use self::excerpt::Touched;
pub use self::failed_create::{EventsRead, FailedCreateEvent};
pub use self::footprint::{Grows, Part};
use self::node_ids::NodeIds;
use self::refresh::{ClaimsChanged, Leaves, Parting};
pub use self::resource::{Indexed, Resource, Stored};
pub use self::restore::{PastLoss, Restored};
use self::states::States;
pub use self::store::{Scope, Store};
use self::uncovered::first_pod_available;
pub use self::view::{DaemonSetView, EVENTS_REFUSED, LostNode, MisscheduledPod, UncoveredNode, nodes_by_reason};
use crate::k8s::convert::ConvertError;
use crate::model::interner::Interner;
use crate::model::{DaemonSet, FastMap, FastSet, Node, Pod, Revision, Str, Timestamp, Uid};
use crate::rules::reason::Conventions;

/// Objects of a finished list upserted at a time, after their lookups are warmed together
/// (`Stored::warm_upserts`): as many as the watcher's batches (`MAX_BATCH`).
const WARM_RUN: usize = 64;

/// When a (DaemonSet, node) pair became misscheduled, or lost, as the index saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Since {
    at: Timestamp,
    /// The index saw the transition happen live (all caches synced, not replaying a relist),
    /// so `at` is the real moment rather than an upper bound.
    observed: bool,
    /// The index's generation then: it tells two episodes of one pair apart even within
    /// a second, so a recovery too short for a reader to see still ends an episode.
    generation: u64,
}

/// Tunables of classification.
#[derive(Clone, Debug)]
pub struct Config {
    pub conventions: Conventions,
    /// How many namespaces namespaced resources are watched in (0 means all, one stream).
    pub namespace_scopes: usize,
    /// Seconds a lost node is remembered (`--lost-node-retention`).
    pub lost_retention: Timestamp,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            conventions: Conventions::default(),
            namespace_scopes: 0,
            lost_retention: coverage::DEFAULT_RETENTION_SECONDS,
        }
    }
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
    /// The numbers of the cached nodes and of those pods are claimed on, which index
    /// `DaemonSetState::claimed`.
    node_ids: NodeIds,
    /// Each cached DaemonSet's state, at its slot in `daemonsets`.
    states: States,
    /// Pods by the UID of their controller ownerReference that count on no node of it: its
    /// DaemonSet is not cached (yet), its selector does not match them, they do not count
    /// for status, or they name no node. Those that count are its claims: each pod with a
    /// controller is in one of the two (`Index::owned_pods`), and the claims are most.
    uncounted_owned: FastMap<Str, FastSet<Uid>>,
    /// Orphans a DaemonSet may adopt (no controller, not terminating), by namespace.
    orphans: FastMap<Str, FastSet<Uid>>,
    /// Orphan → the one DaemonSet that adopts it, and so counts it, in its next sync.
    adopted_by: FastMap<Uid, Str>,
    /// Orphans that several DaemonSets select: which one adopts it is a race, so none
    /// counts it. Kept so that each is logged once.
    contested: FastSet<Uid>,
    /// (owner UID, controller-revision-hash) → revision UID.
    revision_by_hash: FastMap<(Str, Str), Str>,
    /// Bumped by every change that can alter what the index reports; readers cache on it.
    generation: u64,
    /// The earliest moment some loss is due to be forgotten, if any is.
    next_loss_expiry: Option<Timestamp>,
    /// The uncovered nodes' reasons as last counted: a pod past its grace moves from
    /// `starting` with time alone, and readers cache on the generation.
    uncovered_reasons_seen: u64,
    /// Each DaemonSet's last `FailedCreate` (by DaemonSet UID), with its Event's UID.
    failed_create_events: FastMap<Str, (Str, failed_create::FailedCreate)>,
    events_read: EventsRead,
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

    /// Sets the clock used to stamp transitions, and forgets the losses older than the
    /// retention. The caller owns time, so tests can too.
    pub fn set_now(&mut self, now: Timestamp) {
        // Called on every event: the reasons are counted once a second at most.
        let ticked = now != self.now;
        self.now = now;
        if ticked {
            self.mature_uncovered();
            let reasons = self.uncovered_reasons();
            if reasons != self.uncovered_reasons_seen {
                self.uncovered_reasons_seen = reasons;
                self.generation += 1;
            }
        }
        if self.next_loss_expiry.is_none_or(|due| now < due) {
            return;
        }
        let retention = self.config.lost_retention;
        let mut next: Option<Timestamp> = None;
        for state in self.states.values_mut() {
            if state.expire_losses(now, retention) {
                self.generation += 1;
            }
            let due = state.lost.values().map(|loss| loss.expires_at(retention)).min();
            next = next.into_iter().chain(due).min();
        }
        self.next_loss_expiry = next;
    }

    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Looks up what each of `events` will read of the cache, before any is applied (see
    /// [`Indexed::warm`]); changes nothing.
    pub fn warm<K: Indexed>(&self, events: &[Event<K>]) {
        K::warm(events, self);
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
                obj.convert(&mut self.interner)?.upsert(self);
            }
            Event::Delete(obj) => {
                // Only the key is needed: read it from the metadata rather than convert the object.
                K::Compact::remove(self, &<K::Compact as Stored>::Key::from(obj.raw_key()?));
            }
            Event::Init => {
                // A relist restarted mid-way starts from an empty buffer.
                K::Compact::store(self).relist_buffer(scope).clear();
            }
            Event::InitApply(obj) => {
                let compact = obj.convert(&mut self.interner)?;
                K::Compact::store(self).relist_buffer(scope).push(compact);
            }
            Event::InitDone => {
                let store = K::Compact::store(self);
                let fresh = store.take_relist(scope);
                let in_scope = |obj: &K::Compact| scope.is_none_or(|ns| obj.namespace().is_some_and(|n| **n == *ns));
                let gone: Vec<_> = if store.objects.is_empty() {
                    Vec::new()
                } else {
                    let listed: FastSet<_> = fresh.iter().map(|obj| obj.key()).collect();
                    store
                        .objects
                        .iter()
                        .filter(|(k, obj)| in_scope(obj) && !listed.contains(k))
                        .map(|(k, _)| k.clone())
                        .collect()
                };
                store.objects.reserve(fresh.len().saturating_sub(store.objects.len()));
                self.replaying = true;
                for key in gone {
                    K::Compact::remove(self, &key);
                }
                let (mut fresh, mut run) = (fresh.into_iter(), Vec::with_capacity(WARM_RUN));
                loop {
                    run.extend(fresh.by_ref().take(WARM_RUN));
                    if run.is_empty() {
                        break;
                    }
                    K::Compact::warm_upserts(&run, self);
                    run.drain(..).for_each(|obj| obj.upsert(self));
                }
                self.replaying = false;
                let was_synced = self.synced();
                K::Compact::store(self).synced_scopes.insert(scope.map(str::to_owned));
                if !was_synced && self.synced() {
                    self.find_uncovered();
                }
                // A completed list changes what the index can claim (it may be synced now),
                // even when it changed no object.
                self.generation += 1;
                self.interner.collect_garbage();
            }
        }
        // Between events only: a change reads a node's number once and keeps it to its end.
        self.sweep_node_ids();
        Ok(())
    }

    /// Frees the numbers of the node names not cached that no DaemonSet claims a pod on any
    /// more, when enough may have died for it to pay.
    fn sweep_node_ids(&mut self) {
        if self.node_ids.sweep_due(self.nodes.objects.len()) {
            let states = &self.states;
            self.node_ids.sweep(|id| states.values().any(|state| state.claims().get(id).is_some()));
        }
    }

    /// A complete list of one resource, as a watch's initial list delivers it: what is
    /// not listed is gone once it completes.
    pub fn relist<K: Indexed>(&mut self, objects: impl IntoIterator<Item = K>) -> Result<(), ConvertError> {
        self.apply(Event::<K>::Init)?;
        for obj in objects {
            self.apply(Event::InitApply(obj))?;
        }
        self.apply(Event::<K>::InitDone)
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
        Since { at: self.now, observed: self.synced() && !self.replaying, generation: self.generation }
    }
}
