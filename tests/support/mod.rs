//! Test support: hand-built API objects shaped the way the DaemonSet controller
//! writes them, and a small HTTP client.
#![allow(dead_code)]

pub mod browser;
pub mod chart;
pub mod cluster;
pub mod exporter;
pub mod fakeapi;
pub mod http;
pub mod nfd;
pub mod plugin;
pub mod process;
pub mod prometheus;
pub mod proxy;
pub mod scene;
pub mod synth;

pub use exporter::Exporter;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{Index, Indexed};
use misschedule_exporter::k8s::slim::{SlimNode, SlimPod};
use serde_json::{Value, json};

/// The wall clock, as time since the Unix epoch (the API server's timestamps count from it).
pub fn unix_time() -> std::time::Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("the clock reads after 1970")
}

pub fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("test object is valid")
}

/// A node with labels and taints given as `key=value:Effect` (value optional).
pub fn node(name: &str, labels: &[(&str, &str)], taints: &[&str]) -> Node {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let taints: Vec<Value> = taints
        .iter()
        .map(|t| {
            let (kv, effect) = t.rsplit_once(':').expect("taint needs :Effect");
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            json!({"key": key, "value": value, "effect": effect})
        })
        .collect();
    from(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}),
    )
}

/// A DaemonSet `ns/name` (uid `uid-name`) selecting `app=name`, with `pod_spec` as its template's spec.
pub fn daemonset(name: &str, pod_spec: Value) -> DaemonSet {
    from(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
        }
    }))
}

/// A pod as the controller makes it for `ds` on `node`: labels, controller
/// ownerReference, the template's nodeSelector and tolerations, and required
/// affinity replaced by the `matchFields` term. `bound` sets `spec.nodeName`.
pub fn daemon_pod(ds: &DaemonSet, node: &str, hash: &str, bound: bool) -> Pod {
    let spec = ds.spec.as_ref().unwrap();
    let name = ds.metadata.name.as_deref().unwrap();
    let template_spec = serde_json::to_value(spec.template.spec.as_ref().unwrap()).unwrap();
    let mut pod_spec = template_spec.clone();
    pod_spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    if bound {
        pod_spec["nodeName"] = json!(node);
    }
    from(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{name}-{node}"), "namespace": "ns", "uid": format!("pod-{name}-{node}-{hash}"),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": name, "controller-revision-hash": hash, "pod-template-generation": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                 "uid": ds.metadata.uid.as_deref().unwrap(), "controller": true}]
        },
        "spec": pod_spec
    }))
}

/// The pod with `status` as the kubelet and the scheduler write it.
pub fn with_status(mut pod: Pod, status: Value) -> Pod {
    pod.status = Some(from(status));
    pod
}

/// The pod Running and Ready since 2026-01-01.
pub fn ready(pod: Pod) -> Pod {
    with_status(
        pod,
        json!({"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}),
    )
}

/// The ControllerRevision holding `ds`'s current template under `hash`.
pub fn revision(ds: &DaemonSet, hash: &str) -> ControllerRevision {
    let name = ds.metadata.name.as_deref().unwrap();
    let template = serde_json::to_value(&ds.spec.as_ref().unwrap().template).unwrap();
    from(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": 1,
        "metadata": {"name": format!("{name}-{hash}"), "namespace": "ns", "uid": format!("rev-{name}-{hash}"),
                     "labels": {"controller-revision-hash": hash},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                          "uid": ds.metadata.uid.as_deref().unwrap(), "controller": true}]},
        "data": {"spec": {"template": template}}
    }))
}

/// An API object as the exporter watches it: the tests build full k8s-openapi objects, and
/// the watchers decode Nodes and Pods into slim shapes, which keep only what the rules read.
pub trait Watched {
    type Shape: Indexed;
    fn watched(self) -> Self::Shape;
}

impl Watched for Node {
    type Shape = SlimNode;
    fn watched(self) -> SlimNode {
        self.into()
    }
}

impl Watched for Pod {
    type Shape = SlimPod;
    fn watched(self) -> SlimPod {
        self.into()
    }
}

impl Watched for DaemonSet {
    type Shape = DaemonSet;
    fn watched(self) -> DaemonSet {
        self
    }
}

impl Watched for ControllerRevision {
    type Shape = ControllerRevision;
    fn watched(self) -> ControllerRevision {
        self
    }
}

/// Apply a complete initial list of one resource.
pub fn list<K: Watched>(index: &mut Index, objects: Vec<K>) {
    index.relist(objects.into_iter().map(K::watched)).unwrap();
}

pub fn apply<K: Watched>(index: &mut Index, obj: K) {
    index.apply(Event::Apply(obj.watched())).unwrap();
}

pub fn delete<K: Watched>(index: &mut Index, obj: K) {
    index.apply(Event::Delete(obj.watched())).unwrap();
}

pub const NOW: i64 = 1_780_272_000;

/// An index synced with the given objects.
/// Its clock reads `NOW` (2026-06-01T00:00:00Z), after every object's creation.
pub fn cluster(
    nodes: Vec<Node>,
    daemonsets: Vec<DaemonSet>,
    revisions: Vec<ControllerRevision>,
    pods: Vec<Pod>,
) -> Index {
    let mut index = Index::default();
    index.set_now(NOW);
    list(&mut index, nodes);
    list(&mut index, daemonsets);
    list(&mut index, revisions);
    list(&mut index, pods);
    index
}

/// (pod, node, reason, key) for every misscheduled pod, sorted.
pub fn misscheduled(index: &Index) -> Vec<(String, String, String, String)> {
    let mut rows: Vec<_> = index
        .daemonsets()
        .iter()
        .flat_map(|ds| ds.misscheduled_pods())
        .map(|p| {
            (
                p.pod.id.name(),
                p.node.to_string(),
                p.classification.reason.as_str().to_owned(),
                p.classification.key.to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}
