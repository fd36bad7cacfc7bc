//! Compact, plain-data views of the Kubernetes objects the classifier reads.
//!
//! Nothing here knows about k8s-openapi; `convert` builds these from API
//! objects. Strings that repeat across many objects (label keys and values,
//! node names, namespaces) are shared `Arc<str>`s from the index's interner.

use std::sync::Arc;

pub mod interner;
mod labels;
mod pod;
mod pod_id;
pub mod text;
mod thin;
mod uid;

pub use labels::{Label, LabelSet};
pub use pod::{Deletion, Pod, PodHealth, PodLife};
pub use pod_id::{PodId, PodScope};
pub use thin::ThinStr;
pub use uid::Uid;

pub type Str = Arc<str>;

/// Maps and sets for the caches (see Cargo.toml on foldhash).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// Unix time in seconds.
pub type Timestamp = i64;

/// A sorted, shared set of labels. Daemon pods of one revision share one.
pub type Labels = Arc<LabelSet>;

/// A shared list of label or taint keys: nodes of a kind list the same ones (NFD's, and
/// what each field manager owns), so the interner keeps each list once.
pub type Keys = Arc<[Str]>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// An effect this version does not know; it never blocks scheduling.
    Other,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Self {
        match s {
            "NoSchedule" => Self::NoSchedule,
            "PreferNoSchedule" => Self::PreferNoSchedule,
            "NoExecute" => Self::NoExecute,
            _ => Self::Other,
        }
    }

    /// A toleration's effect: empty means every effect.
    pub fn parse_optional(s: &str) -> Option<Self> {
        (!s.is_empty()).then(|| Self::parse(s))
    }

    /// Only these effects keep the DaemonSet controller from running a pod.
    pub fn blocks_daemon_pods(self) -> bool {
        matches!(self, Self::NoSchedule | Self::NoExecute)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: Str,
    pub value: Str,
    pub effect: TaintEffect,
    pub time_added: Option<Timestamp>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    Exists,
    /// `Equal`, or the empty operator which means `Equal`.
    #[default]
    Equal,
    /// Anything else (e.g. the 1.35 alpha `Gt`/`Lt`): tolerates nothing.
    Unsupported,
}

impl TolerationOperator {
    pub fn parse(s: &str) -> Self {
        match s {
            "" | "Equal" => Self::Equal,
            "Exists" => Self::Exists,
            _ => Self::Unsupported,
        }
    }
}

/// A toleration as the model reads it: (key, operator, value, effect).
pub type TolerationParts<'a> = (&'a str, TolerationOperator, &'a str, Option<TaintEffect>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty means "every key" (valid only with `Exists`).
    pub key: Str,
    pub operator: TolerationOperator,
    pub value: Str,
    /// `None` means "every effect".
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn parts(&self) -> TolerationParts<'_> {
        (&self.key, self.operator, &self.value, self.effect)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    /// An operator the API server would reject; the requirement never matches.
    Invalid,
}

impl SelectorOperator {
    pub fn parse(s: &str) -> Self {
        match s {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => Self::Invalid,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: Str,
    pub operator: SelectorOperator,
    pub values: Vec<Str>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    pub match_fields: Vec<Requirement>,
    /// The key of the first requirement upstream cannot parse, which fails the whole term.
    /// Set once, by `rules::eligibility::node_selector_term`: every node event checks the
    /// node against every DaemonSet's terms.
    pub unparsable: Option<Str>,
}

/// The part of a pod template that decides where a daemon pod may run.
/// One is shared by every pod of a DaemonSet revision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Placement {
    pub node_name: Option<Str>,
    /// Sorted by key, as the map it came from.
    pub node_selector: Vec<(Str, Str)>,
    /// `None` when there is no required node affinity at all; `Some(vec![])`
    /// when it is present with no terms, which matches no node.
    pub required_terms: Option<Vec<NodeSelectorTerm>>,
    pub tolerations: Vec<Toleration>,
    pub host_network: bool,
}

/// A DaemonSet's `spec.selector`, compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelSelector {
    /// A missing selector selects nothing.
    Nothing,
    /// An empty selector ("selecting all pods") or one `labels.NewRequirement` rejects:
    /// the controller refuses to sync the DaemonSet at all.
    Refused,
    Requirements(Vec<Requirement>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: Str,
    pub labels: Labels,
    pub taints: Box<[Taint]>,
    /// Label keys NFD says it owns (`nfd.node.kubernetes.io/feature-labels`), fully qualified.
    pub nfd_label_keys: Keys,
    /// Taint keys NFD says it owns (`nfd.node.kubernetes.io/taints`).
    pub nfd_taint_keys: Keys,
    /// Who wrote its labels and taints.
    pub managers: NodeManagers,
    /// What it was read from (`convert::node`); `None` when it was built by hand.
    pub fingerprint: Option<Fingerprint>,
}

/// A 64-bit hash of what the model keeps of an object, in the form it was read: a watch
/// event equal to the last one is told by comparing two of these, where walking the cached
/// labels, taints and owners would chase pointers that, at 65,000 nodes, miss the cache.
/// Seeded at random once per process, so no one can make a change that hashes as what it
/// replaced; two that differ hash alike by chance once in 2^64 (at a million changes a
/// second, once in 500,000 years). Objects read alike have equal ones; two read differently
/// that make the same node (NFD naming a label with its prefix, then without) are applied
/// as a change that changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(std::num::NonZeroU64);

impl Fingerprint {
    /// The fingerprint of what `write` hashes (0, which `Option` needs, is read as 1).
    pub fn of(write: impl FnOnce(&mut foldhash::quality::FoldHasher<'static>)) -> Self {
        use std::hash::{BuildHasher, Hasher};
        static SEED: std::sync::LazyLock<foldhash::quality::RandomState> = std::sync::LazyLock::new(Default::default);
        let mut hasher = SEED.build_hasher();
        write(&mut hasher);
        Self(std::num::NonZeroU64::new(hasher.finish()).unwrap_or(std::num::NonZeroU64::MIN))
    }
}

/// Who wrote a node's labels and taints: its `managedFields` owners, and what the index
/// saw happen while it watched (`rules::attribution` keeps and reads it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeManagers {
    /// The managedFields entries that own labels or the taint list.
    pub owners: Box<[FieldOwner]>,
    /// What the index saw, when it saw anything: boxed, as few nodes have any (`None`
    /// rather than empty, so that equal nodes compare equal).
    seen: Option<Box<SeenManagers>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SeenManagers {
    taint_added_by: Vec<(Str, Str)>,
    label_removed_by: Vec<(Str, Str)>,
}

impl NodeManagers {
    pub fn new(owners: Box<[FieldOwner]>) -> Self {
        Self { owners, seen: None }
    }

