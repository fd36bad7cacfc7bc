//! Which misscheduled pods deserve a Kubernetes Event: those that became misscheduled
//! or whose reason, key or manager changed since the last look. Pure: the publisher
//! (`source::events`) feeds it explanation rows and sends what it returns.

use std::collections::HashMap;

use crate::report::explain::PodRow;

/// What an Event says of a pod; a change of any part is a new transition.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Verdict {
    reason: String,
    key: String,
    manager: String,
}

impl Verdict {
    fn of(row: &PodRow) -> Self {
        Self { reason: row.reason.clone(), key: row.key.clone(), manager: row.manager.clone() }
    }
}

/// The verdicts already announced, by pod UID.
#[derive(Debug, Default)]
pub struct Transitions {
    announced: HashMap<String, Verdict>,
}

impl Transitions {
    /// The rows whose verdict is new; pods no longer misscheduled are forgotten, so a
    /// pod that recovers and relapses is announced again.
    pub fn changed<'a>(&self, current: &'a [PodRow]) -> Vec<&'a PodRow> {
        current.iter().filter(|row| self.announced.get(&row.pod_uid) != Some(&Verdict::of(row))).collect()
    }

    /// Record that `row` was announced (or will never be: a denied Event is not retried).
    pub fn announced(&mut self, row: &PodRow) {
        self.announced.insert(row.pod_uid.clone(), Verdict::of(row));
    }

    /// Forget pods that are no longer misscheduled.
    pub fn retain_current(&mut self, current: &[PodRow]) {
        let uids: std::collections::HashSet<&str> = current.iter().map(|r| r.pod_uid.as_str()).collect();
        self.announced.retain(|uid, _| uids.contains(uid.as_str()));
    }

    pub fn len(&self) -> usize {
        self.announced.len()
    }

    pub fn is_empty(&self) -> bool {
        self.announced.is_empty()
    }
}

/// The Event's note (at most 1 kB, as the API requires): what `kubectl describe ds` shows.
pub fn note(row: &PodRow) -> String {
    let manager = if row.manager.is_empty() { String::new() } else { format!(", changed by {}", row.manager) };
    let text = format!(
        "Pod {} on node {} is misscheduled: reason {}, key {}{manager}. Fix: {}",
        row.pod, row.node, row.reason, row.key, row.fix
    );
    truncate(text, 1024)
}

/// The Event's action: the reason in the API's PascalCase (`label_drift` → `LabelDrift`).
pub fn action(reason: &str) -> String {
    reason
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut at = max - '…'.len_utf8();
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push('…');
    }
    text
}

/// A token bucket: `burst` Events at once, then `per_second`. Events over the limit
/// wait for the next round; a storm of transitions cannot become a storm of writes.
#[derive(Debug)]
pub struct RateLimit {
    burst: f64,
    per_second: f64,
    tokens: f64,
    /// Seconds, on the caller's clock.
    last: f64,
}

impl RateLimit {
    pub fn new(burst: u32, per_second: f64, now: f64) -> Self {
        Self { burst: f64::from(burst), per_second, tokens: f64::from(burst), last: now }
    }

    /// Take a token if one is left at `now`.
    pub fn try_take(&mut self, now: f64) -> bool {
        let elapsed = (now - self.last).max(0.0);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(uid: &str, reason: &str, key: &str, manager: &str) -> PodRow {
        PodRow {
            namespace: "ns".into(),
            daemonset: "agent".into(),
            pod: format!("agent-{uid}"),
            node: "n1".into(),
            reason: reason.into(),
            key: key.into(),
            manager: manager.into(),
            since: String::new(),
            age_seconds: 0,
            fix: "do it".into(),
            daemonset_uid: "ds-uid".into(),
            pod_uid: uid.into(),
        }
    }

    #[test]
    fn one_transition_per_change_never_per_look() {
        let mut t = Transitions::default();
        let first = vec![row("a", "label_drift", "gpu", ""), row("b", "taint_added", "x", "kubectl-taint")];
        assert_eq!(t.changed(&first).len(), 2);
        for r in &first {
            t.announced(r);
        }
        // The same state again (a resync, a scrape, an unrelated event): nothing.
        assert!(t.changed(&first).is_empty());
        // a's manager becomes known, b's reason changes: two transitions.
        let second = vec![row("a", "label_drift", "gpu", "ops"), row("b", "autoscaler_drain", "x", "ca")];
        assert_eq!(t.changed(&second).len(), 2);
        for r in &second {
            t.announced(r);
        }
        // b recovers, then relapses with the same verdict: announced again.
        let third = vec![second[0].clone()];
        t.retain_current(&third);
        assert_eq!(t.len(), 1);
        assert_eq!(t.changed(&second).iter().map(|r| r.pod_uid.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn note_names_everything_and_fits_the_api_limit() {
        let r = row("a", "label_drift", "gpu", "kubectl-label");
        assert_eq!(
            note(&r),
            "Pod agent-a on node n1 is misscheduled: reason label_drift, key gpu, changed by kubectl-label. Fix: do it"
        );
        assert!(!note(&row("a", "label_drift", "gpu", "")).contains("changed by"));
        let mut long = row("a", "label_drift", "gpu", "");
        long.fix = "é".repeat(2000);
        let n = note(&long);
        assert!(n.len() <= 1024 && n.ends_with('…'), "{}", n.len());
    }

    #[test]
    fn actions_are_pascal_case() {
        assert_eq!(action("label_drift"), "LabelDrift");
        assert_eq!(action("autoscaler_drain"), "AutoscalerDrain");
        assert_eq!(action("nfd_change"), "NfdChange");
    }

    #[test]
    fn rate_limit_allows_a_burst_then_the_rate() {
        let mut limit = RateLimit::new(3, 2.0, 0.0);
        assert_eq!((0..5).filter(|_| limit.try_take(0.0)).count(), 3);
        assert!(!limit.try_take(0.1));
        assert!(limit.try_take(0.6), "one token after half a second at 2/s");
        assert_eq!((0..10).filter(|_| limit.try_take(100.0)).count(), 3, "never more than the burst");
    }
}
