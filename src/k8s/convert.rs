//! k8s-openapi objects → the compact model. Only what classification reads survives.

use std::hash::Hash;
use std::sync::Arc;

// The API's own types go by their group (`apps::DaemonSet`, `core::NodeSelectorTerm`,
// `meta::LabelSelector`); bare names are the model's.
use k8s_openapi::api::apps::v1::{self as apps, ControllerRevision};
use k8s_openapi::api::core::v1::{self as core, NodeSelectorRequirement, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, ObjectMeta, OwnerReference, Time};

use serde::Deserialize as _;

use crate::k8s::health::{offset_from, read_health, same_health};
use crate::k8s::slim::{PodPlacement, SlimNode, SlimPod};
use crate::model::PlacementSpec;
use crate::model::interner::{Interner, is_own_placement, same_items};
use crate::model::text::same_pair;
use crate::model::{
    DaemonSet, DaemonSetStatus, Deletion, FieldOwner, Fingerprint, LabelSelector, Node, NodeManagers, NodeSelectorTerm,
    ObjectRef, Placement, Pod, PodLife, REVISION_HASH_LABEL, Requirement, Revision, SelectorOperator, Taint,
    TaintEffect, Uid,
};
use crate::rules::admission;
use crate::rules::eligibility::{label_requirement_is_valid, node_selector_term};
use crate::rules::reason::{NFD_FEATURE_LABELS_ANNOTATION, NFD_FEATURE_PREFIX, NFD_TAINTS_ANNOTATION};

/// An object that cannot be read into the model. It names the object and the problem.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{kind} {name}: {problem}")]
pub struct ConvertError {
    pub kind: &'static str,
    pub name: String,
    pub problem: String,
}

pub(crate) fn describe(meta: &ObjectMeta) -> String {
    match (&meta.namespace, &meta.name) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.clone(),
        _ => "<unnamed>".to_owned(),
    }
}

fn required<'a>(
    kind: &'static str,
    meta: &'a ObjectMeta,
    field: &str,
    value: Option<&'a String>,
) -> Result<&'a str, ConvertError> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(ConvertError { kind, name: describe(meta), problem: format!("missing {field}") }),
    }
}

fn seconds(time: &Time) -> i64 {
    time.0.as_second()
}

pub fn node(node: &SlimNode, interner: &mut Interner) -> Result<Node, ConvertError> {
    let meta = &node.metadata;
    let name = interner.str(required("Node", meta, "metadata.name", meta.name.as_ref())?);
    let labels = interner.labels(node.labels.iter());
    let taints = node
        .taints()
        .iter()
        .map(|t| {
            let (key, value, effect, time_added) = taint_parts(t);
            Taint { key: interner.str(key), value: interner.str(value), effect, time_added }
        })
        .collect();
    let qualified: Vec<String> = nfd_label_names(meta)
        .map(|name| match nfd_label_prefix(name) {
            "" => name.to_owned(),
            prefix => format!("{prefix}{name}"),
        })
        .collect();
    let nfd_label_keys = interner.keys(qualified.iter().map(String::as_str));
    let nfd_taint_keys = interner.keys(nfd_taints(meta).map(nfd_taint_key));
    let owners = node
        .owners
        .iter()
        .map(|o| FieldOwner { owns: interner.owned_fields(&o.manager, o.labels.iter(), o.taints), time: o.time })
        .collect();
    let managers = NodeManagers::new(owners);
    let fingerprint = Some(node_fingerprint(node));
    Ok(Node { name, labels, taints, nfd_label_keys, nfd_taint_keys, managers, fingerprint })
}

/// Whether `node(decoded)` would equal `cached`, answered without allocating, interning or
/// reading more of `cached` than its fingerprint: most node events are kubelet heartbeats
/// (status only). `tests/incremental.rs` checks that the two agree.
pub fn node_unchanged(decoded: &SlimNode, cached: &Node) -> bool {
    decoded.metadata.name.as_deref() == Some(&*cached.name) && cached.fingerprint == Some(node_fingerprint(decoded))
}

