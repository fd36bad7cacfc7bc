//! Lost coverage: a node a DaemonSet stopped covering. The controller deletes a daemon pod
//! at once when its node stops matching the DaemonSet's nodeSelector or required affinity,
//! or gains an untolerated NoExecute taint; once the delete finishes, nothing is
//! misscheduled and the node simply has no agent. The index remembers such a pair as a
//! loss, with the verdict its last pod had as a misscheduled pod. Pure: the rule for one
//! pair is [`step`].
//!
//! The node, pod and DaemonSet streams are separate watches, and any of them may be behind
//! the others. So the index also keeps, per pair, what lets it see a loss in either order:
//! the last pod of an eligible pair that went with no replacement yet (`departed`: if the
//! node turns out skipped, the controller deleted it for that), and the pod of a misscheduled
//! episode that ended while the pod stayed ([`Flap`]: if that pod's delete was requested
//! during the episode, the controller deleted it for the skip the node no longer has).

use super::Since;
use crate::model::{Str, Timestamp, Uid};
use crate::rules::reason::{Classification, Reason};

/// The retention `--lost-node-retention` defaults to: a day, so a loss overnight is still
/// there in the morning.
pub const DEFAULT_RETENTION_SECONDS: Timestamp = 24 * 60 * 60;

/// Why a pair lost its pod: the verdict its last pod had as a misscheduled pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub reason: Reason,
    pub key: Str,
    /// The field manager that made the change, when known.
    pub manager: Option<Str>,
    /// When the pod's delete was requested, if it was: evidence of when coverage ended,
    /// for a loss the index did not see happen live.
    pub deletion_requested: Option<Timestamp>,
}

impl Verdict {
    pub(super) fn of(classification: Classification, deletion_requested: Option<Timestamp>) -> Self {
        let Classification { reason, key, manager, .. } = classification;
        Self { reason, key, manager, deletion_requested }
    }
}

/// One lost (DaemonSet, node) pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Loss {
    pub(super) verdict: Verdict,
    /// When the last pod went, as the index saw it.
    pub(super) since: Since,
}

impl Loss {
    /// When coverage ended: when the controller asked for the pod's delete, if it did,
    /// else when the pod went as the index saw it. A kubelet honours the grace period (30 s
    /// by default), so the pod object outlives the controller's decision.
    pub(super) fn started(&self) -> Timestamp {
        match self.verdict.deletion_requested {
            Some(requested) => requested.min(self.since.at),
            None => self.since.at,
        }
    }

    /// Forgotten `retention` seconds after the index recorded it.
    pub(super) fn expires_at(&self, retention: Timestamp) -> Timestamp {
        self.since.at.saturating_add(retention)
    }
}

/// The pod of a misscheduled episode that ended with the node eligible again while the pod
/// stayed, and the verdict it had. Kept only for skips the controller deletes for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Flap {
    pub(super) pod: Uid,
    pub(super) verdict: Verdict,
    /// The episode, as the index saw it.
    pub(super) from: Timestamp,
    pub(super) to: Timestamp,
}

/// deletionTimestamp has whole seconds, and the two clocks may differ by a little.
const FLAP_SLACK_SECONDS: Timestamp = 2;

impl Flap {
    /// The controller deleted `pod` for this episode's skip: it is the episode's pod, and
    /// its delete was requested while the episode lasted.
    pub(super) fn explains(&self, pod: &Uid, deletion_requested: Option<Timestamp>) -> bool {
        let window = self.from - FLAP_SLACK_SECONDS..=self.to + FLAP_SLACK_SECONDS;
        self.pod == *pod && deletion_requested.is_some_and(|at| window.contains(&at))
    }
}

/// A (DaemonSet, node) pair after a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pair {
    pub(super) node_exists: bool,
    /// `shouldRun` is false on the node.
    pub(super) skipped: bool,
    /// The DaemonSet counts a pod on the node.
    pub(super) has_pod: bool,
}

