//! Why a misscheduled daemon pod is misscheduled: one `reason` and one `key`.
//!
//! The rules are documented in `docs/reasons.md`. Placement (nodeName,
//! nodeSelector, affinity) is judged before taints, as the controller acts on it
//! first.

use std::fmt;

use crate::model::{Node, Placement, Pod, Str, Taint, Timestamp};
use crate::rules::attribution::{NfdManagers, label_manager, taint_manager};
use crate::rules::eligibility::{Skip, affinity_mismatch, tolerated, untolerated_taints};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    AutoscalerDrain,
    DaemonSetChanged,
    NfdChange,
    TaintAdded,
    LabelDrift,
    NodeNameMismatch,
}

impl Reason {
    pub const ALL: [Reason; 6] = [
        Reason::AutoscalerDrain,
        Reason::DaemonSetChanged,
        Reason::NfdChange,
        Reason::TaintAdded,
        Reason::LabelDrift,
        Reason::NodeNameMismatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::AutoscalerDrain => "autoscaler_drain",
            Reason::DaemonSetChanged => "daemonset_changed",
            Reason::NfdChange => "nfd_change",
            Reason::TaintAdded => "taint_added",
            Reason::LabelDrift => "label_drift",
            Reason::NodeNameMismatch => "node_name_mismatch",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The reason named `name` (as `as_str` writes it).
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The node changed (a label or taint): a field manager made the change. For
    /// `daemonset_changed` and `node_name_mismatch` the DaemonSet did, and there is none.
    pub fn node_changed(self) -> bool {
        !matches!(self, Reason::DaemonSetChanged | Reason::NodeNameMismatch)
    }

    /// Expected while something intended runs its course, as the suggested fix says: a
    /// drain removing the node, a DaemonSet change rolling out. Events say it as Normal,
    /// the page apart from what needs action, and the alerts leave it out.
    pub fn expected(self) -> bool {
        matches!(self, Reason::AutoscalerDrain | Reason::DaemonSetChanged)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The cluster-autoscaler's drain taint; its value is the unix time it was added.
pub const CLUSTER_AUTOSCALER_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Taints that mean "this node is being drained or is going away".
pub const DEFAULT_DRAIN_TAINT_KEYS: [&str; 5] = [
    CLUSTER_AUTOSCALER_TAINT,
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
    "cloud.google.com/impending-node-termination",
    "aws-node-termination-handler/*",
];

/// Drain-taint keys: exact keys, or prefixes written with a trailing `*`.
#[derive(Clone, Debug)]
pub struct DrainTaints {
    patterns: Vec<String>,
}

impl Default for DrainTaints {
    fn default() -> Self {
        Self::with_extra(std::iter::empty::<String>())
    }
}

impl DrainTaints {
    /// The defaults plus `extra` (from `--drain-taint-keys`).
    pub fn with_extra<S: Into<String>>(extra: impl IntoIterator<Item = S>) -> Self {
        let mut patterns: Vec<String> = DEFAULT_DRAIN_TAINT_KEYS.iter().map(|s| s.to_string()).collect();
        for key in extra {
            let key = key.into();
            let key = key.trim();
            if !key.is_empty() && !patterns.iter().any(|p| p == key) {
                patterns.push(key.to_owned());
            }
        }
        Self { patterns }
    }

    pub fn matches(&self, key: &str) -> bool {
        self.patterns.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == pattern,
        })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// The prefix NFD gives feature labels; its annotation lists them without it.
pub const NFD_FEATURE_PREFIX: &str = "feature.node.kubernetes.io/";
/// NFD lists the labels it manages here; unprefixed names live under `feature.node.kubernetes.io/`.
pub const NFD_FEATURE_LABELS_ANNOTATION: &str = "nfd.node.kubernetes.io/feature-labels";
/// NFD lists the taints it manages here, as `key=value:effect`.
pub const NFD_TAINTS_ANNOTATION: &str = "nfd.node.kubernetes.io/taints";
const NFD_PREFIXES: [&str; 2] = [NFD_FEATURE_PREFIX, "profile.node.kubernetes.io/"];
const NFD_SUBDOMAIN_SUFFIX: &str = ".feature.node.kubernetes.io";

/// Keys in NFD's own namespaces: `feature.node.kubernetes.io/`,
/// `profile.node.kubernetes.io/`, or a `*.feature.node.kubernetes.io/` prefix.
pub fn has_nfd_prefix(key: &str) -> bool {
    NFD_PREFIXES.iter().any(|p| key.starts_with(p))
        || key.split_once('/').is_some_and(|(prefix, _)| prefix.ends_with(NFD_SUBDOMAIN_SUFFIX))
}

/// NFD's by its name, its annotation, or its field manager (who set or removed it).
fn is_nfd_label(key: &str, node: &Node, manager: Option<&Str>, nfd: &NfdManagers) -> bool {
    has_nfd_prefix(key) || node.nfd_label_keys.iter().any(|k| **k == *key) || manager.is_some_and(|m| nfd.contains(m))
}

fn is_nfd_taint(key: &str, node: &Node, manager: Option<&Str>, nfd: &NfdManagers) -> bool {
    has_nfd_prefix(key) || node.nfd_taint_keys.iter().any(|k| **k == *key) || manager.is_some_and(|m| nfd.contains(m))
}

/// Site conventions the reasons depend on: which taints mean a drain, and which field
/// managers are node-feature-discovery.
#[derive(Clone, Debug, Default)]
pub struct Conventions {
    pub drain_taints: DrainTaints,
    pub nfd_managers: NfdManagers,
}

/// The verdict for one misscheduled pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classification {
    pub reason: Reason,
    pub key: Str,
    /// The best evidence of when the pod became misscheduled, from the objects
    /// alone (taint value or `timeAdded`, or the pod's delete request).
    pub evidence_since: Option<Timestamp>,
    /// The field manager that set, removed or added `key` on the node, when known.
    /// None for a DaemonSet change or a nodeName mismatch: the node did not change.
    pub manager: Option<Str>,
}

/// Classify a pod on a node where the DaemonSet's current `template` gives `skip`.
///
/// `origin` is the template the pod was created from, from its ControllerRevision,
/// when that is known; only its required node affinity is used, because the
/// controller overwrites a daemon pod's own affinity with its `matchFields` term.
pub fn classify(
    skip: &Skip,
    node: &Node,
    template: &Placement,
    pod: &Pod,
    origin: Option<&Placement>,
    conventions: &Conventions,
) -> Classification {
    let deletion_evidence = pod.deletion().map(|d| d.requested_at());
    let nfd = &conventions.nfd_managers;
    let (reason, key, evidence) = match skip {
        Skip::NodeName => (Reason::NodeNameMismatch, skip.shared_key(), deletion_evidence),
        Skip::NodeSelector { key } | Skip::NodeAffinity { key } => {
            let reason = if created_from_accepts(node, template, pod, origin) {
                Reason::DaemonSetChanged
            } else if is_nfd_label(key, node, label_manager(node, key), nfd) {
                Reason::NfdChange
            } else {
                Reason::LabelDrift
            };
            (reason, key.clone(), deletion_evidence)
        }
        Skip::Taint { .. } => {
            let (reason, taint) = untolerated_taints(node, &template.tolerations, template.host_network)
                .map(|taint| (taint_reason(taint, node, pod, conventions), taint))
                .min_by_key(|(reason, _)| *reason)
                // `skip` says some taint blocks; fall back to its key if the node changed under us.
                .map_or((Reason::TaintAdded, None), |(r, t)| (r, Some(t)));
            let key = taint.map_or_else(|| Str::from(skip.key()), |t| t.key.clone());
            let evidence = match reason {
                // The taint was already there when the pod was made; its age says nothing.
                Reason::DaemonSetChanged => deletion_evidence,
                _ => taint.and_then(taint_added_at).or(deletion_evidence),
            };
            (reason, key, evidence)
        }
    };
    // A pod cannot have become misscheduled before it existed.
    let evidence_since = evidence.map(|e| e.max(pod.created()));
    let manager = match (reason, skip) {
        (Reason::DaemonSetChanged | Reason::NodeNameMismatch, _) => None,
        (_, Skip::Taint { .. }) => taint_manager(node, &key).cloned(),
        _ => label_manager(node, &key).cloned(),
    };
    Classification { reason, key, evidence_since, manager }
}

/// Would the template this pod was created from still accept the node?
fn created_from_accepts(node: &Node, template: &Placement, pod: &Pod, origin: Option<&Placement>) -> bool {
    // Without the revision the original affinity is unknown; assume it was the current one.
    let terms = origin.unwrap_or(template).required_terms.as_deref();
    affinity_mismatch(node, &pod.own_placement().node_selector, terms).is_none()
}

/// Precedence among blocking taints: the `Reason` order (drain first).
fn taint_reason(taint: &Taint, node: &Node, pod: &Pod, conventions: &Conventions) -> Reason {
    let own = pod.own_placement();
    if conventions.drain_taints.matches(&taint.key) {
        Reason::AutoscalerDrain
    } else if tolerated(taint, &own.tolerations, own.host_network) {
        Reason::DaemonSetChanged
    } else if is_nfd_taint(&taint.key, node, taint_manager(node, &taint.key), &conventions.nfd_managers) {
        Reason::NfdChange
    } else {
        Reason::TaintAdded
    }
}

/// The cluster-autoscaler writes the unix time into its taint's value;
/// the node lifecycle controller sets `timeAdded` on NoExecute taints.
fn taint_added_at(taint: &Taint) -> Option<Timestamp> {
    if *taint.key == *CLUSTER_AUTOSCALER_TAINT
        && let Ok(secs) = taint.value.parse::<Timestamp>()
    {
        return Some(secs);
    }
    taint.time_added
}