/// What `node` reads of `decoded`, in the form it reads it. Each list is followed by its
/// length, so that no item can pass for one of the next list.
fn node_fingerprint(decoded: &SlimNode) -> Fingerprint {
    let meta = &decoded.metadata;
    Fingerprint::of(|h| {
        meta.name.hash(h);
        decoded.labels.hash(h);
        decoded.taints().iter().map(taint_parts).for_each(|taint| taint.hash(h));
        decoded.taints().len().hash(h);
        let nfd_labels = nfd_label_names(meta).inspect(|name| (nfd_label_prefix(name), name).hash(h)).count();
        nfd_labels.hash(h);
        let nfd_taints = nfd_taints(meta).inspect(|taint| nfd_taint_key(taint).hash(h)).count();
        nfd_taints.hash(h);
        for owner in &decoded.owners {
            (&owner.manager, owner.time, owner.taints, &owner.labels).hash(h);
        }
        decoded.owners.len().hash(h);
    })
}

/// A taint as the model reads it: (key, value, effect, timeAdded).
fn taint_parts(t: &k8s_openapi::api::core::v1::Taint) -> (&str, &str, TaintEffect, Option<i64>) {
    (&t.key, t.value.as_deref().unwrap_or_default(), TaintEffect::parse(&t.effect), t.time_added.as_ref().map(seconds))
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

fn nfd_label_names(meta: &ObjectMeta) -> impl Iterator<Item = &str> + Clone {
    list_items(annotation(meta, NFD_FEATURE_LABELS_ANNOTATION))
}

fn nfd_taints(meta: &ObjectMeta) -> impl Iterator<Item = &str> + Clone {
    list_items(annotation(meta, NFD_TAINTS_ANNOTATION))
}

/// NFD names its labels without their prefix when it is its own.
fn nfd_label_prefix(name: &str) -> &'static str {
    if name.contains('/') { "" } else { NFD_FEATURE_PREFIX }
}

/// `key=value:effect` → `key`.
fn nfd_taint_key(taint: &str) -> &str {
    taint.split(['=', ':']).next().unwrap_or(taint)
}

fn list_items(value: Option<&str>) -> impl Iterator<Item = &str> + Clone {
    value.into_iter().flat_map(|v| v.split(',')).map(str::trim).filter(|s| !s.is_empty())
}

fn object_ref(kind: &'static str, meta: &ObjectMeta, interner: &mut Interner) -> Result<ObjectRef, ConvertError> {
    let name = required(kind, meta, "metadata.name", meta.name.as_ref())?;
    let namespace = required(kind, meta, "metadata.namespace", meta.namespace.as_ref())?;
    Ok(ObjectRef { namespace: interner.str(namespace), name: Arc::from(name) })
}

pub fn daemonset(ds: &apps::DaemonSet, interner: &mut Interner) -> Result<DaemonSet, ConvertError> {
    let meta = &ds.metadata;
    let id = object_ref("DaemonSet", meta, interner)?;
    let uid = interner.str(required("DaemonSet", meta, "metadata.uid", meta.uid.as_ref())?);
    let spec = ds.spec.as_ref();
    let selector = label_selector(spec.map(|s| &s.selector), interner);
    let template = placement_from_template(spec.map(|s| &s.template), interner);
    let status = ds.status.as_ref().map(|s| DaemonSetStatus {
        number_misscheduled: s.number_misscheduled.into(),
        desired_number_scheduled: s.desired_number_scheduled.into(),
    });
    let min_ready_seconds = spec.and_then(|s| s.min_ready_seconds).map_or(0, |s| u32::try_from(s).unwrap_or(0));
    Ok(DaemonSet {
        uid,
        id,
        selector,
        template,
        status,
        deleting: meta.deletion_timestamp.is_some(),
        min_ready_seconds,
        refuses_disruption: admission::refuses_disruption(meta.annotations.as_ref()),
    })
}

