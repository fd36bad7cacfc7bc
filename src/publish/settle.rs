//! What one look at the index cannot trust yet. The node and pod watches are separate
//! streams, and the pod's may run ahead of the node's: when a NoExecute taint goes, the
//! controller's new pod can reach the index before the node without the taint does. For
//! that moment the index has a pod on a node it believes ineligible. So:
//!
//! - a notice for a pod that came misscheduled (`Notice::index_may_be_behind`) is held for
//!   [`SETTLE_MS`] from when it was first seen, and told only if it is still current then;
//! - a subject that went without a recovery the index can show yet (a lost node whose pod
//!   is back, on a node the index still has tainted) is looked at again for as long.
//!
//! Pure: the publisher feeds it each look's notices and the time.

use std::collections::{HashMap, HashSet};

use super::notice::{Notice, Subject};

/// How long the index's node may lag its pods before what the index says is told: the
/// watches of one API server deliver within a second of each other; a busy one, within a
/// few.
pub const SETTLE_MS: i64 = 5_000;

/// Subjects gone without a recovery, at most, that are looked at again: beyond, they are
/// dropped as they always were (a DaemonSet deleted over a whole pool loses every node).
const MAX_GONE: usize = 10_000;

#[derive(Debug, Default)]
pub struct Settle {
    /// Notices the index may be behind on, by subject: when each was first seen (unix ms).
    held: HashMap<Subject, i64>,
    /// Announced subjects that went with no recovery to show: each until when it is looked
    /// at again.
    gone: Vec<(Notice, i64)>,
}

impl Settle {
    /// Notes which of `current` the index may be behind on, and since when.
    pub fn track(&mut self, current: &[Notice], now_ms: i64) {
        let held = current
            .iter()
            .filter(|n| n.index_may_be_behind)
            .map(|n| (n.subject.clone(), self.held.get(&n.subject).copied().unwrap_or(now_ms)))
            .collect();
        self.held = held;
    }

    /// Whether `notice` waits for the index to catch up (`track` saw it less than
    /// [`SETTLE_MS`] ago).
    pub fn holds(&self, notice: &Notice, now_ms: i64) -> bool {
        notice.index_may_be_behind && self.held.get(&notice.subject).is_some_and(|&first| now_ms - first < SETTLE_MS)
    }

    /// The recoveries to tell of the subjects that went, `gone` just now and those that
    /// went in the last [`SETTLE_MS`] with nothing to show then, as `recovered` finds them
    /// now. A subject current again is no longer waited on: its next end is told as its own.
    pub fn recoveries(
        &mut self,
        gone: Vec<Notice>,
        current: &[Notice],
        now_ms: i64,
        recovered: impl Fn(&Notice) -> bool,
    ) -> Vec<Notice> {
        let current: HashSet<&Subject> =
            if self.gone.is_empty() { HashSet::new() } else { current.iter().map(|n| &n.subject).collect() };
        let earlier = std::mem::take(&mut self.gone).into_iter().filter(|(n, _)| !current.contains(&n.subject));
        let mut out = Vec::new();
        for (notice, until) in earlier.chain(gone.into_iter().map(|n| (n, now_ms + SETTLE_MS))) {
            if recovered(&notice) {
                out.push(notice.recovery());
            } else if until > now_ms && self.gone.len() < MAX_GONE {
                self.gone.push((notice, until));
            }
        }
        out
    }

    /// When the next look is due with no change to the index: a held notice's time is up,
    /// or a gone subject's.
    pub fn next_look_ms(&self, now_ms: i64) -> Option<i64> {
        let held = self.held.values().map(|first| first + SETTLE_MS);
        held.chain(self.gone.iter().map(|(_, until)| *until)).filter(|&at| at > now_ms).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::notice::tests::notice;
    use crate::rules::reason::Reason;

    fn arrived(uid: u8) -> Notice {
        Notice { index_may_be_behind: true, ..notice(uid, Reason::TaintAdded, "maintenance", Some("kubectl-taint")) }
    }

    #[test]
    fn a_pod_that_came_misscheduled_is_told_only_if_it_still_is_a_moment_later() {
        let mut settle = Settle::default();
        let (came, became) = (arrived(1), notice(2, Reason::LabelDrift, "gpu", None));
        let current = [came.clone(), became.clone()];
        settle.track(&current, 1_000);
        assert!(settle.holds(&came, 1_000));
        assert!(!settle.holds(&became, 1_000), "a pod that became misscheduled is told at once");
        assert_eq!(settle.next_look_ms(1_000), Some(1_000 + SETTLE_MS));
        // Still current later: held from its first sight, not from each look.
        settle.track(&current, 3_000);
        assert!(settle.holds(&came, 3_000));
        settle.track(&current, 1_000 + SETTLE_MS);
        assert!(!settle.holds(&came, 1_000 + SETTLE_MS), "it lasted: told");
        assert_eq!(settle.next_look_ms(1_000 + SETTLE_MS), None, "nothing left to wait for");
        // Gone before its time (the node caught up), then back: a new wait.
        settle.track(&[], 7_000);
        assert_eq!(settle.next_look_ms(7_000), None);
        settle.track(std::slice::from_ref(&came), 8_000);
        assert!(settle.holds(&came, 8_000 + SETTLE_MS - 1));
    }

    #[test]
    fn a_subject_gone_with_nothing_to_show_is_looked_at_again_for_a_moment() {
        let mut settle = Settle::default();
        let (lost, other) = (arrived(1), notice(2, Reason::LabelDrift, "gpu", None));
        // `other` recovered as it went: told at once. `lost` shows no recovery yet.
        let told = settle.recoveries(vec![lost.clone(), other.clone()], &[], 1_000, |n| n == &other);
        assert_eq!(told, [other.recovery()]);
        assert_eq!(settle.next_look_ms(1_000), Some(1_000 + SETTLE_MS));
        // The index catches up a look later: its recovery, once.
        assert_eq!(settle.recoveries(vec![], &[], 1_200, |_| true), [lost.recovery()]);
        assert!(settle.recoveries(vec![], &[], 1_400, |_| true).is_empty());
        // Nothing to show for the whole wait, the last look included: forgotten, as before.
        assert!(settle.recoveries(vec![lost.clone()], &[], 2_000, |_| false).is_empty());
        assert!(settle.recoveries(vec![], &[], 2_000 + SETTLE_MS, |_| false).is_empty());
        assert_eq!(settle.next_look_ms(2_000 + SETTLE_MS), None);
        assert!(settle.recoveries(vec![], &[], 2_001 + SETTLE_MS, |_| true).is_empty());
        // Current again before it recovered: its next end is its own.
        settle.recoveries(vec![lost.clone()], &[], 10_000, |_| false);
        let current = [lost.clone()];
        assert!(settle.recoveries(vec![], &current, 10_200, |_| false).is_empty());
        assert!(settle.recoveries(vec![], &current, 10_400, |_| true).is_empty(), "no longer waited on");
    }
}
