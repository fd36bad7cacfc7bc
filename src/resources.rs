//! The shapes the exporter watches: Pods and Nodes with only the fields
//! classification reads. serde skips everything else while parsing (containers,
//! status, managedFields, node images…), which is most of each object's JSON, so
//! lists decode several times faster and nothing large is ever allocated.
//!
//! They are ordinary `kube::Resource`s: the watcher and the snapshot reader
//! decode straight into them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Node, Pod, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Deserializer};

/// The metadata fields the exporter (and the watcher, for resourceVersion) uses.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
}

fn slim_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let m = SlimMeta::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        ..ObjectMeta::default()
    })
}

/// Where a pod (or a pod template) may run: the placement fields of a `PodSpec`.
pub trait PlacementSpec {
    fn node_name(&self) -> Option<&str>;
    fn node_selector(&self) -> Option<&BTreeMap<String, String>>;
    fn affinity(&self) -> Option<&Affinity>;
    fn tolerations(&self) -> Option<&[Toleration]>;
    fn host_network(&self) -> bool;
}

/// A daemon pod: metadata plus the placement part of its spec.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct DaemonPod {
    #[serde(deserialize_with = "slim_meta", default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<PodPlacement>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlacement {
    pub node_name: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub affinity: Option<Affinity>,
    pub tolerations: Option<Vec<Toleration>>,
    pub host_network: Option<bool>,
}

/// Both shapes name the fields alike, so one definition serves both.
macro_rules! placement_spec {
    ($($ty:ty),*) => {$(
        impl PlacementSpec for $ty {
            fn node_name(&self) -> Option<&str> {
                self.node_name.as_deref()
            }
            fn node_selector(&self) -> Option<&BTreeMap<String, String>> {
                self.node_selector.as_ref()
            }
            fn affinity(&self) -> Option<&Affinity> {
                self.affinity.as_ref()
            }
            fn tolerations(&self) -> Option<&[Toleration]> {
                self.tolerations.as_deref()
            }
            fn host_network(&self) -> bool {
                self.host_network.unwrap_or(false)
            }
        }
    )*};
}

placement_spec!(PodPlacement, PodSpec);

/// A node: metadata plus its taints.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeTaints {
    #[serde(deserialize_with = "slim_meta", default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<NodeTaintsSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeTaintsSpec {
    pub taints: Option<Vec<Taint>>,
}

impl NodeTaints {
    pub fn taints(&self) -> &[Taint] {
        self.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
    }
}

/// Full objects (tests, tools) convert to the watched shapes.
impl From<Pod> for DaemonPod {
    fn from(pod: Pod) -> Self {
        let spec = pod.spec.map(|s| PodPlacement {
            node_name: s.node_name,
            node_selector: s.node_selector,
            affinity: s.affinity,
            tolerations: s.tolerations,
            host_network: s.host_network,
        });
        Self { metadata: pod.metadata, spec }
    }
}

impl From<Node> for NodeTaints {
    fn from(node: Node) -> Self {
        Self { metadata: node.metadata, spec: node.spec.map(|s| NodeTaintsSpec { taints: s.taints }) }
    }
}

macro_rules! resource {
    ($ty:ty, $scope:ty, $kind:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("")
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("v1")
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(DaemonPod, NamespaceResourceScope, "Pod", "pods");
resource!(NodeTaints, ClusterResourceScope, "Node", "nodes");
