//! A daemon pod as the index keeps it: millions of them at the largest scale, so each is
//! 56 bytes, with what it shares with its DaemonSet's other pods behind one pointer and
//! what few pods have boxed behind another.

use std::fmt;

use super::{LabelSet, Placement, PodId, REVISION_HASH_LABEL, ThinStr, Timestamp, Uid};
use crate::model::Str;

#[derive(Clone, PartialEq, Eq)]
pub struct Pod {
    pub uid: Uid,
    /// Its namespace, name and controller, and its labels and own placement, as its
    /// DaemonSet's other pods of its revision have them.
    pub id: PodId,
    /// `spec.nodeName`, else the controller's `matchFields metadata.name` term: behind one
    /// pointer, as the pod's 8 bytes are many.
    pub target_node: Option<ThinStr>,
    /// Few pods are being deleted or in trouble at any moment: boxed, so the rest are small.
    rare: Option<Box<RarePod>>,
    /// `creationTimestamp` in seconds, or `IN_RARE`: it does not fit, and `rare` has it.
    created: u32,
    /// Terminal, health and when it entered that health, in 4 bytes.
    state: State,
}

// The index holds a pod per daemon pod, each in a slot of its own size: 56 bytes is the
// budget, checked here. (At 2.6M daemon pods, 8 bytes more are 20 MiB.)
const _: () = assert!(std::mem::size_of::<Pod>() <= 56);

/// What a pod's metadata and status say of its life, unpacked: `Pod::new` packs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodLife {
    /// `creationTimestamp`, or 0 when there is none (the API server always sets one): read
    /// as a lower bound and a sort key, the epoch means the same as "unknown".
    pub created: Timestamp,
    pub deletion: Option<Deletion>,
    /// `status.phase` is Failed or Succeeded.
    pub terminal: bool,
    /// Whether it is available, and if not, what its status says instead.
    pub health: PodHealth,
    /// Seconds after `created` when the pod entered `health`, as its status says (the
    /// Ready or PodScheduled condition's lastTransitionTime); 0 when it does not say.
    pub health_offset: u32,
    /// Why it is not available, in the scheduler's or the kubelet's words, made short
    /// (`rules::uncovered`): the same words on every node that fails the same way.
    pub detail: Option<Str>,
    /// `spec.nodeName` is set: bound by the scheduler, or made for its node. It then never
    /// changes under the pod's UID (the binding refuses a bound pod, and an update may not
    /// touch it), which spares a status update comparing the node's name.
    pub bound: bool,
}

/// What few pods have: a delete, words on why it is not available, or a time that does not
/// fit the pod's compact form (before 1970 or after 2106; a health entered 4 years or more
/// after its creation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RarePod {
    deletion: Option<Deletion>,
    detail: Option<Str>,
    created: Option<Timestamp>,
    health_offset: Option<u32>,
}

/// What a daemon pod's status says about its availability (`podutil.IsPodAvailable`, with
/// `rules::uncovered` naming the rest). Four bits in the pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodHealth {
    /// The Ready condition is True.
    Ready,
    /// Not bound yet, and the scheduler has said nothing against it.
    #[default]
    Pending,
    /// Bound; containers being created (`ContainerCreating`, `PodInitializing`).
    Creating,
    /// Containers running, Ready is not True.
    NotReady,
    /// `PodScheduled=False`, reason `Unschedulable`.
    Unschedulable,
    ImagePull,
    CrashLoop,
    ConfigError,
}

impl PodHealth {
    /// Every health, in the order of their numbers in `State`.
    const ALL: [Self; 8] = [
        Self::Ready,
        Self::Pending,
        Self::Creating,
        Self::NotReady,
        Self::Unschedulable,
        Self::ImagePull,
        Self::CrashLoop,
        Self::ConfigError,
    ];
}

/// A value in the pod's compact form that says "the exact one is in `rare`".
const IN_RARE: u32 = u32::MAX;

