//! A node and a list of nodes on the protobuf wire, read into `SlimNode` as the JSON wire
//! is: the metadata and the taints. The node's status, most of its bytes, is stepped over.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Taint;
use kube::api::ObjectList;
use prost::Message;

use super::list::{WireListMeta, object_list};
use super::meta::{Meta, WireTime, node_meta, time};
use super::{ProtoError, non_empty};
use crate::k8s::slim::{NodeTaintsSpec, SlimNode};

#[derive(Clone, PartialEq, Message)]
struct NodeList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<WireListMeta>,
    #[prost(message, repeated, tag = "2")]
    items: Vec<Node>,
}

#[derive(Clone, PartialEq, Message)]
struct Node {
    #[prost(message, optional, tag = "1")]
    metadata: Option<Meta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NodeSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeSpec {
    #[prost(message, repeated, tag = "5")]
    taints: Vec<WireTaint>,
}

#[derive(Clone, PartialEq, Message)]
struct WireTaint {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
    #[prost(string, optional, tag = "3")]
    effect: Option<String>,
    #[prost(message, optional, tag = "4")]
    time_added: Option<WireTime>,
}

/// A list page of nodes, as its `raw` bytes inside the wrapper (`super::unwrap`).
pub fn node_list(raw: Bytes) -> Result<ObjectList<SlimNode>, ProtoError> {
    let list = NodeList::decode(raw)?;
    let items = list.items.into_iter().map(slim_node).collect::<Result<_, _>>()?;
    Ok(object_list("NodeList", list.metadata, items))
}

/// One node, as the `raw` bytes of its wrapper (a watch event's object).
pub fn node(raw: Bytes) -> Result<SlimNode, ProtoError> {
    slim_node(Node::decode(raw)?)
}

fn slim_node(node: Node) -> Result<SlimNode, ProtoError> {
    let (metadata, labels, owners) = node_meta(node.metadata.unwrap_or_default())?;
    let spec = match node.spec {
        None => None,
        Some(spec) => {
            let taints = spec.taints.into_iter().map(|taint| {
                Ok(Taint {
                    key: taint.key.unwrap_or_default(),
                    value: non_empty(taint.value),
                    effect: taint.effect.unwrap_or_default(),
                    time_added: time(taint.time_added, "spec.taints.timeAdded")?,
                })
            });
            let taints = taints.collect::<Result<Vec<_>, ProtoError>>()?;
            Some(NodeTaintsSpec { taints: (!taints.is_empty()).then_some(taints) })
        }
    };
    Ok(SlimNode { metadata, labels, owners, spec })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::proto::unwrap;

    /// The same nodes, listed from the lab's 1.37 API server in each encoding: KWOK's nodes,
    /// labelled, tainted and annotated by kubectl (`tests/fixtures/proto/fetch.sh`).
    const JSON: &[u8] = include_bytes!("../../../tests/fixtures/proto/nodes.json");
    const PROTOBUF: &[u8] = include_bytes!("../../../tests/fixtures/proto/nodes.pb");

    #[test]
    fn a_real_node_list_reads_the_same_from_either_wire() {
        let json: ObjectList<SlimNode> = serde_json::from_slice(JSON).unwrap();
        let protobuf = node_list(unwrap(Bytes::from_static(PROTOBUF), "NodeList").unwrap()).unwrap();
        assert_eq!(protobuf.metadata, json.metadata);
        assert_eq!(protobuf.items.len(), 3, "every node of the fixture");
        for (json, protobuf) in json.items.iter().zip(&protobuf.items) {
            assert_eq!(format!("{protobuf:#?}"), format!("{json:#?}"));
        }
        // The fixture has in it what the comparison must cover.
        let nodes = &protobuf.items;
        assert!(nodes.iter().any(|n| n.taints().len() == 2 && n.taints().iter().any(|t| t.value.is_some())));
        assert!(nodes.iter().any(|n| n.metadata.annotations.as_ref().is_some_and(|a| a.len() == 2)));
        let owns = |manager: &str| nodes.iter().flat_map(|n| &n.owners).any(|o| o.manager == manager);
        assert!(owns("kubectl-label") && owns("kubectl-taint"), "{:?}", nodes[0].owners);
        assert!(nodes.iter().all(|n| n.labels.get("kubernetes.io/hostname").is_some()));
    }
}
