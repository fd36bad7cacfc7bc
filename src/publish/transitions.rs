//! Which notices deserve an Event: those whose subject is new or whose verdict changed
//! since the last look; and when each announced verdict ended, so that a relapse can be
//! told from an Event another replica or an earlier run already wrote. Pure: the publisher
//! (`publish::events`) feeds it the index's notices and the time, and sends what it returns.

use std::collections::HashMap;

use super::notice::{Notice, Subject};

/// How long an ended verdict is remembered: the API server's default `--event-ttl`, after
/// which the Event it would be a repeat of is gone anyway.
pub const REMEMBER_ENDED_MS: i64 = 60 * 60 * 1000;

/// At most this many ended verdicts are remembered (16 bytes each, and the map's own):
/// the oldest go first under heavier churn than that per hour.
pub const MAX_ENDED: usize = 100_000;

/// What was announced for a subject.
#[derive(Debug)]
struct Announced {
    /// The notice: its verdict and episode, and the recovery to announce when its subject
    /// recovers.
    notice: Notice,
    /// The Event's id (`Notice::event_id`), kept: it is a digest.
    id: u64,
    at_ms: i64,
}

/// The verdicts already announced, by subject.
#[derive(Debug, Default)]
pub struct Transitions {
    announced: HashMap<Subject, Announced>,
    /// Events (by `Notice::event_id`) whose verdict this process saw end (the pod recovered
    /// or its verdict changed), with when (unix ms).
    ended: HashMap<u64, i64>,
}

