//! The metadata fields the exporter reads, for pods and nodes alike, with the kind-specific
//! ones (annotations, managedFields) skipped where nothing reads them. A pod's labels and
//! owner references are read into their own compact forms (`slim_pod_meta`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use serde::de::{self, IgnoredAny};
use serde::{Deserialize, Deserializer};

use super::labels::FlatLabels;
use crate::k8s::managed_fields::label_and_taint_owners;

/// The metadata fields the exporter (and the watcher, for resourceVersion) uses.
/// Labels (`L`) and owner references (`O`) are read one way for pods, another for nodes;
/// `annotations` (`A`) and `managedFields` (`M`) only for nodes: a pod's are skipped.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound = "L: Default + de::DeserializeOwned, O: Default + de::DeserializeOwned, \
             A: Kept<BTreeMap<String, String>>, M: Kept<Vec<ManagedFieldsEntry>>"
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

impl<L, O, A: Kept<BTreeMap<String, String>>, M: Kept<Vec<ManagedFieldsEntry>>> SlimMeta<L, O, A, M> {
    /// The metadata, and the labels and owners where `ObjectMeta` has no room for their form.
    fn split(self) -> (ObjectMeta, L, O) {
        let meta = ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            annotations: self.annotations.kept(),
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            managed_fields: self.managed_fields.kept(),
            ..ObjectMeta::default()
        };
        (meta, self.labels, self.owner_references)
    }
}

/// A metadata field that one kind reads (into `T`) and the other skips (`IgnoredAny`).
trait Kept<T>: Default + de::DeserializeOwned {
    fn kept(self) -> Option<T>;
}

impl<T> Kept<T> for IgnoredAny {
    fn kept(self) -> Option<T> {
        None
    }
}

impl Kept<BTreeMap<String, String>> for Option<BTreeMap<String, String>> {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        self
    }
}

/// A node's label and taint owners (`managed_fields`).
#[derive(Default, Deserialize)]
#[serde(transparent)]
struct LabelAndTaintOwners(#[serde(deserialize_with = "label_and_taint_owners")] Option<Vec<ManagedFieldsEntry>>);

impl Kept<Vec<ManagedFieldsEntry>> for LabelAndTaintOwners {
    fn kept(self) -> Option<Vec<ManagedFieldsEntry>> {
        self.0
    }
}

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
#[derive(Default)]
pub(super) struct ControllerUid(pub Option<String>);

impl<'de> Deserialize<'de> for ControllerUid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let references = Option::<Vec<ControllerReference>>::deserialize(deserializer)?;
        let controller = references.into_iter().flatten().find(|r| r.controller == Some(true));
        Ok(Self(controller.map(|r| r.uid)))
    }
}

/// A pod's metadata: what `ObjectMeta` holds of it, and its labels and controller.
pub(super) fn slim_pod_meta<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(ObjectMeta, FlatLabels, ControllerUid), D::Error> {
    Ok(SlimMeta::<FlatLabels, ControllerUid, IgnoredAny, IgnoredAny>::deserialize(deserializer)?.split())
}

pub(super) fn slim_node_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    type NodeMeta = SlimMeta<
        Option<BTreeMap<String, String>>,
        ControllerReferences,
        Option<BTreeMap<String, String>>,
        LabelAndTaintOwners,
    >;
    let (meta, labels, owners) = NodeMeta::deserialize(deserializer)?.split();
    Ok(ObjectMeta { labels, owner_references: owners.0, ..meta })
}
