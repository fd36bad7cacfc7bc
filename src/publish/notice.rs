//! What an Event says: a `Notice` per subject the index has something to say about (each
//! misscheduled pod, each lost node), built from the same views and fixes as the
//! explanation. Pure.

use crate::index::Index;
use crate::model::{ObjectRef, Str, Uid};
use crate::report::fix::{fix_for, lost_fix};
use crate::rules::reason::Reason;

/// Which Event a notice becomes: its `reason`, what
/// `kubectl get events --field-selector reason=…` finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A pod became misscheduled, or its verdict changed.
    Misscheduled,
    /// A node lost its daemon pod and the DaemonSet no longer covers it.
    NodeLost,
    /// What a `Misscheduled` or `NodeLost` notice said is over: the pod may run on its node
    /// again, or the DaemonSet covers the node again.
    Recovered,
}

impl Kind {
    pub fn reason(self) -> &'static str {
        match self {
            Kind::Misscheduled => "Misscheduled",
            Kind::NodeLost => "NodeLost",
            Kind::Recovered => "Recovered",
        }
    }
}

/// What a notice is about: a transition is a new verdict for the same subject.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    Pod(Uid),
    /// A node of a DaemonSet (its UID): two DaemonSets losing one node are two subjects.
    Node {
        daemonset: Str,
        node: Str,
    },
}

/// What a notice says of its subject; a change of any part is a new Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub reason: Reason,
    pub key: Str,
    /// The field manager that made the change, when known.
    pub manager: Option<Str>,
}

/// An object an Event refers to; `kubectl describe` matches on the UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub id: ObjectRef,
    pub uid: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub kind: Kind,
    pub subject: Subject,
    pub verdict: Verdict,
    /// The DaemonSet the Event is written on.
    pub regarding: Target,
    /// The pod, for a misscheduled pod; none for a lost node (the node is named).
    pub related: Option<Target>,
    pub node: Str,
    /// The pod has no controller (the DaemonSet controller adopts it): the fix says so.
    pub orphan: bool,
    /// Which episode of the verdict this is, as the index tells them apart: a new one with
    /// the same verdict is a repeat even when no look saw the subject recover in between.
    pub episode: u64,
    /// For `Recovered`: what recovered, a pod (`Misscheduled`) or a node (`NodeLost`).
    pub of: Option<Kind>,
}

/// An Event name is a DNS subdomain (253 characters): the DaemonSet's name, cut to this,
/// a dot and 16 hex digits.
const MAX_NAME_PREFIX: usize = 253 - 17;

/// The Event's note is at most 1 kB, as the API requires: what `kubectl describe ds` shows.
pub const MAX_NOTE_BYTES: usize = 1024;

/// The label on every Event the exporter writes, so it can find its own.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "misschedule-exporter");

impl Notice {
    /// The verdict in machine-readable form, on the Event beside the note: what an exporter
    /// restarted after a loss can read back (the note is for people and may change).
    pub fn annotations(&self) -> std::collections::BTreeMap<String, String> {
        let v = &self.verdict;
        let mut out = std::collections::BTreeMap::from([
            ("misschedule.io/node".to_owned(), self.node.to_string()),
            ("misschedule.io/reason".to_owned(), v.reason.as_str().to_owned()),
            ("misschedule.io/key".to_owned(), v.key.to_string()),
        ]);
        if let Some(manager) = &v.manager {
            out.insert("misschedule.io/manager".to_owned(), manager.to_string());
        }
        out
    }

