//! Why a node a DaemonSet should run on has no available daemon pod: one reason and a short
//! detail. Pure: the pod's health as the index keeps it (`model::PodHealth`), or its
//! absence, and the clock.
//!
//! Availability is `podutil.IsPodAvailable` as `updateDaemonSetStatus` counts
//! `numberAvailable`: the pod's Ready condition is True (`minReadySeconds` aside, see
//! docs/reasons.md). A pod that is not available is one of the reasons below, named after
//! what the scheduler or the kubelet wrote in its status.

use std::fmt;

use crate::model::{PodHealth, Timestamp};

/// How long a pod may be on its way (created, bound, containers starting, not Ready yet)
/// before that is no longer "starting": a readiness probe's initial delay, an image pull.
pub const STARTING_GRACE_SECONDS: Timestamp = 5 * 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Uncovered {
    /// The controller cannot create the pod (a quota, an admission webhook, Pod Security).
    CreateFailed,
    /// The scheduler cannot place the pod on its node (`PodScheduled=False`, `Unschedulable`).
    Unschedulable,
    /// `ErrImagePull`, `ImagePullBackOff` and the like.
    ImagePull,
    /// `CrashLoopBackOff`.
    CrashLoop,
    /// `CreateContainerConfigError` (a missing Secret or ConfigMap), `CreateContainerError`.
    ConfigError,
    /// Running, or still creating, but not Ready past the grace period.
    NotReady,
    /// On its way: created or bound moments ago, or being replaced. Expected.
    Starting,
}

