//! Lost coverage: a node a DaemonSet stopped covering. The controller deletes a daemon pod
//! at once when its node stops matching the DaemonSet's nodeSelector or required affinity,
//! or gains an untolerated NoExecute taint; once the delete finishes, nothing is
//! misscheduled and the node simply has no agent. The index remembers such a pair as a
//! loss, with the verdict its last pod had as a misscheduled pod. Pure: the rule for one
//! pair is [`step`].

use super::Since;
use crate::model::{Str, Timestamp};
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
    /// When coverage ended: seen live, or else the delete request, the best evidence.
    pub(super) fn started(&self) -> Timestamp {
        match self.verdict.deletion_requested {
            Some(requested) if !self.since.observed => requested.min(self.since.at),
            _ => self.since.at,
        }
    }

    /// Forgotten `retention` seconds after the index recorded it.
    pub(super) fn expires_at(&self, retention: Timestamp) -> Timestamp {
        self.since.at.saturating_add(retention)
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

/// The rule for one pair. `lost`: a loss is recorded for it. `parting`: the change took the
/// last pod of the pair while the pair was misscheduled.
///
/// A loss ends when the DaemonSet counts a pod on the node again, or when the node goes. A
/// node that became eligible again but has no pod yet is still uncovered: the controller
/// has yet to create one, so the loss stays until it does.
pub(super) fn step(lost: bool, parting: bool, pair: Pair) -> Step {
    match (lost, pair) {
        (true, Pair { node_exists: false, .. } | Pair { has_pod: true, .. }) => Step::End,
        (true, _) => Step::Keep,
        (false, Pair { node_exists: true, skipped: true, has_pod: false }) if parting => Step::Start,
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
    fn a_loss_starts_when_seen_or_at_the_delete_request_it_did_not_see() {
        assert_eq!(loss(1_000, true, Some(900)).started(), 1_000, "seen live: the moment itself");
        assert_eq!(loss(1_000, false, Some(900)).started(), 900, "replayed: the delete request");
        assert_eq!(loss(1_000, false, None).started(), 1_000, "no evidence: when it was recorded");
        assert_eq!(loss(1_000, false, Some(2_000)).started(), 1_000, "never after it was recorded");
    }

    #[test]
    fn a_loss_is_forgotten_after_the_retention() {
        assert_eq!(loss(1_000, true, None).expires_at(DEFAULT_RETENTION_SECONDS), 1_000 + 86_400);
        assert_eq!(loss(i64::MAX - 1, true, None).expires_at(10), i64::MAX);
    }
}