    /// The Event's note.
    pub fn note(&self) -> String {
        let v = &self.verdict;
        let manager = v.manager.as_ref().map(|m| format!(", changed by {m}")).unwrap_or_default();
        let pod = self.related.as_ref().map_or("", |pod| &pod.id.name);
        let text = match self.kind {
            Kind::Misscheduled => format!(
                "Pod {pod} on node {} is misscheduled: reason {}, key {}{manager}. Fix: {}",
                self.node,
                v.reason,
                v.key,
                self.fix()
            ),
            Kind::NodeLost => format!(
                "Node {} lost its daemon pod and the DaemonSet no longer covers it: reason {}, key {}{manager}. Fix: {}",
                self.node,
                v.reason,
                v.key,
                self.fix()
            ),
            Kind::Recovered if self.of == Some(Kind::NodeLost) => format!(
                "Node {} is covered again: the DaemonSet wants it and has a pod there (it was lost: reason {}, key {}{manager}).",
                self.node, v.reason, v.key
            ),
            Kind::Recovered => format!(
                "Pod {pod} on node {} is no longer misscheduled: the DaemonSet may run it there again (it was: reason {}, key {}{manager}).",
                self.node, v.reason, v.key
            ),
        };
        truncate(text, MAX_NOTE_BYTES)
    }

    /// The Event's type: Normal for a recovery and for what the fix calls expected (a drain,
    /// a DaemonSet change), Warning for what needs someone.
    pub fn event_type(&self) -> &'static str {
        if self.kind == Kind::Recovered || self.verdict.reason.expected() { "Normal" } else { "Warning" }
    }

    /// The notice that this one's subject recovered.
    pub fn recovery(&self) -> Notice {
        Notice { kind: Kind::Recovered, of: Some(self.kind), ..self.clone() }
    }

    /// Whether this notice's subject recovered in `index`: its DaemonSet (the same one) wants
    /// the node again and, for a pod, still counts that pod there; for a lost node, has a
    /// pod there. A pod deleted, a node or a DaemonSet gone is no recovery.
    pub fn recovered_in(&self, index: &Index) -> bool {
        let id = &self.regarding.id;
        let Some(view) = index.daemonset(&id.namespace, &id.name) else { return false };
        if view.ds.uid.to_string() != self.regarding.uid || view.skips(&self.node) {
            return false;
        }
        let node_exists = index.has_node(&self.node);
        match &self.subject {
            Subject::Pod(uid) => node_exists && view.pods_on(&self.node).iter().any(|p| p.uid == *uid),
            Subject::Node { .. } => node_exists && view.has_pod(&self.node),
        }
    }

    /// The suggested fix, the explanation's own: derived when a note is written, so a look
    /// at the index builds no text for the notices that are not new.
    pub fn fix(&self) -> String {
        match self.kind {
            Kind::Misscheduled => fix_for(self.orphan, self.verdict.reason, &self.verdict.key, &self.node),
            Kind::NodeLost => lost_fix(self.verdict.reason, &self.verdict.key, &self.node),
            Kind::Recovered => String::new(),
        }
    }

    /// A digest of the subject and the verdict: the same on every replica and after every
    /// restart. The Event's name carries it.
    pub fn event_id(&self) -> u64 {
        let v = &self.verdict;
        let subject = match &self.subject {
            Subject::Pod(uid) => uid.to_string(),
            Subject::Node { node, .. } => node.to_string(),
        };
        let manager = v.manager.as_deref().unwrap_or("");
        // Unit separators: no part can run into the next.
        let identity = [self.kind.reason(), &self.regarding.uid, &subject, v.reason.as_str(), &v.key, manager];
        let digest = ring::digest::digest(&ring::digest::SHA256, identity.join("\u{1f}").as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest.as_ref()[..8]);
        u64::from_be_bytes(first)
    }

    /// The Event object's name: the DaemonSet's name and `event_id`, so the API server
    /// itself keeps a verdict to one Event: a second writer gets AlreadyExists.
    pub fn event_name(&self) -> String {
        // A DaemonSet's name is a DNS subdomain of up to 253 characters; leave room for the digest.
        let ds = &self.regarding.id.name;
        let prefix = &ds[..ds.len().min(MAX_NAME_PREFIX)];
        format!("{}.{:016x}", prefix.trim_end_matches(['.', '-']), self.event_id())
    }

    /// The Event's action: the reason in the API's PascalCase, word by word
    /// (`daemonset_changed` is `DaemonsetChanged`, as it always was).
    pub fn action(&self) -> &'static str {
        action(self.verdict.reason)
    }
}