impl Uncovered {
    pub const ALL: [Uncovered; 7] = [
        Uncovered::CreateFailed,
        Uncovered::Unschedulable,
        Uncovered::ImagePull,
        Uncovered::CrashLoop,
        Uncovered::ConfigError,
        Uncovered::NotReady,
        Uncovered::Starting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Uncovered::CreateFailed => "create_failed",
            Uncovered::Unschedulable => "unschedulable",
            Uncovered::ImagePull => "image_pull",
            Uncovered::CrashLoop => "crash_loop",
            Uncovered::ConfigError => "config_error",
            Uncovered::NotReady => "not_ready",
            Uncovered::Starting => "starting",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_name(name: &str) -> Option<Uncovered> {
        Uncovered::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Runs its course without anyone: a pod on its way.
    pub fn expected(self) -> bool {
        self == Uncovered::Starting
    }
}

impl fmt::Display for Uncovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `podutil.IsPodAvailable`: Ready, and Ready for longer than `min_ready_seconds` (since
/// `ready_since`, the Ready condition's lastTransitionTime) when that is set.
pub fn is_available(health: PodHealth, ready_since: Timestamp, min_ready_seconds: u32, now: Timestamp) -> bool {
    health == PodHealth::Ready && (min_ready_seconds == 0 || ready_since + Timestamp::from(min_ready_seconds) < now)
}

/// The reason for a pod that is not available, in health `health` since `since`, at `now`.
/// `None` when it is available. A pod being deleted is being replaced (a rollout, an
/// eviction): starting.
pub fn pod_reason(health: PodHealth, since: Timestamp, deleting: bool, now: Timestamp) -> Option<Uncovered> {
    let on_its_way = now.saturating_sub(since) < STARTING_GRACE_SECONDS;
    Some(match health {
        PodHealth::Ready => return None,
        _ if deleting => Uncovered::Starting,
        PodHealth::Unschedulable => Uncovered::Unschedulable,
        PodHealth::ImagePull => Uncovered::ImagePull,
        PodHealth::CrashLoop => Uncovered::CrashLoop,
        PodHealth::ConfigError => Uncovered::ConfigError,
        PodHealth::Pending | PodHealth::Creating | PodHealth::NotReady if on_its_way => Uncovered::Starting,
        PodHealth::Pending | PodHealth::Creating | PodHealth::NotReady => Uncovered::NotReady,
    })
}

/// The reason for an eligible node with no pod at all, missing since `since` (only an
/// upper bound unless `since_known`). A `FailedCreate` the controller wrote for the
/// DaemonSet at `failed_create_at`, after the node went missing (or at any time, when that
/// moment is not known), says it tried and was refused: no grace. Without one, a pod not
/// made past the grace period is a failed create all the same (the Event may have expired,
/// or not be readable).
pub fn missing_reason(
    failed_create_at: Option<Timestamp>,
    since: Timestamp,
    since_known: bool,
    now: Timestamp,
) -> Uncovered {
    let refused = failed_create_at.is_some_and(|at| !since_known || at >= since);
    if refused || now.saturating_sub(since) >= STARTING_GRACE_SECONDS {
        Uncovered::CreateFailed
    } else {
        Uncovered::Starting
    }
}

/// The detail of a `FailedCreate` Event, as `RealPodControl.createPods` words it
/// (`Error creating: <the API server's refusal>`): the refusal alone, without the generated
/// pod name (a new one each attempt) or the correlator's `(combined from similar events)`,
/// so one cause reads the same on every node and every retry.
///
/// `Error creating: pods "agent-x7k2p" is forbidden: exceeded quota: q, …` →
/// `forbidden: exceeded quota: q, …`.
pub fn create_detail(message: &str) -> String {
    let message = message.trim_start_matches("(combined from similar events): ");
    let refusal = message.strip_prefix("Error creating: ").unwrap_or(message);
    let without_name =
        refusal.strip_prefix("pods \"").and_then(|rest| rest.split_once("\" is ")).map_or(refusal, |(_, tail)| tail);
    short(without_name)
}

/// What the kubelet's waiting reason of a container says (`kuberuntime`'s and the image
/// manager's reasons); `None` for one that is only on its way (`ContainerCreating`,
/// `PodInitializing`).
pub fn waiting_health(reason: &str) -> Option<PodHealth> {
    match reason {
        "ErrImagePull"
        | "ImagePullBackOff"
        | "InvalidImageName"
        | "ErrImageNeverPull"
        | "RegistryUnavailable"
        | "SignatureValidationFailed" => Some(PodHealth::ImagePull),
        "CrashLoopBackOff" => Some(PodHealth::CrashLoop),
        "CreateContainerConfigError"
        | "CreateContainerError"
        | "RunContainerError"
        | "PreCreateHookError"
        | "PreStartHookError"
        | "PostStartHookError" => Some(PodHealth::ConfigError),
        _ => None,
    }
}

/// The scheduler's reasons for the pod's own node, from its `PodScheduled` message. A
/// daemon pod is pinned to one node by `matchFields`, so every other node fails node
/// affinity: those counts are noise, as is the preemption summary. What is left are the
/// target node's reasons, the same words on every node that fails the same way, so the
/// detail stays a small set however many nodes do.
///
/// `0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 2 node(s) didn't
/// satisfy plugin(s) [NodeAffinity]. preemption: …` → `Insufficient cpu, Insufficient memory`.
pub fn scheduler_detail(message: &str) -> String {
    let summary = message.split(". preemption:").next().unwrap_or(message).trim_end_matches('.');
    let reasons = summary.split_once("nodes are available: ").map_or(summary, |(_, reasons)| reasons);
    let kept: Vec<&str> = counted_items(reasons)
        .into_iter()
        .filter(|item| !AFFINITY_NOISE.iter().any(|noise| item.contains(noise)))
        .collect();
    if kept.is_empty() { summary.trim().to_owned() } else { kept.join(", ") }
}

/// How the scheduler says a node failed node affinity: every other node does, for a daemon
/// pod. 1.33-1.37 (recorded in tests/fixtures/scheduler-messages), and older releases.
const AFFINITY_NOISE: [&str; 3] = [
    "didn't satisfy plugin(s) [NodeAffinity]",
    "didn't match Pod's node affinity/selector",
    "didn't match node selector",
];

/// `1 Insufficient cpu, 2 node(s) had untolerated taint {a: b}` → each item without its
/// count. Items are split at ", " followed by a count, since an item's own text may hold a
/// comma.
fn counted_items(reasons: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut rest = reasons;
    loop {
        let next = rest.match_indices(", ").find(|(at, _)| rest[at + 2..].starts_with(|c: char| c.is_ascii_digit()));
        let (item, tail) = match next {
            Some((at, _)) => (&rest[..at], Some(&rest[at + 2..])),
            None => (rest, None),
        };
        let item = item.trim();
        let without_count = item.split_once(' ').filter(|(n, _)| n.parse::<u64>().is_ok()).map_or(item, |(_, t)| t);
        if !without_count.is_empty() {
            items.push(without_count);
        }
        match tail {
            Some(tail) => rest = tail,
            None => return items,
        }
    }
}

/// At most this many characters of a message kept as a detail: a label value is no essay.
pub const DETAIL_MAX: usize = 160;

/// A message cut to [`DETAIL_MAX`] on a character boundary, its first line only.
pub fn short(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim();
    if line.len() <= DETAIL_MAX {
        return line.to_owned();
    }
    let mut at = DETAIL_MAX - '…'.len_utf8();
    while !line.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}…", &line[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_nodes_reasons_are_kept_and_the_affinity_noise_cut() {
        let cases = [
            (
                "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
                "Insufficient cpu, Insufficient memory",
            ),
            (
                "0/500 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu, other}, 499 node(s) didn't match Pod's node affinity/selector.",
                "node(s) had untolerated taint {dedicated: gpu, other}",
            ),
            (
                "0/1 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity].",
                "0/1 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity]",
            ),
            ("something else entirely", "something else entirely"),
        ];
        for (message, detail) in cases {
            assert_eq!(scheduler_detail(message), detail, "{message}");
        }
    }

    #[test]
    fn a_pod_not_available_has_one_reason() {
        use PodHealth::*;
        let now = 10_000;
        assert_eq!(pod_reason(Ready, 0, false, now), None);
        assert_eq!(pod_reason(ImagePull, now, false, now), Some(Uncovered::ImagePull), "a fact at once");
        assert_eq!(pod_reason(Unschedulable, now, false, now), Some(Uncovered::Unschedulable));
        assert_eq!(pod_reason(Creating, now - 60, false, now), Some(Uncovered::Starting));
        assert_eq!(pod_reason(Creating, now - 600, false, now), Some(Uncovered::NotReady), "past the grace");
        assert_eq!(pod_reason(NotReady, now - 600, false, now), Some(Uncovered::NotReady));
        assert_eq!(pod_reason(CrashLoop, now - 600, true, now), Some(Uncovered::Starting), "being replaced");
        assert_eq!(missing_reason(Some(now), now - 10, true, now), Uncovered::CreateFailed, "refused since");
        assert_eq!(missing_reason(Some(now - 60), now - 10, true, now), Uncovered::Starting, "refused before");
        assert_eq!(missing_reason(Some(now - 60), now, false, now), Uncovered::CreateFailed, "missing for long?");
        assert_eq!(missing_reason(None, now - 10, true, now), Uncovered::Starting);
        assert_eq!(missing_reason(None, now - 600, true, now), Uncovered::CreateFailed);
    }

    #[test]
    fn a_failed_create_reads_the_same_on_every_retry() {
        let cases = [
            (
                "Error creating: pods \"agent-x7k2p\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2",
                "forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2",
            ),
            (
                "(combined from similar events): Error creating: pods \"agent-9qz4d\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces",
                "forbidden: violates PodSecurity \"baseline:latest\": host namespaces",
            ),
            (
                "Error creating: Internal error occurred: failed calling webhook \"w.example.com\"",
                "Internal error occurred: failed calling webhook \"w.example.com\"",
            ),
        ];
        for (message, detail) in cases {
            assert_eq!(create_detail(message), detail, "{message}");
        }
    }

    #[test]
    fn available_is_ready_for_longer_than_min_ready_seconds() {
        use PodHealth::*;
        assert!(is_available(Ready, 100, 0, 100), "at once without minReadySeconds");
        assert!(!is_available(Ready, 100, 10, 110), "not at exactly minReadySeconds");
        assert!(is_available(Ready, 100, 10, 111));
        assert!(!is_available(NotReady, 0, 0, 1_000));
    }

    #[test]
    fn kubelet_waiting_reasons() {
        assert_eq!(waiting_health("ImagePullBackOff"), Some(PodHealth::ImagePull));
        assert_eq!(waiting_health("CrashLoopBackOff"), Some(PodHealth::CrashLoop));
        assert_eq!(waiting_health("CreateContainerConfigError"), Some(PodHealth::ConfigError));
        assert_eq!(waiting_health("ContainerCreating"), None);
    }

    #[test]
    fn a_detail_is_short() {
        assert_eq!(short("secret \"x\" not found\nmore"), "secret \"x\" not found");
        let long = "é".repeat(200);
        assert!(short(&long).len() <= DETAIL_MAX && short(&long).ends_with('…'));
    }

    #[test]
    fn names_round_trip() {
        for reason in Uncovered::ALL {
            assert_eq!(Uncovered::from_name(reason.as_str()), Some(reason));
        }
    }
}