/// Terminal (the top bit), health (the next four), bound (the next one) and the health
/// offset (the low 26 bits: up to 2 years; `OFFSET_IN_RARE` when it is longer).
#[derive(Clone, Copy, PartialEq, Eq)]
struct State(u32);

const HEALTH_SHIFT: u32 = 27;
const BOUND: u32 = 1 << 26;
const OFFSET_IN_RARE: u32 = BOUND - 1;
const TERMINAL: u32 = 1 << 31;
const _: () = assert!(PodHealth::ALL.len() <= 16, "health takes four bits");

impl State {
    fn new(terminal: bool, health: PodHealth, bound: bool, offset: u32) -> Self {
        let terminal = if terminal { TERMINAL } else { 0 };
        let bound = if bound { BOUND } else { 0 };
        Self(terminal | (health as u32) << HEALTH_SHIFT | bound | offset.min(OFFSET_IN_RARE))
    }

    fn terminal(self) -> bool {
        self.0 & TERMINAL != 0
    }

    fn health(self) -> PodHealth {
        PodHealth::ALL[(self.0 >> HEALTH_SHIFT & 0xf) as usize]
    }

    fn bound(self) -> bool {
        self.0 & BOUND != 0
    }

    fn offset(self) -> u32 {
        self.0 & OFFSET_IN_RARE
    }
}

impl Pod {
    pub fn new(uid: Uid, id: PodId, target_node: Option<ThinStr>, life: PodLife) -> Self {
        let PodLife { created, deletion, terminal, health, health_offset, detail, bound } = life;
        let compact_created = u32::try_from(created).ok().filter(|&c| c != IN_RARE);
        let state = State::new(terminal, health, bound, health_offset);
        let rare = RarePod {
            deletion,
            detail,
            created: compact_created.is_none().then_some(created),
            health_offset: (state.offset() == OFFSET_IN_RARE).then_some(health_offset),
        };
        Self {
            uid,
            id,
            target_node,
            rare: (rare != RarePod::default()).then(|| Box::new(rare)),
            created: compact_created.unwrap_or(IN_RARE),
            state,
        }
    }

    /// Everything `new` was given, unpacked again.
    pub fn life(&self) -> PodLife {
        PodLife {
            created: self.created(),
            deletion: self.deletion(),
            terminal: self.is_terminal(),
            health: self.health(),
            health_offset: self.health_offset(),
            detail: self.detail().cloned(),
            bound: self.is_bound(),
        }
    }

    /// Since 1.28 (1.26/1.27 patches) the status sync skips pods that are both terminal
    /// and deleted (`includeDeletedTerminal=false`); 1.20-1.25 counted them.
    pub fn counts_for_status(&self) -> bool {
        !(self.is_terminal() && self.deletion().is_some())
    }

    /// The node it runs on or is made for (`target_node`).
    pub fn target_node(&self) -> Option<&Str> {
        self.target_node.as_deref()
    }

    /// UID of its controller ownerReference (`PodScope::controller_uid`).
    pub fn controller_uid(&self) -> Option<&Str> {
        self.id.controller_uid()
    }

    /// `creationTimestamp` (`PodLife::created`).
    pub fn created(&self) -> Timestamp {
        match (self.created, &self.rare) {
            (IN_RARE, Some(rare)) => rare.created.unwrap_or_default(),
            (created, _) => Timestamp::from(created),
        }
    }

    /// Its delete, once requested.
    pub fn deletion(&self) -> Option<Deletion> {
        self.rare.as_ref().and_then(|r| r.deletion)
    }

    /// `status.phase` is Failed or Succeeded.
    pub fn is_terminal(&self) -> bool {
        self.state.terminal()
    }

    pub fn health(&self) -> PodHealth {
        self.state.health()
    }

    /// `spec.nodeName` is set (`PodLife::bound`).
    pub fn is_bound(&self) -> bool {
        self.state.bound()
    }

    /// Why it is not available, in the scheduler's or the kubelet's words.
    pub fn detail(&self) -> Option<&Str> {
        self.rare.as_ref().and_then(|r| r.detail.as_ref())
    }

