//! The notices the index calls for now, one per subject, in the explanation's order.

use super::{Kind, Notice, Said, Subject, Target, Verdict};
use crate::index::Index;
use crate::rules::reason::Reason;

/// One notice per misscheduled pod, per lost node and per node without an available pod
/// that needs action, in the explanation's order. A node a DaemonSet left because the
/// DaemonSet itself changed has none: narrowing a DaemonSet on purpose would write an Event
/// for each of thousands of nodes, and the change is already the DaemonSet's own history.
/// A node whose pod is on its way (`starting`) is not announced (`Notice::announce`). The
/// metrics and the explanation still list every node.
pub fn current(index: &Index) -> Vec<Notice> {
    let mut out = Vec::new();
    for view in index.daemonsets() {
        let regarding = Target { id: view.ds.id.clone(), uid: view.ds.uid.to_string() };
        let node_notice = |kind, subject, verdict, node: &crate::model::Str, episode, said| Notice {
            kind,
            subject,
            verdict,
            regarding: regarding.clone(),
            related: None,
            node: node.clone(),
            orphan: false,
            episode,
            of: None,
            said,
            announce: true,
            index_may_be_behind: false,
        };
        for lost in view.lost_nodes().into_iter().filter(|l| l.verdict.reason != Reason::DaemonSetChanged) {
            let v = lost.verdict;
            let verdict = Verdict::Skip { reason: v.reason, key: v.key.clone(), manager: v.manager.clone() };
            let subject = Subject::Node { daemonset: view.ds.uid.clone(), node: lost.node.clone() };
            out.push(node_notice(Kind::NodeLost, subject, verdict, lost.node, lost.episode, None));
        }
        for p in view.misscheduled_pods() {
            let index_may_be_behind = p.arrived();
            let c = p.classification;
            out.push(Notice {
                kind: Kind::Misscheduled,
                subject: Subject::Pod(p.pod.uid.clone()),
                orphan: p.pod.controller_uid().is_none(),
                verdict: Verdict::Skip { reason: c.reason, key: c.key, manager: c.manager },
                regarding: regarding.clone(),
                related: Some(Target { id: p.pod.id.to_object_ref(), uid: p.pod.uid.to_string() }),
                node: p.node.clone(),
                episode: p.episode,
                of: None,
                said: None,
                announce: true,
                index_may_be_behind,
            });
        }
        for u in view.uncovered_nodes() {
            let subject = Subject::Uncovered { daemonset: view.ds.uid.clone(), node: u.node.clone() };
            let said = Said { reason: u.reason, detail: u.detail.unwrap_or_default().into() };
            let notice = node_notice(Kind::NodeUncovered, subject, Verdict::Uncovered, u.node, u.episode, Some(said));
            out.push(Notice { announce: !u.reason.expected(), ..notice });
        }
    }
    out
}
