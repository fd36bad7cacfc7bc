//! Which notices deserve an Event: those whose subject is new or whose verdict changed
//! since the last look. Pure: the publisher (`publish::events`) feeds it the index's
//! notices and sends what it returns.

use std::collections::{HashMap, HashSet};

use super::notice::{Notice, Subject, Verdict};

/// The verdicts already announced, by subject.
#[derive(Debug, Default)]
pub struct Transitions {
    announced: HashMap<Subject, Verdict>,
}

impl Transitions {
    /// The notices whose verdict is new; subjects no longer current are forgotten (see
    /// `retain_current`), so a pod that recovers and relapses is announced again.
    pub fn changed<'a>(&self, current: &'a [Notice]) -> Vec<&'a Notice> {
        current.iter().filter(|n| self.announced.get(&n.subject) != Some(&n.verdict)).collect()
    }

    /// Record that `notice` was announced (or will never be: a denied Event is not retried).
    pub fn announced(&mut self, notice: &Notice) {
        self.announced.insert(notice.subject.clone(), notice.verdict.clone());
    }

    /// Forget subjects that have nothing to say any more.
    pub fn retain_current(&mut self, current: &[Notice]) {
        let subjects: HashSet<&Subject> = current.iter().map(|n| &n.subject).collect();
        self.announced.retain(|subject, _| subjects.contains(subject));
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
            t.announced(n);
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
            t.announced(n);
        }
        // The second recovers, then relapses with the same verdict: announced again.
        let third = vec![second[0].clone()];
        t.retain_current(&third);
        assert_eq!(t.announced.len(), 1);
        assert_eq!(t.changed(&second), [&second[1]]);
    }
}
