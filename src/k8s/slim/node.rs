//! A node as the exporter reads it: metadata (with who owns its labels and taints) and taints.

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::meta::slim_node_meta;

/// A node: metadata (with who owns its labels and taints) plus its taints.
#[derive(Clone, Debug, Default, Deserialize, kube::Resource)]
#[resource(inherit = Node)]
pub struct SlimNode {
    /// Read only to be checked (`super::core_v1`).
    #[serde(rename = "apiVersion", deserialize_with = "super::core_v1", default)]
    pub api_version: (),
    #[serde(deserialize_with = "slim_node_meta", default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<NodeTaintsSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeTaintsSpec {
    pub taints: Option<Vec<Taint>>,
}

impl SlimNode {
    pub fn taints(&self) -> &[Taint] {
        self.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
    }
}

/// Full objects (tests, tools) convert to the watched shape.
impl From<Node> for SlimNode {
    fn from(node: Node) -> Self {
        Self { api_version: (), metadata: node.metadata, spec: node.spec.map(|s| NodeTaintsSpec { taints: s.taints }) }
    }
}