    /// Who added each taint, for taints seen appearing or present when the list changed
    /// hands. A taint without an entry was there from the start: the list owner wrote it.
    pub fn taint_added_by(&self) -> &[(Str, Str)] {
        self.seen.as_ref().map_or(&[], |seen| &seen.taint_added_by)
    }

    /// Who removed labels some DaemonSet selects on, while they stay absent.
    pub fn label_removed_by(&self) -> &[(Str, Str)] {
        self.seen.as_ref().map_or(&[], |seen| &seen.label_removed_by)
    }

    pub fn set_seen(&mut self, taint_added_by: Vec<(Str, Str)>, label_removed_by: Vec<(Str, Str)>) {
        let seen = SeenManagers { taint_added_by, label_removed_by };
        self.seen = (seen != SeenManagers::default()).then(|| Box::new(seen));
    }

    /// The heap bytes of what was seen, for `index::footprint`.
    pub fn seen_bytes(&self) -> usize {
        self.seen.as_ref().map_or(0, |seen| {
            let pairs = seen.taint_added_by.capacity() + seen.label_removed_by.capacity();
            size_of::<SeenManagers>() + pairs * size_of::<(Str, Str)>()
        })
    }
}

/// One managedFields entry, reduced to what it owns of labels and taints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldOwner {
    /// Who, and what it owns: the same on every node of a kind, so shared (16 bytes where
    /// the three took 40, for each of a node's two or three owners).
    pub owns: Arc<OwnedFields>,
    /// When it last wrote (unix seconds): a new time marks the writer of an update.
    pub time: Timestamp,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OwnedFields {
    pub manager: Str,
    pub labels: Keys,
    /// `spec.taints` is an atomic list: its one owner is whoever wrote it last.
    pub taints: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub namespace: Str,
    pub name: Str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSet {
    pub uid: Str,
    pub id: ObjectRef,
    pub selector: LabelSelector,
    pub template: Arc<Placement>,
    /// What the controller last wrote, if it wrote anything.
    pub status: Option<DaemonSetStatus>,
    /// `deletionTimestamp` is set: the controller no longer syncs it (no status, no adoption).
    pub deleting: bool,
    /// `spec.minReadySeconds`: how long a pod must have been Ready to count as available.
    pub min_ready_seconds: u32,
    /// `misschedule.io/guard: deny`: the admission guard refuses changes that would delete
    /// or strand its pods (`rules::admission`).
    pub refuses_disruption: bool,
}

impl DaemonSet {
    /// Whether the controller syncs it, and so writes its status and adopts orphans.
    pub fn is_synced_by_controller(&self) -> bool {
        !self.deleting && self.selector != LabelSelector::Refused
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaemonSetStatus {
    pub number_misscheduled: i64,
    pub desired_number_scheduled: i64,
}

/// The label the DaemonSet controller puts on each pod and revision it makes: which
/// ControllerRevision the pod came from.
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// A DaemonSet ControllerRevision: the template a pod was created from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    pub uid: Str,
    pub id: ObjectRef,
    pub owner_uid: Option<Str>,
    pub hash: Option<Str>,
    pub placement: Arc<Placement>,
}

/// The placement fields a pod and a pod template share, read the same way for both
/// (implemented by the wire shapes in `k8s`).
pub trait PlacementSpec {
    /// The nodeSelector's pairs, sorted by key.
    fn node_selector(&self) -> impl Iterator<Item = (&str, &str)>;
    fn tolerations(&self) -> impl Iterator<Item = TolerationParts<'_>>;
    fn host_network(&self) -> bool;
}
