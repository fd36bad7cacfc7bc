//! A pod and a list of pods on the protobuf wire, read into `SlimPod` as the JSON wire is:
//! the placement part of the spec, and what the status says of the pod being available.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kube::api::ObjectList;
use prost::Message;

use super::list::{WireListMeta, object_list};
use super::meta::{Meta, WireTime, pod_meta, time};
use super::{ProtoError, non_empty};
use crate::k8s::slim::{
    AffinityTarget, ConditionKind, ContainerState, ContainerStatus, Memo, PodCondition, PodParts, PodPlacement,
    PodStatus, PodToleration, SlimPod, Terminated, Tolerations, Waiting, is_terminal_phase,
};
use crate::rules::eligibility::NODE_NAME_FIELD;

#[derive(Clone, PartialEq, Message)]
struct PodList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<WireListMeta>,
    #[prost(message, repeated, tag = "2")]
    items: Vec<Pod>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct Pod {
    #[prost(message, optional, tag = "1")]
    metadata: Option<Meta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<Spec>,
    #[prost(message, optional, tag = "3")]
    status: Option<Status>,
}

#[derive(Clone, PartialEq, Message)]
struct Spec {
    #[prost(btree_map = "string, string", tag = "7")]
    node_selector: BTreeMap<String, String>,
    #[prost(string, optional, tag = "10")]
    node_name: Option<String>,
    #[prost(bool, optional, tag = "11")]
    host_network: Option<bool>,
    #[prost(message, optional, tag = "18")]
    affinity: Option<Affinity>,
    /// Each a `Toleration`, read once for each distinct set of bytes.
    #[prost(bytes = "bytes", repeated, tag = "22")]
    tolerations: Vec<Bytes>,
}

