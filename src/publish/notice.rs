//! What an Event says: a `Notice` per subject the index has something to say about (each
//! misscheduled pod, each lost node, each node without an available pod that needs
//! action), built from the same views and fixes as the explanation (`current`). Pure.

mod current;

pub use self::current::current;
use crate::index::Index;
use crate::model::{ObjectRef, Str, Uid};
use crate::report::fix::{fix_for, lost_fix, uncovered_fix};
use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

/// Which Event a notice becomes: its `reason`, what
/// `kubectl get events --field-selector reason=…` finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A pod became misscheduled, or its verdict changed.
    Misscheduled,
    /// A node lost its daemon pod and the DaemonSet no longer covers it.
    NodeLost,
    /// A node the DaemonSet should run on has no available pod, for a reason that needs
    /// someone.
    NodeUncovered,
    /// What another notice said is over: the pod may run on its node again, the DaemonSet
    /// covers the node again, or its pod there is available.
    Recovered,
}

impl Kind {
    pub fn reason(self) -> &'static str {
        match self {
            Kind::Misscheduled => "Misscheduled",
            Kind::NodeLost => "NodeLost",
            Kind::NodeUncovered => "NodeUncovered",
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
    /// A node of a DaemonSet without an available pod: apart from its losses, which end
    /// differently.
    Uncovered {
        daemonset: Str,
        node: Str,
    },
}

/// What a notice says of its subject; a change of any part is a new Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Why the DaemonSet does not want the node (a misscheduled pod, a lost node).
    Skip {
        reason: Reason,
        key: Str,
        /// The field manager that made the change, when known.
        manager: Option<Str>,
    },
    /// The node has no available pod. One Event per episode, whatever the reason becomes
    /// (a crash loop reads not_ready between restarts, the kubelet rewords an image pull):
    /// the reason and detail when it was written are in `Notice::said`.
    Uncovered,
}

