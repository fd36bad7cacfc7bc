//! A node as the exporter reads it: metadata, labels, taints, and which field manager owns
//! each label and the taint list.

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::field_owners::{LabelAndTaintOwner, owner_of};
use super::labels::FlatLabels;
use super::meta::slim_node_meta;

/// A node: metadata, labels, taints, and who owns the labels and the taint list.
#[derive(Clone, Debug, Default, Deserialize, kube::Resource)]
#[resource(inherit = Node)]
#[serde(from = "WireNode")]
pub struct SlimNode {
    /// Name, resource version and the annotations something reads. The labels and
    /// managedFields are read into `labels` and `owners`: never here.
    pub metadata: ObjectMeta,
    /// A real node carries about thirty labels; as a map they cost about thirty
    /// allocations on every heartbeat, to build and to free. This costs two.
    pub labels: FlatLabels,
    /// The managedFields entries that own labels or the taints, each down to that.
    pub owners: Vec<LabelAndTaintOwner>,
    pub spec: Option<NodeTaintsSpec>,
}

/// A node as it is sent, its metadata split where `SlimNode` keeps the parts.
#[derive(Deserialize)]
struct WireNode {
    /// Read only to be checked (`super::core_v1`).
    #[serde(rename = "apiVersion", deserialize_with = "super::core_v1", default)]
    _api_version: (),
    #[serde(deserialize_with = "slim_node_meta", default)]
    metadata: (ObjectMeta, FlatLabels, Vec<LabelAndTaintOwner>),
    #[serde(default)]
    spec: Option<NodeTaintsSpec>,
}

impl From<WireNode> for SlimNode {
    fn from(wire: WireNode) -> Self {
        let (metadata, labels, owners) = wire.metadata;
        Self { metadata, labels, owners, spec: wire.spec }
    }
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
        let mut metadata = node.metadata;
        let labels = metadata.labels.take().as_ref().map(FlatLabels::from).unwrap_or_default();
        let owners = metadata.managed_fields.take().iter().flatten().filter_map(owner_of).collect();
        Self { metadata, labels, owners, spec: node.spec.map(|s| NodeTaintsSpec { taints: s.taints }) }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the watcher decodes from a node's JSON is what a full node converts to: its
    /// labels in one place, in key order, and null or absent labels as none.
    #[test]
    fn a_decoded_node_is_the_converted_one() {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": "9",
                "labels": {"topology.kubernetes.io/zone": "a", "kubernetes.io/os": "linux", "pool": ""}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}
        });
        let decoded: SlimNode = serde_json::from_value(node.clone()).unwrap();
        let converted = SlimNode::from(serde_json::from_value::<Node>(node).unwrap());
        for slim in [&decoded, &converted] {
            let labels: Vec<_> = slim.labels.iter().collect();
            assert_eq!(labels, [("kubernetes.io/os", "linux"), ("pool", ""), ("topology.kubernetes.io/zone", "a")]);
            assert_eq!(slim.metadata.labels, None, "labels live in one place");
            assert_eq!(slim.metadata.name.as_deref(), Some("n1"));
            assert_eq!(slim.taints().len(), 1);
        }
        for labels in [json!(null), json!({})] {
            let node: SlimNode = serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap();
            assert!(node.labels.is_empty());
        }
        let error = serde_json::from_value::<SlimNode>(json!({"metadata": {"labels": {"a": 1}}})).unwrap_err();
        assert!(error.to_string().starts_with("invalid type: integer `1`, expected a string"), "{error}");
    }
}
