//! The metadata fields the exporter reads, for pods and nodes alike, with the kind-specific
//! ones (annotations, managedFields) skipped where nothing reads them. Labels are read into
//! one buffer (`FlatLabels`) for both kinds, and a pod's owner references into its
//! controller's UID (`slim_pod_meta`); of a node's annotations only the ones something
//! reads are kept (`NodeAnnotations`).

use std::collections::BTreeMap;
use std::thread::LocalKey;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{self, IgnoredAny};
use serde::{Deserialize, Deserializer};

use super::NullAsDefault;
use super::field_owners::LabelAndTaintOwner;
use super::labels::FlatLabels;
use super::managed_fields::label_and_taint_owners;
use super::memo::{ByText, Shared, TextMemo};
use super::one_of;
use crate::rules::admission::BYPASS_ANNOTATION;
use crate::rules::reason::{NFD_FEATURE_LABELS_ANNOTATION, NFD_TAINTS_ANNOTATION};

/// The metadata fields the exporter (and the watcher, for resourceVersion) uses.
/// Labels (`L`) and owner references (`O`) are read one way for pods, another for nodes;
/// `annotations` (`A`) and `managedFields` (`M`) only for nodes: a pod's are skipped.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound = "L: Default + de::DeserializeOwned, O: Default + de::DeserializeOwned, \
             A: Kept<BTreeMap<String, String>>, M: Default + de::DeserializeOwned"
)]
struct SlimMeta<L, O, A, M> {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    #[serde(default)]
    labels: L,
    #[serde(default)]
    annotations: A,
    #[serde(default)]
    owner_references: O,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    managed_fields: M,
}

impl<L, O, A: Kept<BTreeMap<String, String>>, M> SlimMeta<L, O, A, M> {
    /// The metadata, and the labels, owner references and field owners where `ObjectMeta`
    /// has no room for their form.
    fn split(self) -> (ObjectMeta, L, O, M) {
        let meta = ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            annotations: self.annotations.kept(),
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            ..ObjectMeta::default()
        };
        (meta, self.labels, self.owner_references, self.managed_fields)
    }
}

/// A metadata field that one kind reads (into `T`) and the other skips (`IgnoredAny`),
/// kept in `ObjectMeta`.
trait Kept<T>: Default + de::DeserializeOwned {
    fn kept(self) -> Option<T>;
}

impl<T> Kept<T> for IgnoredAny {
    fn kept(self) -> Option<T> {
        None
    }
}

/// The node annotations anything reads: NFD's lists of the labels and taints it manages
/// (`convert::node`) and the guard's bypass (`admission::bypass`). A node's other
/// annotations (CSI node IDs, CNI addresses, tools' bookkeeping) are skipped unallocated:
/// every heartbeat carries them.
pub(in crate::k8s) const NODE_ANNOTATIONS_READ: &[&str] =
    &[NFD_FEATURE_LABELS_ANNOTATION, NFD_TAINTS_ANNOTATION, BYPASS_ANNOTATION];

/// A node's annotations, down to [`NODE_ANNOTATIONS_READ`]; present (if empty) when the
/// node has any, as a full decode would read it.
#[derive(Default)]
struct NodeAnnotations(Option<BTreeMap<String, String>>);

impl<'de> Deserialize<'de> for NodeAnnotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Read;
        impl<'de> de::Visitor<'de> for Read {
            type Value = NodeAnnotations;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<NodeAnnotations, A::Error> {
                let mut read = BTreeMap::new();
                while let Some(key) = map.next_key_seed(one_of(NODE_ANNOTATIONS_READ))? {
                    match key {
                        Some(at) => {
                            read.insert(NODE_ANNOTATIONS_READ[at].to_owned(), map.next_value()?);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(NodeAnnotations(Some(read)))
            }
        }
        deserializer.deserialize_option(NullAsDefault(Read))
    }
}

impl Kept<BTreeMap<String, String>> for NodeAnnotations {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        self.0
    }
}

