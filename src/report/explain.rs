//! The explanation: the same classification as `/metrics`, for a person. One object
//! serves `explain -o json`, `GET /explain` and the landing page; `text` prints it.

use serde::{Deserialize, Serialize};

use crate::index::{Index, Resource};
use crate::model::Timestamp;
use crate::report::fix::{being_deleted, fix_for, lost_fix, uncovered_fix};
pub use crate::report::scope::Selection;
use crate::report::scope::{LookedAt, Origin, plural};
use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PodRow {
    pub namespace: String,
    pub daemonset: String,
    pub pod: String,
    pub node: String,
    pub reason: String,
    pub key: String,
    /// The field manager that set, removed or added `key` (empty when unknown).
    pub manager: String,
    /// RFC 3339.
    pub since: String,
    pub age_seconds: i64,
    pub fix: String,
}

/// A node a DaemonSet stopped covering: its misscheduled pod went, and the DaemonSet still
/// skips the node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LostRow {
    pub namespace: String,
    pub daemonset: String,
    pub node: String,
    /// The reason, key and manager the pod had as a misscheduled pod.
    pub reason: String,
    pub key: String,
    pub manager: String,
    /// When the node lost its pod, RFC 3339.
    pub since: String,
    pub age_seconds: i64,
    pub fix: String,
}