/// Why a node is uncovered, as the notice found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub reason: Uncovered,
    pub detail: Str,
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
    /// For `Recovered`: what recovered, a pod (`Misscheduled`) or a node (`NodeLost`,
    /// `NodeUncovered`).
    pub of: Option<Kind>,
    /// For `NodeUncovered` (and its recovery): the reason and detail.
    pub said: Option<Said>,
    /// Whether the subject calls for an Event of its own. A node whose pod is on its way
    /// (`starting`) does not, but stays current so that one told before (an image that
    /// would not pull, then a rollout) is told when it recovers.
    pub announce: bool,
    /// The pod came misscheduled (`rules::arrival`): the index's node or DaemonSet may be
    /// behind its pods, so the Event waits a moment for them to catch up (`publish::settle`).
    pub index_may_be_behind: bool,
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
        let mut out = std::collections::BTreeMap::from([("misschedule.io/node".to_owned(), self.node.to_string())]);
        let mut put = |name: &str, value: &str| out.insert(format!("misschedule.io/{name}"), value.to_owned());
        match (&self.verdict, &self.said) {
            (Verdict::Skip { reason, key, manager }, _) => {
                put("reason", reason.as_str());
                put("key", key);
                if let Some(manager) = manager {
                    put("manager", manager);
                }
            }
            (Verdict::Uncovered, Some(said)) => {
                put("reason", said.reason.as_str());
                put("detail", &said.detail);
            }
            (Verdict::Uncovered, None) => {}
        }
        // What a recovery closes: a restarted exporter reads back only a loss's.
        if let (Kind::Recovered, Some(of)) = (self.kind, self.of) {
            put("recovered", of.reason());
        }
        out
    }

    /// The Event's note.
    pub fn note(&self) -> String {
        let pod = self.related.as_ref().map_or("", |pod| &pod.id.name);
        let node = &self.node;
        let text = match (&self.verdict, self.kind) {
            (Verdict::Uncovered, kind) => {
                let said = self.said.as_ref();
                let reason = said.map_or("unknown", |s| s.reason.as_str());
                let detail =
                    said.filter(|s| !s.detail.is_empty()).map(|s| format!(" ({})", s.detail)).unwrap_or_default();
                match kind {
                    Kind::Recovered => format!("Node {node} has an available pod again (it had none: {reason})."),
                    _ => format!(
                        "Node {node} has no available pod of the DaemonSet: {reason}{detail}. Fix: {}",
                        self.fix()
                    ),
                }
            }
            (Verdict::Skip { reason, key, manager }, kind) => {
                let manager = manager.as_ref().map(|m| format!(", changed by {m}")).unwrap_or_default();
                let verdict = format!("reason {reason}, key {key}{manager}");
                match kind {
                    Kind::Misscheduled => {
                        format!("Pod {pod} on node {node} is misscheduled: {verdict}. Fix: {}", self.fix())
                    }
                    Kind::NodeLost => format!(
                        "Node {node} lost its daemon pod and the DaemonSet no longer covers it: {verdict}. Fix: {}",
                        self.fix()
                    ),
                    _ if self.of == Some(Kind::NodeLost) => format!(
                        "Node {node} is covered again: the DaemonSet wants it and has a pod there (it was lost: {verdict})."
                    ),
                    _ => format!(
                        "Pod {pod} on node {node} is no longer misscheduled: the DaemonSet may run it there again (it was: {verdict})."
                    ),
                }
            }
        };
        truncate(text, MAX_NOTE_BYTES)
    }

    /// The Event's type: Normal for a recovery and for what the fix calls expected (a drain,
    /// a DaemonSet change), Warning for what needs someone.
    pub fn event_type(&self) -> &'static str {
        let expected = matches!(&self.verdict, Verdict::Skip { reason, .. } if reason.expected());
        if self.kind == Kind::Recovered || expected { "Normal" } else { "Warning" }
    }

    /// The notice that this one's subject recovered.
    pub fn recovery(&self) -> Notice {
        Notice { kind: Kind::Recovered, of: Some(self.kind), ..self.clone() }
    }

    /// Whether this notice's subject recovered in `index`: its DaemonSet (the same one) wants
    /// the node again and, for a pod, still counts that pod there; for a lost node, has a
    /// pod there; for an uncovered one, has an available pod there. A pod deleted, a node or
    /// a DaemonSet gone is no recovery.
    pub fn recovered_in(&self, index: &Index) -> bool {
        let id = &self.regarding.id;
        let Some(view) = index.daemonset(&id.namespace, &id.name) else { return false };
        if view.ds.uid.to_string() != self.regarding.uid || view.skips(&self.node) || !index.has_node(&self.node) {
            return false;
        }
        match &self.subject {
            Subject::Pod(uid) => view.pods_on(&self.node).iter().any(|p| p.uid == *uid),
            Subject::Node { .. } => view.has_pod(&self.node),
            Subject::Uncovered { .. } => view.has_pod(&self.node) && !view.is_uncovered(&self.node),
        }
    }

    /// The suggested fix, the explanation's own: derived when a note is written, so a look
    /// at the index builds no text for the notices that are not new.
    pub fn fix(&self) -> String {
        match (&self.verdict, self.kind) {
            (_, Kind::Recovered) => String::new(),
            (Verdict::Skip { reason, key, .. }, Kind::Misscheduled) => fix_for(self.orphan, *reason, key, &self.node),
            (Verdict::Skip { reason, key, .. }, _) => lost_fix(*reason, key, &self.node),
            (Verdict::Uncovered, _) => match &self.said {
                Some(said) => uncovered_fix(said.reason, &self.node, &said.detail),
                None => String::new(),
            },
        }
    }

    /// A digest of the subject and the verdict: the same on every replica and after every
    /// restart. The Event's name carries it.
    pub fn event_id(&self) -> u64 {
        let subject = match &self.subject {
            Subject::Pod(uid) => uid.to_string(),
            Subject::Node { node, .. } | Subject::Uncovered { node, .. } => node.to_string(),
        };
        // Unit separators: no part can run into the next.
        let identity = match &self.verdict {
            Verdict::Skip { reason, key, manager } => {
                let manager = manager.as_deref().unwrap_or("");
                [self.kind.reason(), &self.regarding.uid, &subject, reason.as_str(), key, manager].join("\u{1f}")
            }
            Verdict::Uncovered => [self.kind.reason(), &self.regarding.uid, &subject].join("\u{1f}"),
        };
        let digest = ring::digest::digest(&ring::digest::SHA256, identity.as_bytes());
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
        match (&self.verdict, &self.said) {
            (Verdict::Skip { reason, .. }, _) => action(*reason),
            (Verdict::Uncovered, Some(said)) => uncovered_action(said.reason),
            (Verdict::Uncovered, None) => "NodeUncovered",
        }
    }
}

fn uncovered_action(reason: Uncovered) -> &'static str {
    match reason {
        Uncovered::CreateFailed => "CreateFailed",
        Uncovered::Unschedulable => "Unschedulable",
        Uncovered::ImagePull => "ImagePull",
        Uncovered::CrashLoop => "CrashLoop",
        Uncovered::ConfigError => "ConfigError",
        Uncovered::NotReady => "NotReady",
        Uncovered::Starting => "Starting",
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
pub(crate) mod tests;