pub fn revision(rev: &ControllerRevision, interner: &mut Interner) -> Result<Revision, ConvertError> {
    let meta = &rev.metadata;
    let id = object_ref("ControllerRevision", meta, interner)?;
    let uid = Arc::from(required("ControllerRevision", meta, "metadata.uid", meta.uid.as_ref())?);
    let owner_uid = controller_of_kind(meta.owner_references.as_deref(), "DaemonSet").map(|o| interner.str(&o.uid));
    let hash = meta.labels.as_ref().and_then(|l| l.get(REVISION_HASH_LABEL)).map(|h| interner.str(h));
    // The DaemonSet controller stores `{"spec":{"template":{...}}}` as the revision's data.
    let template = match rev.data.as_ref().and_then(|d| d.0.pointer("/spec/template")) {
        None => None,
        Some(value) => Some(PodTemplateSpec::deserialize(value).map_err(|e| ConvertError {
            kind: "ControllerRevision",
            name: describe(meta),
            problem: format!("data.spec.template is not a pod template: {e}"),
        })?),
    };
    let placement = placement_from_template(template.as_ref(), interner);
    Ok(Revision { uid, id, owner_uid, hash, placement })
}

pub fn pod(pod: &SlimPod, interner: &mut Interner) -> Result<Pod, ConvertError> {
    let meta = &pod.metadata;
    let name = required("Pod", meta, "metadata.name", meta.name.as_ref())?;
    let namespace = required("Pod", meta, "metadata.namespace", meta.namespace.as_ref())?;
    let controller_uid = pod.controller_uid.as_deref();
    let uid = Uid::parse(required("Pod", meta, "metadata.uid", meta.uid.as_ref())?);
    let labels = interner.labels(pod.labels.iter());
    let spec = pod.spec.as_ref();
    // The controller rewrites a daemon pod's required affinity; the original lives in its revision.
    let own_placement = interner.own_placement(spec);
    let id = interner.pod_id(namespace, name, controller_uid, labels, own_placement);
    let target_node = spec.and_then(target_node_name).map(|n| interner.thin_str(n));
    let created = meta.creation_timestamp.as_ref().map_or(0, seconds);
    let health = read_health(pod.status.as_ref());
    let life = PodLife {
        created,
        deletion: deletion(meta),
        terminal: pod.is_terminal(),
        health: health.health,
        health_offset: offset_from(created, health.since),
        detail: health.detail.map(|d| interner.str(&d)),
        bound: spec.is_some_and(is_bound),
    };
    Ok(Pod::new(uid, id, target_node, life))
}

/// Whether `pod(decoded)` would equal `cached`, answered without allocating or
/// interning: most pod events are status updates that change nothing the index keeps.
/// Mirrors `pod` field by field, except what the API server never lets an update change
/// (see [`pod_unchanged_but_uid`]); `tests/incremental.rs` checks that the two agree.
pub fn pod_unchanged(decoded: &SlimPod, cached: &Pod) -> bool {
    decoded.metadata.uid.as_deref().is_some_and(|uid| cached.uid == *uid) && pod_unchanged_but_uid(decoded, cached)
}

/// [`pod_unchanged`] for a `cached` pod the caller found under the decoded pod's UID, so
/// the UID is not parsed a second time on every status update.
///
/// Name, namespace and creation time are not compared: the API server refuses an update
/// that changes them (`ValidateObjectMetaUpdate`), so the object under a UID keeps the
/// ones it was cached with. Reading the cached name missed the cache on every status
/// update: a fifth of the event time at 2,600,000 pods.
pub fn pod_unchanged_but_uid(decoded: &SlimPod, cached: &Pod) -> bool {
    let meta = &decoded.metadata;
    let spec = decoded.spec.as_ref();
    decoded.controller_uid.as_deref() == cached.controller_uid().map(|uid| &**uid)
        // The revision hash is one of the labels.
        && same_pairs(decoded.labels.iter(), cached.labels().iter())
        && same_target_node(spec, cached)
        && is_own_placement(cached.own_placement(), spec)
        && deletion(meta) == cached.deletion()
        && decoded.is_terminal() == cached.is_terminal()
        && same_health(decoded.status.as_ref(), cached)
}

/// Whether the decoded pod targets the cached one's node. A bound pod still bound is where
/// it was (`PodLife::bound`), so only the few unbound ones compare names: reading the cached
/// name is two hops to memory that, at 65,000 nodes, misses the cache on every status update.
fn same_target_node(spec: Option<&PodPlacement>, cached: &Pod) -> bool {
    let bound = spec.is_some_and(is_bound);
    bound == cached.is_bound() && (bound || spec.and_then(target_node_name) == cached.target_node().map(|n| &**n))
}