/// A node the DaemonSet should run on without an available pod.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UncoveredRow {
    pub namespace: String,
    pub daemonset: String,
    pub node: String,
    /// Its first pod; empty when there is none.
    pub pod: String,
    pub reason: String,
    /// In the scheduler's or the kubelet's words; empty when they say nothing.
    pub detail: String,
    /// When the node became uncovered, RFC 3339.
    pub since: String,
    pub age_seconds: i64,
    pub fix: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct IneligibleRow {
    pub namespace: String,
    pub daemonset: String,
    pub reason: String,
    pub key: String,
    pub nodes: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Explanation {
    /// What the answer covers: its source, namespace, DaemonSet, counts and time. An
    /// exporter older than this field sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looked_at: Option<LookedAt>,
    /// Each misscheduled pod, with its reason, key and suggested fix.
    pub misscheduled: Vec<PodRow>,
    /// Nodes each DaemonSet stopped covering, and why. An exporter older than this list
    /// sends none.
    #[serde(default)]
    pub lost: Vec<LostRow>,
    /// Nodes each DaemonSet should run on without an available pod, and why. An exporter
    /// older than this list sends none.
    #[serde(default)]
    pub uncovered: Vec<UncoveredRow>,
    /// Why each DaemonSet skips nodes (why desired < node count).
    pub ineligible: Vec<IneligibleRow>,
}

impl Explanation {
    /// Some row's change has no known author (its `manager` is empty where the node changed).
    pub fn has_unknown_manager(&self) -> bool {
        let unknown = |reason: &str, manager: &str| {
            manager.is_empty() && Reason::from_name(reason).is_none_or(|r| r.node_changed())
        };
        self.misscheduled.iter().any(|r| unknown(&r.reason, &r.manager))
            || self.lost.iter().any(|r| unknown(&r.reason, &r.manager))
    }

    /// Something needs someone: a misscheduled pod or a lost node whose reason is not an
    /// expected one (a drain, a DaemonSet change). What `--exit-code` fails on.
    pub fn needs_action(&self) -> bool {
        let acts = |reason: &str| Reason::from_name(reason).is_none_or(|r| !r.expected());
        let uncovered_acts = |reason: &str| Uncovered::from_name(reason).is_none_or(|r| !r.expected());
        self.misscheduled.iter().any(|r| acts(&r.reason))
            || self.lost.iter().any(|r| acts(&r.reason))
            || self.uncovered.iter().any(|r| uncovered_acts(&r.reason))
    }

    /// What is said when no pod is misscheduled: what was checked, and never an all-clear
    /// while nodes are lost.
    pub fn nothing_misscheduled(&self) -> String {
        let mut line = match &self.looked_at {
            Some(looked_at) => looked_at.all_clear(),
            None => "No misscheduled daemon pods (the exporter is older and does not say what it looked at).\n".into(),
        };
        if !self.lost.is_empty() {
            line.truncate(line.trim_end().len());
            let who = if self.lost.len() == 1 { "a DaemonSet" } else { "the DaemonSets" };
            line.push_str(&format!(" But {who} lost {}: see Lost nodes below.\n", plural(self.lost.len(), "node")));
        }
        let uncovered = self.uncovered.iter().filter(|r| Uncovered::from_name(&r.reason).is_none_or(|u| !u.expected()));
        let uncovered = uncovered.count();
        if uncovered > 0 {
            line.truncate(line.trim_end().len());
            let (have, need) = if uncovered == 1 { ("has", "needs") } else { ("have", "need") };
            let nodes = plural(uncovered, "node");
            line.push_str(&format!(" {nodes} {have} no available pod and {need} action: see below.\n"));
        }
        line
    }

    /// The same pods, reasons, keys, managers, fixes and skipped nodes: only ages moved on.
    /// A watcher redraws when this is false, not each time the clock ticks.
    pub fn same_answer(&self, other: &Self) -> bool {
        let same_row = |a: &PodRow, b: &PodRow| PodRow { age_seconds: b.age_seconds, ..a.clone() } == *b;
        let same_loss = |a: &LostRow, b: &LostRow| LostRow { age_seconds: b.age_seconds, ..a.clone() } == *b;
        let same_uncovered =
            |a: &UncoveredRow, b: &UncoveredRow| UncoveredRow { age_seconds: b.age_seconds, ..a.clone() } == *b;
        let scope = |e: &Self| e.looked_at.clone().map(|l| LookedAt { as_of: String::new(), ..l });
        scope(self) == scope(other)
            && self.ineligible == other.ineligible
            && self.misscheduled.len() == other.misscheduled.len()
            && self.misscheduled.iter().zip(&other.misscheduled).all(|(a, b)| same_row(a, b))
            && self.lost.len() == other.lost.len()
            && self.lost.iter().zip(&other.lost).all(|(a, b)| same_loss(a, b))
            && self.uncovered.len() == other.uncovered.len()
            && self.uncovered.iter().zip(&other.uncovered).all(|(a, b)| same_uncovered(a, b))
    }
}

/// Rows for the DaemonSets `selection` covers, in an index read from `origin`.
pub fn explain(index: &Index, selection: &Selection, origin: &Origin, now: Timestamp) -> Explanation {
    let mut out = Explanation::default();
    let (mut covered, mut elsewhere) = (0, 0);
    for view in index.daemonsets() {
        let id = &view.ds.id;
        if !selection.covers(&id.namespace, &id.name) {
            // Counted as the DaemonSet's status counts (nodes), without classifying a pod.
            elsewhere += view.misscheduled_node_count();
            continue;
        }
        covered += 1;
        for p in view.misscheduled_pods() {
            let reason = p.classification.reason;
            let key = p.classification.key.to_string();
            out.misscheduled.push(PodRow {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                pod: p.pod.id.name(),
                node: p.node.to_string(),
                reason: reason.as_str().to_owned(),
                fix: being_deleted(
                    p.pod.deletion().is_some(),
                    p.node,
                    fix_for(p.pod.controller_uid().is_none(), reason, &key, p.node),
                ),
                key,
                manager: p.classification.manager.as_deref().unwrap_or_default().to_owned(),
                since: rfc3339(p.since),
                age_seconds: (now - p.since).max(0),
            });
        }
        for lost in view.lost_nodes() {
            let v = lost.verdict;
            out.lost.push(LostRow {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                node: lost.node.to_string(),
                reason: v.reason.as_str().to_owned(),
                key: v.key.to_string(),
                manager: v.manager.as_deref().unwrap_or_default().to_owned(),
                since: rfc3339(lost.since),
                age_seconds: (now - lost.since).max(0),
                fix: lost_fix(v.reason, &v.key, lost.node),
            });
        }
        for u in view.uncovered_nodes() {
            out.uncovered.push(UncoveredRow {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                node: u.node.to_string(),
                pod: u.pod.map(|p| p.id.name()).unwrap_or_default(),
                reason: u.reason.as_str().to_owned(),
                detail: u.detail.unwrap_or_default().to_owned(),
                since: rfc3339(u.since),
                age_seconds: (now - u.since).max(0),
                fix: uncovered_fix(u.reason, u.node, u.detail.unwrap_or_default()),
            });
        }
        for (reason, key, nodes) in view.ineligible_nodes() {
            out.ineligible.push(IneligibleRow {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                reason: reason.as_str().to_owned(),
                key: key.to_string(),
                nodes,
            });
        }
    }
    out.looked_at = Some(LookedAt {
        source: origin.source.clone(),
        namespace: selection
            .namespace()
            .map(str::to_owned)
            .or_else(|| (!origin.namespaces.is_empty()).then(|| origin.namespaces.join(","))),
        daemonset: selection.daemonset().map(str::to_owned),
        daemonsets: covered,
        nodes: index.len(Resource::Nodes),
        misscheduled_elsewhere: origin.reads_beyond(selection).then_some(elsewhere),
        as_of: rfc3339(now),
        warnings: Vec::new(),
        read_once: origin.read_once,
        watching_since: origin.watching_since.map(rfc3339),
    });
    out
}

pub fn rfc3339(t: Timestamp) -> String {
    jiff::Timestamp::from_second(t).map_or_else(|_| t.to_string(), |ts| ts.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn row(pod: &str, age_seconds: i64) -> PodRow {
        PodRow {
            namespace: "ns".into(),
            daemonset: "agent".into(),
            pod: pod.into(),
            node: "n1".into(),
            reason: "taint_added".into(),
            key: "dedicated".into(),
            manager: "kubectl-taint".into(),
            since: "2026-11-23T00:00:00Z".into(),
            age_seconds,
            fix: "remove the taint".into(),
        }
    }

    pub(crate) fn of(rows: Vec<PodRow>) -> Explanation {
        Explanation { misscheduled: rows, ..Explanation::default() }
    }

    pub(crate) fn lost_row(age_seconds: i64) -> LostRow {
        LostRow {
            namespace: "ns".into(),
            daemonset: "gpu-agent".into(),
            node: "n2".into(),
            reason: "nfd_change".into(),
            key: "feature.node.kubernetes.io/pci-10de.present".into(),
            manager: "nfd-master".into(),
            since: "2026-11-23T00:00:00Z".into(),
            age_seconds,
            fix: "check NFD".into(),
        }
    }

    #[test]
    fn lost_nodes_are_part_of_the_answer() {
        let with_loss = Explanation { lost: vec![lost_row(5)], ..of(vec![row("a", 5)]) };
        // Older is the same answer; another loss is not.
        let older = Explanation { lost: vec![lost_row(65)], ..of(vec![row("a", 5)]) };
        assert!(with_loss.same_answer(&older));
        assert!(!with_loss.same_answer(&of(vec![row("a", 5)])));
        // An older exporter's answer has no `lost`.
        let old: Explanation = serde_json::from_str(r#"{"misscheduled": [], "ineligible": []}"#).unwrap();
        assert!(old.lost.is_empty());
    }

    #[test]
    fn lost_nodes_need_action_and_expected_reasons_do_not() {
        assert!(!of(vec![]).needs_action());
        assert!(of(vec![row("a", 5)]).needs_action(), "a taint someone added");
        let drain = PodRow { reason: "autoscaler_drain".into(), ..row("a", 5) };
        assert!(!of(vec![drain.clone()]).needs_action(), "a drain runs its course");
        assert!(Explanation { lost: vec![lost_row(5)], ..of(vec![drain]) }.needs_action(), "a node without its agent");
        let rollout = LostRow { reason: "daemonset_changed".into(), ..lost_row(5) };
        assert!(!Explanation { lost: vec![rollout], ..of(vec![]) }.needs_action());
        let newer = PodRow { reason: "a_reason_from_a_newer_exporter".into(), ..row("a", 5) };
        assert!(of(vec![newer]).needs_action(), "unknown is not expected");
    }

    #[test]
    fn an_older_answer_is_the_same_answer() {
        assert!(of(vec![row("a", 5)]).same_answer(&of(vec![row("a", 65)])));
        assert!(of(vec![]).same_answer(&of(vec![])));
    }

    #[test]
    fn any_other_change_is_a_new_answer() {
        let before = of(vec![row("a", 5)]);
        assert!(!before.same_answer(&of(vec![])));
        assert!(!before.same_answer(&of(vec![row("b", 5)])));
        assert!(!before.same_answer(&of(vec![row("a", 5), row("b", 5)])));
        assert!(!before.same_answer(&of(vec![PodRow { manager: "other".into(), ..row("a", 5) }])));
        assert!(!before.same_answer(&of(vec![PodRow { since: "2026-11-23T00:01:00Z".into(), ..row("a", 5) }])));
        let skipped = IneligibleRow {
            namespace: "ns".into(),
            daemonset: "agent".into(),
            reason: "taint".into(),
            key: "gpu".into(),
            nodes: 1,
        };
        let with_skips =
            Explanation { misscheduled: vec![row("a", 5)], ineligible: vec![skipped], ..Explanation::default() };
        assert!(!before.same_answer(&with_skips));
    }
}
