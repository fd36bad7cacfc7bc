//! Ours: whether a pod that looks misscheduled may only look so because the index is
//! behind. The controller creates a daemon pod only on a node where it should run
//! (`podsShouldBeOnNode` in pkg/controller/daemon: `shouldRun` and no daemon pod there), so
//! a pod that arrives on a node the index already had as ineligible was made against a
//! version of the node (or of the DaemonSet) the index has yet to see. The watches are
//! separate streams, and the pods' may run ahead: the taint is gone, the controller's new
//! pod comes first, the node without the taint a moment later. (Or the controller's own
//! view was behind, and the pod really is misscheduled: that lasts, and is told a moment
//! later.)

use crate::model::Timestamp;

/// How long before its node's episode began a pod may have been created and still count
/// as arriving into it: the pod's `creationTimestamp` is in whole seconds and on the API
/// server's clock, the episode's start on the exporter's, and the pod's watch event takes
/// a moment to come.
pub const ARRIVAL_SLACK_SECONDS: Timestamp = 5;

/// Whether a pod created at `created` arrived on a node that was misscheduled from
/// `episode_start`, as the index saw it happen: the pod did not become misscheduled, it
/// came so, and the index's node (or DaemonSet) may be behind.
pub fn arrived_misscheduled(created: Timestamp, episode_start: Timestamp) -> bool {
    created.saturating_add(ARRIVAL_SLACK_SECONDS) >= episode_start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_made_before_its_node_changed_became_misscheduled_one_made_after_came_so() {
        let episode = 1_000;
        // A taint added an hour after the pod: the pod became misscheduled.
        assert!(!arrived_misscheduled(episode - 3_600, episode));
        // Created after the node stopped being eligible, as the index saw it.
        assert!(arrived_misscheduled(episode + 1, episode));
        assert!(arrived_misscheduled(episode, episode));
        // A little before the episode: other clocks, whole seconds and the watch's delay.
        assert!(arrived_misscheduled(episode - ARRIVAL_SLACK_SECONDS, episode));
        assert!(!arrived_misscheduled(episode - ARRIVAL_SLACK_SECONDS - 1, episode));
        assert!(!arrived_misscheduled(Timestamp::MIN, episode), "no overflow");
    }
}