fn same_pairs<'a>(
    decoded: impl Iterator<Item = (&'a str, &'a str)>,
    cached: impl Iterator<Item = (&'a crate::model::Str, &'a crate::model::Str)>,
) -> bool {
    same_items(decoded, cached.map(|(k, v)| (&**k, &**v)), same_pair)
}

fn deletion(meta: &ObjectMeta) -> Option<Deletion> {
    meta.deletion_timestamp.as_ref().map(|t| Deletion {
        timestamp: seconds(t),
        grace_period_seconds: meta.deletion_grace_period_seconds.unwrap_or(0),
    })
}

/// `spec.nodeName` is set (`PodLife::bound`).
fn is_bound(spec: &PodPlacement) -> bool {
    spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
}

/// `GetTargetNodeName`: `spec.nodeName`, else the first `matchFields metadata.name In`
/// requirement of the required affinity, which must have exactly one value.
pub fn target_node_name(spec: &PodPlacement) -> Option<&str> {
    spec.node_name.as_deref().filter(|n| !n.is_empty()).or(spec.affinity_target.0.as_deref())
}

/// `metav1.GetControllerOf`: the first ownerReference marked as controller, of any kind.
fn controller_of_kind<'a>(owners: Option<&'a [OwnerReference]>, kind: &str) -> Option<&'a OwnerReference> {
    owners?.iter().find(|o| o.controller == Some(true) && o.kind == kind && o.api_version.starts_with("apps/"))
}

fn placement_from_template(template: Option<&PodTemplateSpec>, interner: &mut Interner) -> Arc<Placement> {
    let Some(spec) = template.and_then(|t| t.spec.as_ref()) else {
        return interner.placement(Placement::default());
    };
    let required_terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|sel| sel.node_selector_terms.iter().map(|t| term(t, interner)).collect());
    let placement = Placement {
        node_name: spec.node_name.as_deref().filter(|n| !n.is_empty()).map(|n| interner.str(n)),
        node_selector: interner.pairs(spec.node_selector()),
        required_terms,
        tolerations: interner.tolerations(spec.tolerations()),
        host_network: spec.host_network(),
    };
    interner.placement(placement)
}

fn term(term: &core::NodeSelectorTerm, interner: &mut Interner) -> NodeSelectorTerm {
    let mut reqs = |list: &Option<Vec<NodeSelectorRequirement>>| -> Vec<Requirement> {
        list.iter()
            .flatten()
            .map(|r| Requirement {
                key: interner.str(&r.key),
                operator: SelectorOperator::parse(&r.operator),
                values: r.values.iter().flatten().map(|v| interner.str(v)).collect(),
            })
            .collect()
    };
    node_selector_term(reqs(&term.match_expressions), reqs(&term.match_fields))
}

/// `metav1.LabelSelectorAsSelector`: a missing selector selects nothing. An empty one
/// would select every pod, and one `labels.NewRequirement` rejects cannot be built:
/// the controller refuses to sync either.
fn label_selector(selector: Option<&meta::LabelSelector>, interner: &mut Interner) -> LabelSelector {
    let Some(selector) = selector else { return LabelSelector::Nothing };
    let mut reqs: Vec<Requirement> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| Requirement {
            key: interner.str(k),
            operator: SelectorOperator::In,
            values: vec![interner.str(v)],
        })
        .collect();
    for expr in selector.match_expressions.iter().flatten() {
        let operator = match expr.operator.as_str() {
            op @ ("In" | "NotIn" | "Exists" | "DoesNotExist") => SelectorOperator::parse(op),
            _ => return LabelSelector::Refused,
        };
        let values = expr.values.iter().flatten().map(|v| interner.str(v)).collect();
        reqs.push(Requirement { key: interner.str(&expr.key), operator, values });
    }
    if reqs.is_empty() || !reqs.iter().all(label_requirement_is_valid) {
        return LabelSelector::Refused;
    }
    LabelSelector::Requirements(reqs)
}
