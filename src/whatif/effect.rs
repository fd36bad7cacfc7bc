//! What the DaemonSet controller does to one (DaemonSet, node) pair when a change moves
//! it: the controller's `podsShouldBeOnNode` over the two answers of
//! `NodeShouldRunDaemonPod`, before and after. Pure.

use serde::{Deserialize, Serialize};

use crate::rules::eligibility::Skip;

/// `NodeShouldRunDaemonPod` for a pair, as the controller acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// `shouldRun`: the node gets a pod.
    Run,
    /// Not `shouldRun` but `shouldContinueRunning` (only NoSchedule taints block): a pod
    /// there keeps running and counts as misscheduled.
    Continue,
    /// Neither: a pod there is deleted at once. Also a DaemonSet that does not exist yet.
    Stop,
}

impl Fit {
    pub fn of(skip: Option<&Skip>) -> Self {
        match skip {
            None => Fit::Run,
            Some(skip) if skip.should_continue_running() => Fit::Continue,
            Some(_) => Fit::Stop,
        }
    }
}

/// What the controller does to a pair a change moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// A pod is there and may not continue: the controller deletes it at once.
    Delete,
    /// A pod is there and may continue but should not run: it keeps running, misscheduled.
    Misschedule,
    /// A pod is there and the node is eligible again: it counts as scheduled.
    Recover,
    /// No pod is there and the node becomes eligible: the controller creates one.
    Create,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Delete => "delete",
            Effect::Misschedule => "misschedule",
            Effect::Recover => "recover",
            Effect::Create => "create",
        }
    }

    /// Whether a pre-merge check should stop on it (`--exit-code`).
    pub fn disrupts(self) -> bool {
        matches!(self, Effect::Delete | Effect::Misschedule)
    }

    /// What it means, for the wide table.
    pub fn meaning(self) -> &'static str {
        match self {
            Effect::Delete => "deleted at once: shouldContinueRunning turns false",
            Effect::Misschedule => "keeps running, counted misscheduled: shouldRun turns false",
            Effect::Recover => "counted as scheduled again: shouldRun turns true",
            Effect::Create => "the controller creates a pod: shouldRun turns true",
        }
    }
}

/// The effect on a pair with a pod that is not being deleted (`running`), or with no pod
/// at all. A pair whose only pods are terminating is not asked: the controller neither
/// deletes nor creates there until they are gone.
pub fn effect(before: Fit, after: Fit, running: bool) -> Option<Effect> {
    match (running, before, after) {
        // `!shouldContinueRunning && exists`: every pod not yet terminating is deleted.
        (true, Fit::Run | Fit::Continue, Fit::Stop) => Some(Effect::Delete),
        (true, Fit::Run, Fit::Continue) => Some(Effect::Misschedule),
        // A pod the controller was about to delete (a snapshot can hold one) also stays.
        (true, Fit::Continue | Fit::Stop, Fit::Run) => Some(Effect::Recover),
        // `shouldRun && !exists`.
        (false, Fit::Continue | Fit::Stop, Fit::Run) => Some(Effect::Create),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_answers() {
        use Effect::*;
        use Fit::*;
        // (before, after, effect with a running pod, effect with no pod)
        let table = [
            (Run, Run, None, None),
            (Run, Continue, Some(Misschedule), None),
            (Run, Stop, Some(Delete), None),
            (Continue, Run, Some(Recover), Some(Create)),
            (Continue, Continue, None, None),
            (Continue, Stop, Some(Delete), None),
            (Stop, Run, Some(Recover), Some(Create)),
            // The pod may stay now, but stays misscheduled: nothing the controller does changes.
            (Stop, Continue, None, None),
            (Stop, Stop, None, None),
        ];
        for (before, after, with_pod, without) in table {
            assert_eq!(effect(before, after, true), with_pod, "{before:?} -> {after:?} with a pod");
            assert_eq!(effect(before, after, false), without, "{before:?} -> {after:?} without a pod");
        }
    }

    #[test]
    fn only_a_no_schedule_taint_lets_a_pod_continue() {
        let taint = |no_execute| Skip::Taint { key: "k".into(), no_execute };
        assert_eq!(Fit::of(None), Fit::Run);
        assert_eq!(Fit::of(Some(&taint(false))), Fit::Continue);
        assert_eq!(Fit::of(Some(&taint(true))), Fit::Stop);
        assert_eq!(Fit::of(Some(&Skip::NodeSelector { key: "k".into() })), Fit::Stop);
        assert_eq!(Fit::of(Some(&Skip::NodeAffinity { key: "k".into() })), Fit::Stop);
        assert_eq!(Fit::of(Some(&Skip::NodeName)), Fit::Stop);
    }
}
