//! `NodeShouldRunDaemonPod`, re-implemented over plain data.
//!
//! This mirrors kubernetes `pkg/controller/daemon` (see
//! `docs/controller-semantics.md`): the simulated pod is the DaemonSet's
//! *current* template plus the default daemon tolerations, checked for
//! nodeName, nodeSelector + required node affinity, and NoSchedule/NoExecute
//! taints. Everything here is pure and allocation-free on the hot path.

use std::sync::LazyLock;

use crate::model::{
    LabelSelector, LabelSet, Node, NodeSelectorTerm, Placement, Requirement, SelectorOperator, Str, Taint, TaintEffect,
    Toleration, TolerationOperator,
};
use crate::rules::validation::{is_label_value, is_qualified_name};

/// The only node field a `matchFields` requirement can see set.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// The tolerations the controller adds to every daemon pod (all `Exists`, no
/// `tolerationSeconds`). The flag marks network-unavailable, which is added only
/// for `hostNetwork` pods.
pub const DEFAULT_TOLERATIONS: [(&str, TaintEffect, bool); 7] = [
    ("node.kubernetes.io/not-ready", TaintEffect::NoExecute, false),
    ("node.kubernetes.io/unreachable", TaintEffect::NoExecute, false),
    ("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule, false),
    ("node.kubernetes.io/memory-pressure", TaintEffect::NoSchedule, false),
    ("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule, false),
    ("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule, false),
    ("node.kubernetes.io/network-unavailable", TaintEffect::NoSchedule, true),
];

/// The key a `spec.nodeName` mismatch is reported under.
pub const NODE_NAME_KEY: &str = "spec.nodeName";

/// The kind of a `Skip`: the `reason` label of `daemonset_ineligible_nodes`. In the order
/// of their names, so that rows sort the same by either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    NodeAffinity,
    NodeName,
    NodeSelector,
    Taint,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NodeAffinity => "node_affinity",
            SkipReason::NodeName => "node_name",
            SkipReason::NodeSelector => "node_selector",
            SkipReason::Taint => "taint",
        }
    }
}

/// Why the controller would not run a daemon pod on a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Skip {
    /// The template's `spec.nodeName` names another node.
    NodeName,
    /// A nodeSelector pair does not match; `key` is the first such label key.
    NodeSelector { key: Str },
    /// No required node-affinity term matches; `key` is the first failing
    /// requirement's key in the first term (empty when the term list is empty
    /// or the first term is empty).
    NodeAffinity { key: Str },
    /// An untolerated NoSchedule/NoExecute taint; `key` is the first one in node order.
    /// `no_execute` is whether any untolerated taint is NoExecute (the pod gets deleted).
    Taint { key: Str, no_execute: bool },
}

impl Skip {
    /// `shouldContinueRunning`: only NoSchedule taints let an existing pod stay.
    pub fn should_continue_running(&self) -> bool {
        matches!(self, Skip::Taint { no_execute: false, .. })
    }

    pub fn reason(&self) -> SkipReason {
        match self {
            Skip::NodeName => SkipReason::NodeName,
            Skip::NodeSelector { .. } => SkipReason::NodeSelector,
            Skip::NodeAffinity { .. } => SkipReason::NodeAffinity,
            Skip::Taint { .. } => SkipReason::Taint,
        }
    }

    pub fn key(&self) -> &str {
        match self {
            Skip::NodeName => NODE_NAME_KEY,
            Skip::NodeSelector { key } | Skip::NodeAffinity { key } | Skip::Taint { key, .. } => key,
        }
    }

    /// `key` as a shared string, for keying counts without allocating.
    pub fn shared_key(&self) -> Str {
        static NODE_NAME: LazyLock<Str> = LazyLock::new(|| Str::from(NODE_NAME_KEY));
        match self {
            Skip::NodeName => NODE_NAME.clone(),
            Skip::NodeSelector { key } | Skip::NodeAffinity { key } | Skip::Taint { key, .. } => key.clone(),
        }
    }

