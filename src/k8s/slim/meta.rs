//! The metadata fields the exporter reads, for pods and nodes alike, with the kind-specific
//! ones (annotations, managedFields) skipped where nothing reads them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use serde::de::{self, IgnoredAny};
use serde::{Deserialize, Deserializer};

use crate::k8s::managed_fields::label_and_taint_owners;

/// The metadata fields the exporter (and the watcher, for resourceVersion) uses.
/// `annotations` (`A`) and `managedFields` (`M`) only for nodes: a pod's are skipped.
/// Of an owner reference only what `GetControllerOf` reads: its UID and controller flag.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "A: Kept<BTreeMap<String, String>>, M: Kept<Vec<ManagedFieldsEntry>>")]
struct SlimMeta<A, M> {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: A,
    #[serde(default, deserialize_with = "controller_references")]
    owner_references: Option<Vec<OwnerReference>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    managed_fields: M,
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

fn controller_references<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<OwnerReference>>, D::Error> {
    let references = Option::<Vec<ControllerReference>>::deserialize(deserializer)?;
    Ok(references.map(|references| {
        references
            .into_iter()
            .map(|r| OwnerReference { uid: r.uid, controller: r.controller, ..OwnerReference::default() })
            .collect()
    }))
}

pub(super) fn slim_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    slim_meta_with::<D, IgnoredAny, IgnoredAny>(deserializer)
}

pub(super) fn slim_node_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    slim_meta_with::<D, Option<BTreeMap<String, String>>, LabelAndTaintOwners>(deserializer)
}

fn slim_meta_with<'de, D, A, M>(deserializer: D) -> Result<ObjectMeta, D::Error>
where
    D: Deserializer<'de>,
    A: Kept<BTreeMap<String, String>>,
    M: Kept<Vec<ManagedFieldsEntry>>,
{
    let m = SlimMeta::<A, M>::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        annotations: m.annotations.kept(),
        owner_references: m.owner_references,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        managed_fields: m.managed_fields.kept(),
        ..ObjectMeta::default()
    })
}
