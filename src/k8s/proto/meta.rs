//! Metadata on the protobuf wire, read as `slim::meta` reads it from JSON: what `ObjectMeta`
//! holds, and the labels into one buffer. A pod's owner references are read into its
//! controller's UID, and its labels and that UID once for each distinct set of bytes (every
//! pod of a DaemonSet's revision repeats them); a node's annotations down to those read, and
//! its managedFields into who owns its labels and taints.

use std::cell::RefCell;
use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use prost::Message;

use super::{ProtoError, non_empty};
use crate::k8s::slim::{FlatLabels, LabelAndTaintOwner, Memo, NODE_ANNOTATIONS_READ, owner_of_fields};

/// `ObjectMeta`'s fields that the exporter reads. The repeated ones stay as their bytes until
/// asked for: a pod's annotations and managedFields never are.
#[derive(Clone, PartialEq, Message)]
pub(super) struct Meta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(message, optional, tag = "8")]
    creation_timestamp: Option<WireTime>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<WireTime>,
    #[prost(int64, optional, tag = "10")]
    deletion_grace_period_seconds: Option<i64>,
    /// Each a map entry: `StringEntry`.
    #[prost(bytes = "bytes", repeated, tag = "11")]
    labels: Vec<Bytes>,
    /// Each a map entry: `StringEntry`.
    #[prost(bytes = "bytes", repeated, tag = "12")]
    annotations: Vec<Bytes>,
    /// Each an `OwnerReference`.
    #[prost(bytes = "bytes", repeated, tag = "13")]
    owner_references: Vec<Bytes>,
    /// Each a `ManagedFieldsEntry`.
    #[prost(bytes = "bytes", repeated, tag = "17")]
    managed_fields: Vec<Bytes>,
}

/// `metav1.Time`: whole seconds. Go writes no nanoseconds (its JSON carries none either),
/// and writes a zero time as an empty message, which JSON writes as null.
#[derive(Clone, Copy, PartialEq, Message)]
pub(super) struct WireTime {
    #[prost(int64, optional, tag = "1")]
    seconds: Option<i64>,
}