    /// Seconds after `created` when it entered its health (`PodLife::health_offset`).
    pub fn health_offset(&self) -> u32 {
        match (self.state.offset(), &self.rare) {
            (OFFSET_IN_RARE, Some(rare)) => rare.health_offset.unwrap_or(OFFSET_IN_RARE),
            (offset, _) => offset,
        }
    }

    /// When it entered its health, as its status says.
    pub fn health_since(&self) -> Timestamp {
        self.created().saturating_add(Timestamp::from(self.health_offset()))
    }

    pub fn labels(&self) -> &LabelSet {
        &self.id.scope().labels
    }

    /// The pod's own nodeSelector and tolerations.
    pub fn own_placement(&self) -> &Placement {
        &self.id.scope().own_placement
    }

    /// Which ControllerRevision the pod came from (`controller-revision-hash`).
    pub fn revision_hash(&self) -> Option<&Str> {
        self.labels().get(REVISION_HASH_LABEL)
    }
}

impl fmt::Debug for Pod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pod")
            .field("uid", &self.uid)
            .field("id", &self.id)
            .field("labels", self.labels())
            .field("own_placement", self.own_placement())
            .field("target_node", &self.target_node)
            .field("life", &self.life())
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub timestamp: Timestamp,
    pub grace_period_seconds: i64,
}

impl Deletion {
    /// When the delete was requested: the deletionTimestamp is that moment plus the grace period.
    pub fn requested_at(self) -> Timestamp {
        self.timestamp - self.grace_period_seconds.max(0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::model::interner::Interner;

    fn health() -> impl Strategy<Value = PodHealth> {
        proptest::sample::select(PodHealth::ALL.to_vec())
    }

    /// Times near the edges of the compact form as often as anywhere else.
    fn time() -> impl Strategy<Value = Timestamp> {
        let edge = Timestamp::from(u32::MAX);
        prop_oneof![
            Just(0),
            Just(-1),
            (edge - 2..=edge + 2),
            Just(Timestamp::MIN),
            Just(Timestamp::MAX),
            any::<Timestamp>(),
            0..4_000_000_000i64
        ]
    }

    fn offset() -> impl Strategy<Value = u32> {
        prop_oneof![Just(0), OFFSET_IN_RARE - 2..=OFFSET_IN_RARE + 2, Just(u32::MAX), any::<u32>()]
    }

    prop_compose! {
        fn life()(
            created in time(),
            deletion in proptest::option::of((time(), any::<i64>())),
            terminal in any::<bool>(),
            health in health(),
            health_offset in offset(),
            detail in proptest::option::of("[a-z ]{0,12}"),
            bound in any::<bool>(),
        ) -> PodLife {
            let deletion = deletion.map(|(timestamp, grace_period_seconds)| Deletion { timestamp, grace_period_seconds });
            PodLife { created, deletion, terminal, health, health_offset, detail: detail.map(Str::from), bound }
        }
    }

    proptest! {
        /// The compact form loses nothing the rules or views read, and two pods are equal
        /// exactly when what they were made of is.
        #[test]
        fn a_pod_round_trips_through_its_compact_form(a in life(), b in life()) {
            let mut interner = Interner::default();
            let labels = interner.labels(std::iter::empty::<(&str, &str)>());
            let id = interner.pod_id("ns", "agent-x7k2p", Some("ds-uid"), labels, Arc::default());
            let pod = |life: &PodLife| Pod::new(Uid::parse("u"), id.clone(), None, life.clone());
            let (pa, pb) = (pod(&a), pod(&b));
            prop_assert_eq!(pa.life(), a.clone());
            prop_assert_eq!(pa == pb, a == b);
            let common = a.deletion.is_none() && a.detail.is_none() && (0..i64::from(IN_RARE)).contains(&a.created)
                && a.health_offset < OFFSET_IN_RARE;
            prop_assert_eq!(pa.rare.is_none(), common, "only what does not fit is boxed");
        }
    }
}