impl Transitions {
    /// The notices whose verdict is new and that call for an Event; subjects no longer
    /// current, or current again in a later episode, are forgotten (see `retain_current`),
    /// so a relapse is announced again.
    pub fn changed<'a>(&self, current: &'a [Notice]) -> Vec<&'a Notice> {
        current
            .iter()
            .filter(|n| n.announce)
            .filter(|n| self.announced.get(&n.subject).map(|a| &a.notice.verdict) != Some(&n.verdict))
            .collect()
    }

    /// Record that `notice` was announced (or will never be: a denied Event is not retried),
    /// `now_ms`; a different verdict it replaces ended then.
    pub fn announced(&mut self, notice: &Notice, now_ms: i64) {
        let id = notice.event_id();
        self.ended.remove(&id);
        // A relapse ends the recovery before it: a later recovery is its repeat.
        self.ended.insert(notice.recovery().event_id(), now_ms);
        let now = Announced { notice: notice.clone(), id, at_ms: now_ms };
        let previous = self.announced.insert(notice.subject.clone(), now);
        if let Some(previous) = previous.filter(|a| a.notice.verdict != notice.verdict) {
            self.ended.insert(previous.id, now_ms);
        }
    }

    /// Forget subjects that have nothing to say any more: their verdicts ended `now_ms`.
    /// A subject current in a later episode than the one announced recovered in between,
    /// unseen: its episode ended after it was announced. Returns the notices of the subjects
    /// gone, for the caller to tell a recovery from a deletion.
    pub fn retain_current(&mut self, current: &[Notice], now_ms: i64) -> Vec<Notice> {
        let episodes: HashMap<&Subject, u64> = current.iter().map(|n| (&n.subject, n.episode)).collect();
        let ended = &mut self.ended;
        let mut gone = Vec::new();
        self.announced.retain(|subject, a| match episodes.get(subject) {
            None => {
                ended.insert(a.id, now_ms);
                gone.push(a.notice.clone());
                false
            }
            Some(&episode) if episode != a.notice.episode => {
                // Before any write of the new episode, and after the announced one's.
                ended.insert(a.id, (a.at_ms + 1).min(now_ms));
                false
            }
            Some(_) => true,
        });
        self.ended.retain(|_, at| now_ms - *at < REMEMBER_ENDED_MS);
        if self.ended.len() > MAX_ENDED {
            let mut times: Vec<i64> = self.ended.values().copied().collect();
            let (_, &mut cutoff, _) = times.select_nth_unstable(self.ended.len() - MAX_ENDED);
            self.ended.retain(|_, at| *at > cutoff);
        }
        gone
    }

    /// The verdict of Event `id` ended at `at_ms`, as an earlier run's Events tell.
    pub fn ended_before(&mut self, id: u64, at_ms: i64) {
        self.ended.insert(id, at_ms);
    }

    /// When this process saw the verdict of Event `id` end, if it did: an Event written
    /// before then is an earlier episode, and a new one is a repeat.
    pub fn ended_at(&self, id: u64) -> Option<i64> {
        self.ended.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::notice::tests::notice;
    use crate::rules::reason::Reason;

    #[test]
    fn one_transition_per_change_never_per_look() {
        let mut t = Transitions::default();
        let first =
            vec![notice(1, Reason::LabelDrift, "gpu", None), notice(2, Reason::TaintAdded, "x", Some("kubectl-taint"))];
        assert_eq!(t.changed(&first).len(), 2);
        for n in &first {
            t.announced(n, 0);
        }
        // The same state again (a resync, a scrape, an unrelated event): nothing.
        assert!(t.changed(&first).is_empty());
        // The first's manager becomes known, the second's reason changes: two transitions.
        let second = vec![
            notice(1, Reason::LabelDrift, "gpu", Some("ops")),
            notice(2, Reason::AutoscalerDrain, "x", Some("ca")),
        ];
        assert_eq!(t.changed(&second).len(), 2);
        for n in &second {
            t.announced(n, 0);
        }
        // The second recovers, then relapses with the same verdict: announced again.
        let third = vec![second[0].clone()];
        let gone = t.retain_current(&third, 0);
        assert_eq!(gone, [second[1].clone()], "the caller learns which subject went");
        assert_eq!(t.announced.len(), 1);
        assert_eq!(t.changed(&second), [&second[1]]);
    }

    #[test]
    fn an_ended_verdict_is_remembered_so_a_relapse_is_told_from_a_restart() {
        let mut t = Transitions::default();
        let drift = notice(1, Reason::LabelDrift, "gpu", None);
        let taint = notice(1, Reason::TaintAdded, "x", None);
        // First sight (a fresh start, or a new replica): nothing ended here.
        assert_eq!(t.ended_at(drift.event_id()), None);
        t.announced(&drift, 1_000);
        // The verdict changes at 2 s: the drift Event's episode ended then.
        t.announced(&taint, 2_000);
        assert_eq!(t.ended_at(drift.event_id()), Some(2_000));
        assert_eq!(t.ended_at(taint.event_id()), None);
        // The pod recovers at 3 s; back to the drift at 4 s: a repeat of an episode that ended at 2 s.
        t.retain_current(&[], 3_000);
        assert_eq!(t.ended_at(taint.event_id()), Some(3_000));
        assert_eq!(t.changed(std::slice::from_ref(&drift)).len(), 1);
        t.announced(&drift, 4_000);
        assert_eq!(t.ended_at(drift.event_id()), None, "announced again: no longer ended");
        // Ended verdicts are forgotten after the Event TTL.
        t.retain_current(std::slice::from_ref(&drift), 3_000 + REMEMBER_ENDED_MS);
        assert_eq!(t.ended_at(taint.event_id()), None);
        // And never more than MAX_ENDED are kept, the oldest going first.
        for at in 0..(MAX_ENDED as i64 + 10) {
            t.ended.insert(at as u64 + 1_000_000, 10_000 + at);
        }
        t.retain_current(&[drift], 20_000);
        assert!(t.ended.len() <= MAX_ENDED, "{}", t.ended.len());
        assert_eq!(t.ended_at(1_000_000), None, "the oldest went first");
        assert_eq!(t.ended_at(1_000_000 + MAX_ENDED as u64 + 9), Some(10_000 + MAX_ENDED as i64 + 9));
    }

    #[test]
    fn a_recovery_no_look_saw_still_makes_the_relapse_a_repeat() {
        let mut t = Transitions::default();
        let first = notice(1, Reason::NfdChange, "gpu", Some("nfd-master"));
        t.announced(&first, 1_000);
        // The same verdict in the same episode, looked at again: nothing new.
        t.retain_current(std::slice::from_ref(&first), 1_500);
        assert!(t.changed(std::slice::from_ref(&first)).is_empty());
        // The subject recovered and relapsed between two looks: a later episode.
        let relapse = Notice { episode: first.episode + 1, ..first.clone() };
        t.retain_current(std::slice::from_ref(&relapse), 2_000);
        assert_eq!(t.changed(std::slice::from_ref(&relapse)), [&relapse]);
        // It ended after the first was announced, so an Event written then is the earlier episode.
        assert_eq!(t.ended_at(relapse.event_id()), Some(1_001));
        t.announced(&relapse, 2_000);
        t.retain_current(std::slice::from_ref(&relapse), 2_500);
        assert!(t.changed(std::slice::from_ref(&relapse)).is_empty());
        assert_eq!(t.ended_at(relapse.event_id()), None);
    }

    #[test]
    fn two_daemonsets_losing_one_node_are_two_subjects() {
        use crate::publish::notice::{Kind, Subject};
        let mut t = Transitions::default();
        let lost = |ds: &str, episode| Notice {
            kind: Kind::NodeLost,
            subject: Subject::Node { daemonset: ds.into(), node: "n2".into() },
            related: None,
            episode,
            ..notice(1, Reason::TaintAdded, "maintenance", Some("kubectl-taint"))
        };
        // The same verdict on one node for two DaemonSets, lost in different events: the
        // first look sees one loss, the next both.
        let first = lost("agent", 7);
        t.retain_current(std::slice::from_ref(&first), 1_000);
        assert_eq!(t.changed(std::slice::from_ref(&first)).len(), 1);
        t.announced(&first, 1_000);
        let current = [first, lost("gpu-agent", 9)];
        t.retain_current(&current, 1_200);
        assert_eq!(t.changed(&current), [&current[1]], "only the second DaemonSet's loss is new");
        t.announced(&current[1], 1_200);
        assert_eq!(t.ended_at(current[0].event_id()), None, "the first loss did not end");
        for at in [1_500, 2_000] {
            t.retain_current(&current, at);
            assert!(t.changed(&current).is_empty(), "nothing new at {at}");
        }
    }

    #[test]
    fn a_subject_on_its_way_is_told_only_if_it_was_told_before() {
        let mut t = Transitions::default();
        let told = notice(1, Reason::LabelDrift, "gpu", None);
        let quiet = |n: &Notice| Notice { announce: false, ..n.clone() };
        // On its way from the start: never an Event.
        let first = quiet(&notice(2, Reason::LabelDrift, "gpu", None));
        assert!(t.changed(std::slice::from_ref(&first)).is_empty());
        // Told, then on its way (a rollout replacing it): still announced, so that its
        // recovery is told when it goes.
        t.announced(&told, 1_000);
        let current = [quiet(&told)];
        assert!(t.retain_current(&current, 2_000).is_empty());
        assert!(t.changed(&current).is_empty());
        assert_eq!(t.retain_current(&[], 3_000), [told]);
    }
}