fn action(reason: Reason) -> &'static str {
    match reason {
        Reason::AutoscalerDrain => "AutoscalerDrain",
        Reason::DaemonSetChanged => "DaemonsetChanged",
        Reason::NfdChange => "NfdChange",
        Reason::TaintAdded => "TaintAdded",
        Reason::LabelDrift => "LabelDrift",
        Reason::NodeNameMismatch => "NodeNameMismatch",
    }
}

/// One notice per misscheduled pod and per lost node, in the explanation's order. A node a
/// DaemonSet left because the DaemonSet itself changed has none: narrowing a DaemonSet on
/// purpose would write an Event for each of thousands of nodes, and the change is already the
/// DaemonSet's own history; the metrics and the explanation still list every node.
pub fn current(index: &Index) -> Vec<Notice> {
    let mut out = Vec::new();
    for view in index.daemonsets() {
        let regarding = Target { id: view.ds.id.clone(), uid: view.ds.uid.to_string() };
        for lost in view.lost_nodes().into_iter().filter(|l| l.verdict.reason != Reason::DaemonSetChanged) {
            let v = lost.verdict;
            out.push(Notice {
                kind: Kind::NodeLost,
                subject: Subject::Node { daemonset: view.ds.uid.clone(), node: lost.node.clone() },
                verdict: Verdict { reason: v.reason, key: v.key.clone(), manager: v.manager.clone() },
                regarding: regarding.clone(),
                related: None,
                node: lost.node.clone(),
                orphan: false,
                episode: lost.episode,
                of: None,
            });
        }
        for p in view.misscheduled_pods() {
            let c = p.classification;
            out.push(Notice {
                kind: Kind::Misscheduled,
                subject: Subject::Pod(p.pod.uid.clone()),
                orphan: p.pod.controller_uid.is_none(),
                verdict: Verdict { reason: c.reason, key: c.key, manager: c.manager },
                regarding: regarding.clone(),
                related: Some(Target { id: p.pod.id.clone(), uid: p.pod.uid.to_string() }),
                node: p.node.clone(),
                episode: p.episode,
                of: None,
            });
        }
    }
    out
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A misscheduled pod's notice, as `misscheduled` builds it.
    fn pod_uid(uid: u8) -> Uid {
        Uid::parse(&format!("00000000-0000-0000-0000-0000000000{uid:02x}"))
    }

    pub(crate) fn notice(uid: u8, reason: Reason, key: &str, manager: Option<&str>) -> Notice {
        let uid = pod_uid(uid);
        let id = |name: String| ObjectRef { namespace: "ns".into(), name: name.into() };
        Notice {
            kind: Kind::Misscheduled,
            subject: Subject::Pod(uid.clone()),
            verdict: Verdict { reason, key: key.into(), manager: manager.map(Str::from) },
            regarding: Target { id: id("agent".into()), uid: "ds-uid".into() },
            related: Some(Target { id: id(format!("agent-{uid}")), uid: uid.to_string() }),
            node: "n1".into(),
            orphan: false,
            episode: 1,
            of: None,
        }
    }

    #[test]
    fn note_names_everything_and_fits_the_api_limit() {
        let n = notice(1, Reason::LabelDrift, "gpu", Some("kubectl-label"));
        assert_eq!(
            n.note(),
            "Pod agent-00000000-0000-0000-0000-000000000001 on node n1 is misscheduled: reason label_drift, key gpu, changed by kubectl-label. Fix: node n1 no longer matches gpu; restore the label (kubectl label node n1 gpu=...) or change the DaemonSet's selector"
        );
        assert!(!notice(1, Reason::LabelDrift, "gpu", None).note().contains("changed by"));
        let orphan = Notice { orphan: true, ..n };
        assert!(orphan.note().contains("Fix: orphan pod (no controller)"), "{}", orphan.note());
        let long = notice(1, Reason::LabelDrift, &"é".repeat(2000), None);
        let note = long.note();
        assert!(note.len() <= MAX_NOTE_BYTES && note.ends_with('…'), "{}", note.len());
    }

    #[test]
    fn one_event_name_per_subject_and_verdict_everywhere() {
        let n = notice(1, Reason::LabelDrift, "gpu", Some("ops"));
        let name = n.event_name();
        assert!(name.starts_with("agent.") && name.len() == "agent.".len() + 16, "{name}");
        assert_eq!(notice(1, Reason::LabelDrift, "gpu", Some("ops")).event_name(), name, "deterministic");
        // Any part of the verdict, or another pod, is another Event.
        let others = [
            notice(2, Reason::LabelDrift, "gpu", Some("ops")),
            notice(1, Reason::TaintAdded, "gpu", Some("ops")),
            notice(1, Reason::LabelDrift, "gpu2", Some("ops")),
            notice(1, Reason::LabelDrift, "gpu", None),
            notice(1, Reason::LabelDrift, "gp", Some("uops")),
        ];
        let names: std::collections::HashSet<String> = others.iter().map(Notice::event_name).collect();
        assert_eq!(names.len(), others.len());
        assert!(!names.contains(&name));
        // The longest DaemonSet name still makes a valid name.
        let mut long = n.clone();
        long.regarding.id.name = "a".repeat(253).into();
        assert_eq!(long.event_name().len(), 253);
    }

    #[test]
    fn a_lost_node_is_its_own_event() {
        let pod = notice(1, Reason::NfdChange, "gpu", Some("nfd-master"));
        let subject = Subject::Node { daemonset: "ds-uid".into(), node: "n1".into() };
        let lost = Notice { kind: Kind::NodeLost, subject, related: None, ..pod.clone() };
        assert_eq!(
            lost.note(),
            "Node n1 lost its daemon pod and the DaemonSet no longer covers it: reason nfd_change, key gpu, changed by nfd-master. Fix: node-feature-discovery no longer reports gpu on n1; check NFD on the node or relax the DaemonSet's selector"
        );
        assert_ne!(lost.event_name(), pod.event_name());
        // A node named like a pod's UID is still another subject.
        let twin = Notice {
            subject: Subject::Node { daemonset: "ds-uid".into(), node: pod_uid(1).to_string().into() },
            ..lost.clone()
        };
        assert_ne!(twin.event_name(), pod.event_name());
        let changed = Notice { verdict: Verdict { reason: Reason::DaemonSetChanged, ..lost.verdict.clone() }, ..lost };
        assert!(changed.fix().contains("no longer wants n1"), "{}", changed.fix());
    }

    #[test]
    fn expected_reasons_and_recoveries_are_normal_events() {
        let drift = notice(1, Reason::LabelDrift, "gpu", Some("kubectl-label"));
        assert_eq!(drift.event_type(), "Warning");
        assert_eq!(notice(1, Reason::AutoscalerDrain, "ToBeDeletedByClusterAutoscaler", None).event_type(), "Normal");
        assert_eq!(notice(1, Reason::DaemonSetChanged, "nodeSelector", None).event_type(), "Normal");
        let recovered = drift.recovery();
        assert_eq!((recovered.kind.reason(), recovered.event_type()), ("Recovered", "Normal"));
        assert_eq!(
            recovered.note(),
            "Pod agent-00000000-0000-0000-0000-000000000001 on node n1 is no longer misscheduled: the DaemonSet may run it there again (it was: reason label_drift, key gpu, changed by kubectl-label)."
        );
        assert_ne!(recovered.event_name(), drift.event_name(), "its own Event");
        let lost = Notice {
            kind: Kind::NodeLost,
            subject: Subject::Node { daemonset: "ds-uid".into(), node: "n1".into() },
            related: None,
            ..drift
        };
        assert!(lost.recovery().note().starts_with("Node n1 is covered again"), "{}", lost.recovery().note());
        assert_ne!(lost.recovery().event_name(), recovered.event_name());
    }

    #[test]
    fn each_action_is_its_reason_in_pascal_case() {
        for reason in Reason::ALL {
            let pascal: String =
                reason.as_str().split('_').map(|word| word[..1].to_ascii_uppercase() + &word[1..]).collect();
            assert_eq!(action(reason), pascal, "{reason}");
        }
    }
}