    /// Affinity-type skips: the controller deletes the pod.
    pub fn is_placement_mismatch(&self) -> bool {
        matches!(self, Skip::NodeSelector { .. } | Skip::NodeAffinity { .. })
    }
}

/// `NodeShouldRunDaemonPod(node, ds)`: `None` means `(true, true)`; otherwise
/// `shouldRun` is false and `Skip::should_continue_running` gives the second value.
pub fn should_run(node: &Node, template: &Placement) -> Option<Skip> {
    if let Some(name) = &template.node_name
        && !name.is_empty()
        && **name != *node.name
    {
        return Some(Skip::NodeName);
    }
    if let Some(skip) = placement_mismatch(node, template) {
        return Some(skip);
    }
    let mut blocking = untolerated_taints(node, &template.tolerations, template.host_network);
    let first = blocking.next()?;
    let no_execute = first.effect == TaintEffect::NoExecute || blocking.any(|t| t.effect == TaintEffect::NoExecute);
    Some(Skip::Taint { key: first.key.clone(), no_execute })
}

/// nodeSelector plus required node affinity (`fitsNodeAffinity`). `None` when it fits.
pub fn placement_mismatch(node: &Node, placement: &Placement) -> Option<Skip> {
    affinity_mismatch(node, &placement.node_selector, placement.required_terms.as_deref())
}

/// [`placement_mismatch`] over the two parts, for callers that mix templates.
pub fn affinity_mismatch(
    node: &Node,
    node_selector: &[(Str, Str)],
    required_terms: Option<&[NodeSelectorTerm]>,
) -> Option<Skip> {
    for (key, value) in node_selector {
        if node.labels.get(key) != Some(value) {
            return Some(Skip::NodeSelector { key: key.clone() });
        }
    }
    let terms = required_terms?;
    if terms.iter().any(|term| term_matches(term, node)) {
        return None;
    }
    let key = terms.first().and_then(|term| first_failing_requirement(term, node)).cloned();
    Some(Skip::NodeAffinity { key: key.unwrap_or_else(|| Str::from("")) })
}

/// NoSchedule/NoExecute taints on the node that the tolerations (plus the
/// controller's defaults) do not tolerate, in node order.
pub fn untolerated_taints<'a>(
    node: &'a Node,
    tolerations: &'a [Toleration],
    host_network: bool,
) -> impl Iterator<Item = &'a Taint> + 'a {
    node.taints.iter().filter(move |taint| {
        taint.effect.blocks_daemon_pods()
            && !tolerated_by_defaults(taint, host_network)
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// Whether a pod with exactly these tolerations (plus defaults) tolerates the taint.
pub fn tolerated(taint: &Taint, tolerations: &[Toleration], host_network: bool) -> bool {
    tolerated_by_defaults(taint, host_network) || tolerations.iter().any(|t| tolerates(t, taint))
}

fn tolerated_by_defaults(taint: &Taint, host_network: bool) -> bool {
    DEFAULT_TOLERATIONS.iter().any(|&(key, effect, needs_host_network)| {
        *taint.key == *key && taint.effect == effect && (host_network || !needs_host_network)
    })
}

/// `Toleration.ToleratesTaint`, as in k8s.io/api/core/v1.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration.effect.is_some_and(|effect| effect != taint.effect) {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator {
        TolerationOperator::Exists => true,
        TolerationOperator::Equal => toleration.value == taint.value,
        TolerationOperator::Unsupported => false,
    }
}

/// A node selector term: every expression and every field requirement holds.
/// An empty term matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    first_failing_requirement(term, node).is_none()
}

/// The key of the first requirement in a term that fails (expressions first, then fields).
fn first_failing_requirement<'a>(term: &'a NodeSelectorTerm, node: &Node) -> Option<&'a Str> {
    // An invalid requirement anywhere makes the whole term unparsable upstream,
    // so it fails the term even if an earlier requirement would have failed too.
    if let Some(bad) = &term.unparsable {
        return Some(bad);
    }
    term.match_expressions
        .iter()
        .find(|r| !label_requirement_matches(r, &node.labels))
        .or_else(|| term.match_fields.iter().find(|r| !field_requirement_matches(r, &node.name)))
        .map(|r| &r.key)
}

