//! The suggested fix each row carries: one line an operator can act on, for a misscheduled
//! pod, a lost node and a node without an available pod. Events say the same.

use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

/// The fix for a misscheduled pod, said of an orphan (a pod with no controller) too: it
/// counts because the controller adopts it.
pub fn fix_for(orphan: bool, reason: Reason, key: &str, node: &str) -> String {
    let fix = suggested_fix(reason, key, node);
    if !orphan {
        return fix;
    }
    format!(
        "orphan pod (no controller): the DaemonSet controller will adopt it at its next sync, which is why it counts; {fix}"
    )
}

/// A misscheduled pod already being deleted (by the controller, for a skip it deletes for,
/// or by a drain's eviction): say so first, since the node is about to lose its agent.
pub(crate) fn being_deleted(deleting: bool, node: &str, fix: String) -> String {
    if !deleting {
        return fix;
    }
    format!("the pod is being deleted: {node} is about to lose its agent (then listed under lost nodes); {fix}")
}

/// One line an operator can act on.
pub fn suggested_fix(reason: Reason, key: &str, node: &str) -> String {
    match reason {
        Reason::AutoscalerDrain => format!(
            "expected while {node} drains; add toleration {key}:NoSchedule if the agent should stay until the node is gone"
        ),
        Reason::DaemonSetChanged => format!(
            "the DaemonSet changed ({key}) after this pod was created; revert the change or let the controller replace the pod"
        ),
        Reason::NfdChange => format!(
            "node-feature-discovery no longer reports {key} on {node}; check NFD on the node or relax the DaemonSet's selector"
        ),
        Reason::TaintAdded => format!(
            "taint {key} was added to {node}; remove it (kubectl taint node {node} {key}-) or tolerate it in the DaemonSet"
        ),
        Reason::LabelDrift => format!(
            "node {node} no longer matches {key}; restore the label (kubectl label node {node} {key}=...) or change the DaemonSet's selector"
        ),
        Reason::NodeNameMismatch => {
            "the template pins spec.nodeName to another node; remove spec.nodeName from the DaemonSet template"
                .to_owned()
        }
    }
}

/// The fix for a node whose pod went: the misscheduled pod's, except where that one speaks
/// of the pod.
pub fn lost_fix(reason: Reason, key: &str, node: &str) -> String {
    match reason {
        Reason::DaemonSetChanged => format!(
            "the DaemonSet's placement changed ({key}) and no longer wants {node}; expected if that was the intent, else revert the change"
        ),
        reason => suggested_fix(reason, key, node),
    }
}

/// What to do about a node without an available pod.
pub fn uncovered_fix(reason: Uncovered, node: &str, detail: &str) -> String {
    match reason {
        Uncovered::Unschedulable if detail.contains("free ports") => format!(
            "another pod on {node} holds the host port: give this DaemonSet another hostPort, or move the pod that holds it (kubectl get pods -A -o wide --field-selector spec.nodeName={node})"
        ),
        Uncovered::Unschedulable if !detail.contains("Insufficient") => {
            format!("the scheduler cannot place the pod on {node} ({detail}): relax the constraint the detail names")
        }
        Uncovered::CreateFailed => {
            "the controller cannot create the pod: see the FailedCreate Events of the DaemonSet (kubectl describe ds) for the quota, webhook or Pod Security rule that refuses it".to_owned()
        }
        Uncovered::Unschedulable => format!(
            "the scheduler cannot place the pod on {node}: give the DaemonSet a priorityClassName that preempts (system-node-critical), lower its requests, or free what the detail names"
        ),
        Uncovered::ImagePull => "the image cannot be pulled: check its name and tag, the registry, and imagePullSecrets".to_owned(),
        Uncovered::CrashLoop => format!(
            "the container keeps crashing on {node}: kubectl logs --previous on the pod, and what {node} lacks (a kernel module, a device, a mount)"
        ),
        Uncovered::ConfigError => "the container cannot be created: create the Secret or ConfigMap the detail names, or fix the reference".to_owned(),
        Uncovered::NotReady => "the pod runs but is not Ready: check its readiness probe and kubectl describe pod".to_owned(),
        Uncovered::Starting => "expected: the pod is on its way (created, bound or being replaced moments ago)".to_owned(),
    }
}