/// A `map<string, string>` entry.
#[derive(Clone, PartialEq, Message)]
struct StringEntry {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

/// Of an owner reference, what `GetControllerOf` reads.
#[derive(Clone, PartialEq, Message)]
struct WireOwnerReference {
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
}

thread_local! {
    static LABELS: Memo<[u8], FlatLabels> = Memo::default();
    static CONTROLLER_UID: Memo<[u8], Option<String>> = Memo::default();
    /// The bytes of a repeated field, as one memo key (`key_of`).
    static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A pod's metadata: what `ObjectMeta` holds of it, its labels, and its controller's UID.
pub(super) fn pod_meta(meta: Meta) -> Result<(ObjectMeta, FlatLabels, Option<String>), ProtoError> {
    let labels = read_once(&LABELS, &meta.labels, labels)?;
    let controller_uid = read_once(&CONTROLLER_UID, &meta.owner_references, |references| {
        for reference in references {
            let reference = WireOwnerReference::decode(reference.clone())?;
            if reference.controller == Some(true) {
                return Ok(Some(reference.uid.unwrap_or_default()));
            }
        }
        Ok(None)
    })?;
    Ok((common(meta)?, labels, controller_uid))
}

/// A node's metadata: what `ObjectMeta` holds of it, its labels, and who owns them and its
/// taints.
pub(super) fn node_meta(mut meta: Meta) -> Result<(ObjectMeta, FlatLabels, Vec<LabelAndTaintOwner>), ProtoError> {
    let labels = labels(&meta.labels)?;
    let mut owners = Vec::new();
    for entry in std::mem::take(&mut meta.managed_fields) {
        let entry = ManagedFieldsEntry::decode(entry)?;
        let (operation, subresource) = (entry.operation.unwrap_or_default(), entry.subresource.unwrap_or_default());
        let time = time(entry.time, "metadata.managedFields.time")?;
        let fields = entry.fields_v1.and_then(|f| f.raw);
        let owner = owner_of_fields(non_empty(entry.manager), &operation, &subresource, time, fields.as_deref())
            .map_err(|e| ProtoError::Field { field: "metadata.managedFields.fieldsV1", error: e.to_string() })?;
        owners.extend(owner);
    }
    // Present, if empty, where the node has any annotation, as from JSON.
    let annotations = if meta.annotations.is_empty() {
        None
    } else {
        let mut read = BTreeMap::new();
        for entry in std::mem::take(&mut meta.annotations) {
            let entry = StringEntry::decode(entry)?;
            let key = entry.key.unwrap_or_default();
            if NODE_ANNOTATIONS_READ.contains(&key.as_str()) {
                read.insert(key, entry.value.unwrap_or_default());
            }
        }
        Some(read)
    };
    let references = std::mem::take(&mut meta.owner_references).into_iter().map(|reference| {
        let reference = WireOwnerReference::decode(reference)?;
        Ok(OwnerReference {
            uid: reference.uid.unwrap_or_default(),
            controller: reference.controller,
            ..Default::default()
        })
    });
    let owner_references = references.collect::<Result<Vec<_>, ProtoError>>()?;
    let owner_references = (!owner_references.is_empty()).then_some(owner_references);
    Ok((ObjectMeta { annotations, owner_references, ..common(meta)? }, labels, owners))
}

/// Labels from their map entries.
fn labels(entries: &[Bytes]) -> Result<FlatLabels, ProtoError> {
    let pairs = entries.iter().map(|entry| StringEntry::decode(entry.clone())).collect::<Result<Vec<_>, _>>()?;
    let pairs = pairs.iter().map(|p| (p.key.as_deref().unwrap_or_default(), p.value.as_deref().unwrap_or_default()));
    Ok(pairs.collect::<FlatLabels>().into_key_order())
}

/// The fields both kinds keep in `ObjectMeta`.
fn common(meta: Meta) -> Result<ObjectMeta, ProtoError> {
    Ok(ObjectMeta {
        name: non_empty(meta.name),
        namespace: non_empty(meta.namespace),
        uid: non_empty(meta.uid),
        resource_version: non_empty(meta.resource_version),
        creation_timestamp: time(meta.creation_timestamp, "metadata.creationTimestamp")?,
        deletion_timestamp: time(meta.deletion_timestamp, "metadata.deletionTimestamp")?,
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        ..ObjectMeta::default()
    })
}

/// Of a managedFields entry, what `LabelAndTaintOwner` keeps.
#[derive(Clone, PartialEq, Message)]
struct ManagedFieldsEntry {
    #[prost(string, optional, tag = "1")]
    manager: Option<String>,
    #[prost(string, optional, tag = "2")]
    operation: Option<String>,
    #[prost(message, optional, tag = "4")]
    time: Option<WireTime>,
    #[prost(message, optional, tag = "7")]
    fields_v1: Option<FieldsV1>,
    #[prost(string, optional, tag = "8")]
    subresource: Option<String>,
}

/// `fieldsV1`: the same JSON on either wire.
#[derive(Clone, PartialEq, Message)]
struct FieldsV1 {
    #[prost(bytes = "bytes", optional, tag = "1")]
    raw: Option<Bytes>,
}

/// A time as the JSON wire gives it: `None` for the zero time.
pub(super) fn time(time: Option<WireTime>, field: &'static str) -> Result<Option<Time>, ProtoError> {
    let Some(seconds) = time.and_then(|t| t.seconds) else { return Ok(None) };
    let at = jiff::Timestamp::from_second(seconds).map_err(|e| ProtoError::Field { field, error: e.to_string() })?;
    Ok(Some(Time(at)))
}

/// What `read` makes of a repeated field's occurrences, from this thread's memo where the
/// same bytes were read before. What fails to read is not kept.
pub(super) fn read_once<T: Clone>(
    memo: &'static std::thread::LocalKey<Memo<[u8], T>>,
    parts: &[Bytes],
    read: impl FnOnce(&[Bytes]) -> Result<T, ProtoError>,
) -> Result<T, ProtoError> {
    KEY.with_borrow_mut(|key| {
        key_of(parts, key);
        memo.with(|memo| memo.get_or_read(key.as_slice(), |_| read(parts)))
    })
}

/// The occurrences of a repeated field as one key, each with its length before it, so that no
/// two lists of parts make the same key.
fn key_of(parts: &[Bytes], key: &mut Vec<u8>) {
    key.clear();
    for part in parts {
        prost::encoding::encode_varint(part.len() as u64, key);
        key.extend_from_slice(part);
    }
}