/// A node selector term, with the key of its first requirement upstream cannot parse
/// (`nodeSelectorRequirementsAsSelector` or `nodeSelectorRequirementsAsFieldSelector`
/// fails, and `nodeaffinity.NewLazyErrorNodeSelector` then fails the term): label
/// requirements first, then field ones. Found here once, not on every node event.
pub fn node_selector_term(match_expressions: Vec<Requirement>, match_fields: Vec<Requirement>) -> NodeSelectorTerm {
    let bad_label = match_expressions.iter().find(|r| !label_requirement_is_valid(r));
    let bad = bad_label.or_else(|| match_fields.iter().find(|r| !field_requirement_is_valid(r)));
    let unparsable = bad.map(|r| r.key.clone());
    NodeSelectorTerm { match_expressions, match_fields, unparsable }
}

/// `labels.NewRequirement`: a qualified key, values that are label values, and the
/// value count its operator needs (`Gt`/`Lt`: one 64-bit integer).
pub fn label_requirement_is_valid(r: &Requirement) -> bool {
    let arity = match r.operator {
        SelectorOperator::In | SelectorOperator::NotIn => !r.values.is_empty(),
        SelectorOperator::Exists | SelectorOperator::DoesNotExist => r.values.is_empty(),
        SelectorOperator::Gt | SelectorOperator::Lt => r.values.len() == 1 && r.values[0].parse::<i64>().is_ok(),
        SelectorOperator::Invalid => false,
    };
    arity && is_qualified_name(&r.key) && r.values.iter().all(|v| is_label_value(v))
}

/// `matchFields` become a field selector: `In`/`NotIn` with exactly one value. The key
/// is not checked there; a field the node does not have reads as empty.
fn field_requirement_is_valid(r: &Requirement) -> bool {
    matches!(r.operator, SelectorOperator::In | SelectorOperator::NotIn) && r.values.len() == 1
}

/// One `matchExpressions` requirement against a node's labels (`labels.Requirement.Matches`).
/// The caller checks validity first ([`label_requirement_is_valid`]).
pub fn label_requirement_matches(r: &Requirement, labels: &LabelSet) -> bool {
    let value = labels.get(&r.key);
    match r.operator {
        SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
        SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
        SelectorOperator::Exists => value.is_some(),
        SelectorOperator::DoesNotExist => value.is_none(),
        SelectorOperator::Gt | SelectorOperator::Lt => {
            let actual = value.and_then(|v| v.parse::<i64>().ok());
            let bound = r.values.first().and_then(|b| b.parse::<i64>().ok());
            let (Some(actual), Some(bound)) = (actual, bound) else { return false };
            if r.operator == SelectorOperator::Gt { actual > bound } else { actual < bound }
        }
        SelectorOperator::Invalid => false,
    }
}

/// The node's fields as a field selector sees them: only `metadata.name` is set. A node
/// without a name has no fields, and then `matchFields` are not checked at all.
fn field_requirement_matches(r: &Requirement, node_name: &str) -> bool {
    if node_name.is_empty() {
        return true;
    }
    let field = if *r.key == *NODE_NAME_FIELD { node_name } else { "" };
    let equal = r.values.first().is_some_and(|v| **v == *field);
    if r.operator == SelectorOperator::In { equal } else { !equal }
}

/// A DaemonSet's label selector against a pod's labels (claiming). Conversion has
/// already checked the requirements; an invalid selector is `Refused`.
pub fn selector_matches(selector: &LabelSelector, labels: &LabelSet) -> bool {
    match selector {
        LabelSelector::Nothing | LabelSelector::Refused => false,
        LabelSelector::Requirements(reqs) => reqs.iter().all(|r| label_requirement_matches(r, labels)),
    }
}