#[derive(Clone, PartialEq, Message)]
struct Affinity {
    #[prost(message, optional, tag = "1")]
    node_affinity: Option<NodeAffinity>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution`.
    #[prost(message, optional, tag = "1")]
    required: Option<NodeSelector>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeSelector {
    #[prost(message, repeated, tag = "1")]
    node_selector_terms: Vec<NodeSelectorTerm>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeSelectorTerm {
    #[prost(message, repeated, tag = "2")]
    match_fields: Vec<Requirement>,
}

#[derive(Clone, PartialEq, Message)]
struct Requirement {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Toleration {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    operator: Option<String>,
    #[prost(string, optional, tag = "3")]
    value: Option<String>,
    #[prost(string, optional, tag = "4")]
    effect: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Status {
    #[prost(string, optional, tag = "1")]
    phase: Option<String>,
    #[prost(message, repeated, tag = "2")]
    conditions: Vec<Condition>,
    #[prost(message, repeated, tag = "8")]
    container_statuses: Vec<WireContainerStatus>,
    #[prost(message, repeated, tag = "10")]
    init_container_statuses: Vec<WireContainerStatus>,
}

#[derive(Clone, PartialEq, Message)]
struct Condition {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<WireTime>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    message: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct WireContainerStatus {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, optional, tag = "2")]
    state: Option<WireContainerState>,
    #[prost(message, optional, tag = "3")]
    last_state: Option<WireContainerState>,
    #[prost(string, optional, tag = "6")]
    image: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct WireContainerState {
    #[prost(message, optional, tag = "1")]
    waiting: Option<WireWaiting>,
    #[prost(message, optional, tag = "3")]
    terminated: Option<WireTerminated>,
}

#[derive(Clone, PartialEq, Message)]
struct WireWaiting {
    #[prost(string, optional, tag = "1")]
    reason: Option<String>,
    #[prost(string, optional, tag = "2")]
    message: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct WireTerminated {
    #[prost(int32, optional, tag = "1")]
    exit_code: Option<i32>,
    #[prost(string, optional, tag = "3")]
    reason: Option<String>,
}

thread_local! {
    static TOLERATIONS: Memo<[u8], Tolerations> = Memo::default();
}

/// A list page of pods, as its `raw` bytes inside the wrapper (`super::unwrap`).
pub fn pod_list(raw: Bytes) -> Result<ObjectList<SlimPod>, ProtoError> {
    let list = PodList::decode(raw)?;
    let items = list.items.into_iter().map(slim_pod).collect::<Result<_, _>>()?;
    Ok(object_list("PodList", list.metadata, items))
}

/// One pod, as the `raw` bytes of its wrapper (a watch event's object).
pub fn pod(raw: Bytes) -> Result<SlimPod, ProtoError> {
    slim_pod(Pod::decode(raw)?)
}

fn slim_pod(pod: Pod) -> Result<SlimPod, ProtoError> {
    let (metadata, labels, controller_uid) = pod_meta(pod.metadata.unwrap_or_default())?;
    let spec = pod.spec.map(placement).transpose()?;
    let status = pod.status.map(status).transpose()?;
    Ok(SlimPod::from(PodParts { metadata, labels, controller_uid, spec, status }))
}

fn placement(spec: Spec) -> Result<PodPlacement, ProtoError> {
    let tolerations = super::meta::read_once(&TOLERATIONS, &spec.tolerations, |tolerations| {
        if tolerations.is_empty() {
            return Ok(None);
        }
        let read = tolerations.iter().map(|t| {
            let t = Toleration::decode(t.clone())?;
            let text = |field: &Option<String>| field.as_deref().unwrap_or_default().to_owned();
            Ok(PodToleration::from_fields(&text(&t.key), &text(&t.operator), &text(&t.value), &text(&t.effect)))
        });
        Ok(Some(read.collect::<Result<Arc<[_]>, ProtoError>>()?))
    })?;
    Ok(PodPlacement {
        node_name: non_empty(spec.node_name),
        node_selector: (!spec.node_selector.is_empty()).then_some(spec.node_selector),
        affinity_target: affinity_target(spec.affinity),
        tolerations,
        host_network: spec.host_network.filter(|&on| on),
    })
}

/// `GetTargetNodeName`'s fallback, as `AffinityTarget` reads it from JSON: the one value of
/// the first `metadata.name In` requirement of the required terms' `matchFields`.
fn affinity_target(affinity: Option<Affinity>) -> AffinityTarget {
    let required = affinity.and_then(|a| a.node_affinity).and_then(|n| n.required);
    let terms = required.into_iter().flat_map(|r| r.node_selector_terms);
    let mut fields = terms.flat_map(|t| t.match_fields);
    let first = fields.find(|f| f.key.as_deref() == Some(NODE_NAME_FIELD) && f.operator.as_deref() == Some("In"));
    AffinityTarget(first.and_then(|f| <[String; 1]>::try_from(f.values).ok()).map(|[only]| only))
}

fn status(status: Status) -> Result<PodStatus, ProtoError> {
    let conditions = status.conditions.into_iter().map(|c| {
        let kind = ConditionKind::parse(c.kind.as_deref().unwrap_or_default());
        let true_ = c.status.as_deref() == Some("True");
        let mut condition = PodCondition { kind, true_, ..PodCondition::default() };
        if kind != ConditionKind::Other {
            let at = time(c.last_transition_time, "status.conditions.lastTransitionTime")?;
            condition.last_transition = at.map(|t| t.0.as_second());
            if !true_ {
                condition.reason = non_empty(c.reason);
                condition.message = non_empty(c.message);
            }
        }
        Ok(condition)
    });
    Ok(PodStatus {
        terminal: is_terminal_phase(status.phase.as_deref().unwrap_or_default()),
        conditions: conditions.collect::<Result<_, ProtoError>>()?,
        init_container_statuses: status.init_container_statuses.into_iter().map(container_status).collect(),
        container_statuses: status.container_statuses.into_iter().map(container_status).collect(),
    })
}

/// A container's status; its name and image only while it waits, as from JSON.
fn container_status(status: WireContainerStatus) -> ContainerStatus {
    let state = status.state.map(container_state).unwrap_or_default();
    let waits = state.waiting.is_some();
    ContainerStatus {
        name: status.name.filter(|_| waits).unwrap_or_default(),
        image: status.image.filter(|_| waits).unwrap_or_default(),
        state,
        last_state: status.last_state.map(container_state).unwrap_or_default(),
    }
}

fn container_state(state: WireContainerState) -> ContainerState {
    ContainerState {
        waiting: state.waiting.map(|w| Waiting { reason: non_empty(w.reason), message: non_empty(w.message) }),
        terminated: state.terminated.map(|t| Terminated {
            exit_code: t.exit_code.unwrap_or_default(),
            reason: t.reason.filter(|r| !r.is_empty()).map(|r| Terminated::reason_of(&r)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::proto::unwrap;

    /// The same daemon pods, listed from the lab's 1.37 API server in each encoding: the
    /// controller's pods, their status written by KWOK (`tests/fixtures/proto/fetch.sh`).
    const JSON: &[u8] = include_bytes!("../../../tests/fixtures/proto/pods.json");
    const PROTOBUF: &[u8] = include_bytes!("../../../tests/fixtures/proto/pods.pb");

    fn from_protobuf(answer: &'static [u8]) -> Result<ObjectList<SlimPod>, ProtoError> {
        pod_list(unwrap(Bytes::from_static(answer), "PodList")?)
    }

    #[test]
    fn a_real_pod_list_reads_the_same_from_either_wire() {
        let json: ObjectList<SlimPod> = serde_json::from_slice(JSON).unwrap();
        let protobuf = from_protobuf(PROTOBUF).unwrap();
        assert_eq!(protobuf.metadata, json.metadata);
        assert_eq!(protobuf.items.len(), 13, "every pod of the fixture");
        for (json, protobuf) in json.items.iter().zip(&protobuf.items) {
            assert_eq!(format!("{protobuf:#?}"), format!("{json:#?}"));
        }
        // The fixture has in it what the comparison must cover.
        let pods = &protobuf.items;
        let waiting = |reason: &str| {
            pods.iter().flat_map(|p| &p.status.as_ref().unwrap().container_statuses).any(|c| {
                c.state.waiting.as_ref().and_then(|w| w.reason.as_deref()) == Some(reason) && !c.name.is_empty()
            })
        };
        assert!(waiting("ImagePullBackOff") && waiting("CrashLoopBackOff"));
        assert!(pods.iter().any(|p| p.status.as_ref().unwrap().container_statuses[0].last_state.terminated.is_some()));
        let spec = |p: &SlimPod| p.spec.clone().unwrap();
        assert!(pods.iter().all(|p| spec(p).affinity_target.0.is_some() && spec(p).tolerations.is_some()));
        assert!(pods.iter().any(|p| spec(p).host_network == Some(true) && spec(p).node_selector.is_some()));
        assert!(pods.iter().all(|p| p.controller_uid.is_some() && !p.labels.is_empty()));
        let ready = |p: &SlimPod| p.status.as_ref().unwrap().conditions.get(ConditionKind::Ready).cloned().unwrap();
        assert!(pods.iter().any(|p| ready(p).true_) && pods.iter().any(|p| ready(p).reason.is_some()));
    }

    #[test]
    fn a_list_cut_short_is_a_cut_and_a_wrong_field_is_named() {
        // Anywhere after the wrapper's first four bytes, through the last.
        let len = PROTOBUF.len();
        for end in (4..len).step_by(89).chain(len - 40..len) {
            let error = from_protobuf(&PROTOBUF[..end]).unwrap_err();
            assert!(error.is_cut(), "cut at {end}: {error}");
        }
        // The list's items field (2) sent as a number: not a list the exporter can read.
        let raw = unwrap(Bytes::from_static(PROTOBUF), "PodList").unwrap();
        let wrong = [&[0x10, 0x01][..], &raw].concat();
        let error = pod_list(wrong.into()).unwrap_err();
        assert!(!error.is_cut());
        assert!(error.to_string().contains("PodList.items"), "{error}");
    }
}