/// What a change does to a pair's loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Coverage was lost just now.
    Start,
    /// The loss is over: a pod is back, or the node is gone.
    End,
    /// Nothing changes.
    Keep,
}

/// The rule for one pair. `lost`: a loss is recorded for it. `parting`: the controller took
/// the pair's last pod for a skip: the pod went while the pair was misscheduled, or the
/// node turned out skipped after its pod went (`departed`), or the pod went after an
/// episode that explains its delete ([`Flap`]), when the node may be eligible again.
///
/// A loss ends when the DaemonSet counts a pod on the node again, or when the node goes. A
/// node that became eligible again but has no pod yet is still uncovered: the controller
/// has yet to create one, so the loss stays until it does.
pub(super) fn step(lost: bool, parting: bool, pair: Pair) -> Step {
    match (lost, pair) {
        (true, Pair { node_exists: false, .. } | Pair { has_pod: true, .. }) => Step::End,
        (true, _) => Step::Keep,
        (false, Pair { node_exists: true, has_pod: false, .. }) if parting => Step::Start,
        (false, _) => Step::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(node_exists: bool, skipped: bool, has_pod: bool) -> Pair {
        Pair { node_exists, skipped, has_pod }
    }

    #[test]
    fn the_rule_for_one_pair() {
        use Step::*;
        // (lost, parting, node exists, skipped, has pod) → step
        let table = [
            // The last pod of a misscheduled pair goes while the node stays and is skipped.
            (false, true, true, true, false, Start),
            // It went because the node went: nothing is uncovered.
            (false, true, false, false, false, Keep),
            // A pod left but another one counts there (the controller's replacement, or a second pod).
            (false, true, true, true, true, Keep),
            // A pod left an eligible node: a restart of the agent, not a loss (and not misscheduled before).
            (false, false, true, false, false, Keep),
            // A skipped node without a pod that never had one here: the DaemonSet never covered it.
            (false, false, true, true, false, Keep),
            // The controller's delete for a skip the node no longer has, seen late (`Flap`).
            (false, true, true, false, false, Start),
            // Lost: the node goes, or a pod counts there again (eligible or not).
            (true, false, false, false, false, End),
            (true, false, true, false, true, End),
            (true, false, true, true, true, End),
            // Lost, and the node is eligible again, but the controller has not made the pod yet.
            (true, false, true, false, false, Keep),
            // Lost and still skipped: stays lost.
            (true, false, true, true, false, Keep),
        ];
        for (lost, parting, node_exists, skipped, has_pod, expected) in table {
            assert_eq!(
                step(lost, parting, pair(node_exists, skipped, has_pod)),
                expected,
                "lost {lost}, parting {parting}, node {node_exists}, skipped {skipped}, pod {has_pod}"
            );
        }
    }

    fn loss(at: Timestamp, observed: bool, deletion_requested: Option<Timestamp>) -> Loss {
        let verdict = Verdict { reason: Reason::LabelDrift, key: "gpu".into(), manager: None, deletion_requested };
        Loss { verdict, since: Since { at, observed, generation: 0 } }
    }

    #[test]
    fn a_loss_starts_at_the_delete_request_or_else_when_seen() {
        assert_eq!(loss(1_000, true, Some(900)).started(), 900, "the controller's delete request, not the pod's end");
        assert_eq!(loss(1_000, false, Some(900)).started(), 900, "replayed: the delete request");
        assert_eq!(loss(1_000, true, None).started(), 1_000, "seen live, no request: the moment itself");
        assert_eq!(loss(1_000, false, None).started(), 1_000, "no evidence: when it was recorded");
        assert_eq!(loss(1_000, false, Some(2_000)).started(), 1_000, "never after it was recorded");
    }

    #[test]
    fn a_loss_is_forgotten_after_the_retention() {
        assert_eq!(loss(1_000, true, None).expires_at(DEFAULT_RETENTION_SECONDS), 1_000 + 86_400);
        assert_eq!(loss(i64::MAX - 1, true, None).expires_at(10), i64::MAX);
    }
}