/// A node's label and taint owners (`managed_fields`).
#[derive(Default, Deserialize)]
#[serde(transparent)]
struct LabelAndTaintOwners(#[serde(deserialize_with = "label_and_taint_owners")] Vec<LabelAndTaintOwner>);

/// An owner reference as the exporter reads it; the rest (kind, name…) is never
/// allocated.
#[derive(Deserialize)]
struct ControllerReference {
    uid: String,
    controller: Option<bool>,
}

/// Owner references with what `GetControllerOf` reads of each: its UID and controller flag.
#[derive(Default, Deserialize)]
#[serde(transparent)]
struct ControllerReferences(#[serde(deserialize_with = "controller_references")] Option<Vec<OwnerReference>>);

fn controller_references<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<OwnerReference>>, D::Error> {
    let references = Option::<Vec<ControllerReference>>::deserialize(deserializer)?;
    Ok(references.map(|references| {
        references
            .into_iter()
            .map(|r| OwnerReference { uid: r.uid, controller: r.controller, ..OwnerReference::default() })
            .collect()
    }))
}

/// Of a pod's owner references, the controller's UID alone (`GetControllerOf`: the first
/// reference marked controller).
#[derive(Clone, Default)]
pub(super) struct ControllerUid(pub Option<String>);

impl ByText for ControllerUid {
    fn memo() -> &'static LocalKey<TextMemo<Self>> {
        thread_local!(static SEEN: TextMemo<ControllerUid> = TextMemo::default());
        &SEEN
    }
}

/// A pod's labels, the same for every pod of a DaemonSet's revision (a node's are its own).
impl ByText for FlatLabels {
    fn memo() -> &'static LocalKey<TextMemo<Self>> {
        thread_local!(static SEEN: TextMemo<FlatLabels> = TextMemo::default());
        &SEEN
    }
}

impl<'de> Deserialize<'de> for ControllerUid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let references = Option::<Vec<ControllerReference>>::deserialize(deserializer)?;
        let controller = references.into_iter().flatten().find(|r| r.controller == Some(true));
        Ok(Self(controller.map(|r| r.uid)))
    }
}

/// A pod's metadata: what `ObjectMeta` holds of it, and its labels and controller, each
/// read once for each distinct text (`memo`).
pub(super) fn slim_pod_meta<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(ObjectMeta, FlatLabels, ControllerUid), D::Error> {
    type PodMeta = SlimMeta<Shared<FlatLabels>, Shared<ControllerUid>, IgnoredAny, IgnoredAny>;
    let (meta, Shared(labels), Shared(controller), _) = PodMeta::deserialize(deserializer)?.split();
    Ok((meta, labels, controller))
}

/// A node's metadata: what `ObjectMeta` holds of it, its labels and who owns them and its taints.
pub(super) fn slim_node_meta<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(ObjectMeta, FlatLabels, Vec<LabelAndTaintOwner>), D::Error> {
    type NodeMeta = SlimMeta<FlatLabels, ControllerReferences, NodeAnnotations, LabelAndTaintOwners>;
    let (meta, labels, references, field_owners) = NodeMeta::deserialize(deserializer)?.split();
    Ok((ObjectMeta { owner_references: references.0, ..meta }, labels, field_owners.0))
}

#[cfg(test)]
mod tests {
    use super::super::SlimNode;
    use super::*;

    fn annotations(json: &str) -> Result<Option<BTreeMap<String, String>>, serde_json::Error> {
        let node = format!(r#"{{"metadata": {{"name": "n", "annotations": {json}}}}}"#);
        Ok(serde_json::from_str::<SlimNode>(&node)?.metadata.annotations)
    }

    #[test]
    fn a_node_keeps_only_the_annotations_something_reads() {
        let json = format!(
            r#"{{"csi.volume.kubernetes.io/nodeid": "{{\"ebs.csi.aws.com\":\"i-0abc\"}}", "{NFD_FEATURE_LABELS_ANNOTATION}": "cpu-model.vendor_id",
                "node.alpha.kubernetes.io/ttl": "0", "{BYPASS_ANNOTATION}": "INC-7 drain", "other": {{"odd": [1]}}}}"#
        );
        let kept = annotations(&json).unwrap().unwrap();
        let expected = [(NFD_FEATURE_LABELS_ANNOTATION, "cpu-model.vendor_id"), (BYPASS_ANNOTATION, "INC-7 drain")];
        assert_eq!(kept, expected.map(|(k, v)| (k.to_owned(), v.to_owned())).into());
        // Present but empty stays present, as a full decode has it; null reads as absent.
        assert_eq!(annotations(r#"{"x": "y"}"#).unwrap(), Some(BTreeMap::new()));
        assert_eq!(annotations("null").unwrap(), None);
        // A read annotation that is not a string is the error a full decode gives.
        let error = annotations(&format!(r#"{{"{NFD_TAINTS_ANNOTATION}": 3}}"#)).unwrap_err().to_string();
        assert!(error.starts_with("invalid type: integer `3`, expected a string"), "{error}");
        assert!(annotations("[]").is_err());
    }
}
