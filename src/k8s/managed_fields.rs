//! A node's `metadata.managedFields`, read for one question: which field manager owns
//! each label and the taint list. Everything else in an entry (kubelet's status fields
//! are most of a node's JSON) is skipped while parsing, so nothing large is allocated.
//!
//! The decoded entries are ordinary `ManagedFieldsEntry`s whose `fieldsV1` holds only
//! `f:metadata.f:labels` and `f:spec.f:taints`, so a full object from a test or a tool
//! and a slim one convert the same way (`owned_fields`).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// What one manager owns of a node's labels and taints.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OwnedFields<'a> {
    pub manager: &'a str,
    /// `time` of the entry's last write, in unix seconds (0 when absent).
    pub time: i64,
    pub labels: Vec<&'a str>,
    pub taints: bool,
}

/// The label keys and taint ownership in an entry's `fieldsV1`; `None` if it owns neither.
pub fn owned_fields(entry: &ManagedFieldsEntry) -> Option<OwnedFields<'_>> {
    let fields = &entry.fields_v1.as_ref()?.0;
    let labels: Vec<&str> = fields
        .get("f:metadata")
        .and_then(|m| m.get("f:labels"))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|labels| labels.keys())
        .filter_map(|k| k.strip_prefix("f:"))
        .collect();
    let taints = fields.get("f:spec").and_then(|s| s.get("f:taints")).is_some();
    if labels.is_empty() && !taints {
        return None;
    }
    Some(OwnedFields {
        manager: entry.manager.as_deref().unwrap_or_default(),
        time: entry.time.as_ref().map_or(0, |t| t.0.as_second()),
        labels,
        taints,
    })
}

/// `managedFields`, keeping only the entries that own labels or taints, pruned to those.
pub fn label_and_taint_owners<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<ManagedFieldsEntry>>, D::Error> {
    let entries: Option<Vec<Entry>> = Option::deserialize(deserializer)?;
    Ok(entries.map(|entries| entries.into_iter().filter_map(Entry::into_pruned).collect()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    manager: Option<String>,
    operation: Option<String>,
    time: Option<Time>,
    #[serde(rename = "fieldsV1", default)]
    fields: Owned,
}

impl Entry {
    fn into_pruned(self) -> Option<ManagedFieldsEntry> {
        let Owned { labels, taints } = self.fields;
        if labels.is_empty() && !taints {
            return None;
        }
        let mut fields = Map::new();
        if !labels.is_empty() {
            let labels = labels.into_iter().map(|k| (k, Value::Object(Map::new()))).collect();
            fields.insert(
                "f:metadata".into(),
                Value::Object(Map::from_iter([("f:labels".into(), Value::Object(labels))])),
            );
        }
        if taints {
            fields.insert(
                "f:spec".into(),
                Value::Object(Map::from_iter([("f:taints".into(), Value::Object(Map::new()))])),
            );
        }
        Some(ManagedFieldsEntry {
            manager: self.manager,
            operation: self.operation,
            time: self.time,
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(Value::Object(fields))),
            ..ManagedFieldsEntry::default()
        })
    }
}

/// `fieldsV1`, read down to `f:metadata.f:labels` keys and `f:spec.f:taints`.
#[derive(Default)]
struct Owned {
    /// The label fields as written, `f:` prefix and all: `into_pruned` writes them back.
    labels: Vec<String>,
    taints: bool,
}

impl<'de> Deserialize<'de> for Owned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Owned;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fieldsV1 object")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Owned, E> {
                Ok(Owned::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Owned, A::Error> {
                let mut owned = Owned::default();
                while let Some(key) = map.next_key_seed(OneOf(&["f:metadata", "f:spec"]))? {
                    match key {
                        Some(0) => {
                            owned.labels = map.next_value::<Sub<LabelsOnly>>()?.0.0.map_or_else(Vec::new, |k| k.0)
                        }
                        Some(_) => owned.taints |= map.next_value::<Sub<TaintsOnly>>()?.0.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(owned)
            }
        }
        deserializer.deserialize_any(Top)
    }
}

/// The keys of a `f:labels` object that name a label (`f:…`); `.` (the map itself) dropped.
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    if key.starts_with("f:") {
                        keys.push(key);
                    }
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// One member of an object, picked by a `Pick`, the rest skipped.
struct Sub<P: Pick>(P);

trait Pick: Default {
    const FIELD: &'static str;
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error>;
}

#[derive(Default)]
struct LabelsOnly(Option<Keys>);

impl Pick for LabelsOnly {
    const FIELD: &'static str = "f:labels";
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        Ok(Self(Some(map.next_value()?)))
    }
}

#[derive(Default)]
struct TaintsOnly(bool);

impl Pick for TaintsOnly {
    const FIELD: &'static str = "f:taints";
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        map.next_value::<IgnoredAny>()?;
        Ok(Self(true))
    }
}

impl<'de, P: Pick> Deserialize<'de> for Sub<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<P>(std::marker::PhantomData<P>);
        impl<'de, P: Pick> Visitor<'de> for V<P> {
            type Value = Sub<P>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fieldsV1 object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sub<P>, A::Error> {
                let mut picked = P::default();
                while let Some(key) = map.next_key_seed(OneOf(&[P::FIELD]))? {
                    if key.is_some() {
                        picked = P::read(&mut map)?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Sub(picked))
            }
        }
        deserializer.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A map key read as its position in a list of names (or `None`), without allocating.
pub(crate) struct OneOf(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for OneOf {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for OneOf {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|name| *name == v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::slim::SlimNode;

    /// A node as the API server sends it, kubelet status entry and all.
    const NODE: &str = r#"{"metadata": {"name": "n1", "labels": {"pool": "a", "gpu": "yes"},
      "managedFields": [
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-22T10:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:x": {}}, "f:labels": {".": {}, "f:pool": {}}},
         "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}, "f:images": {}}}},
        {"manager": "kubelet", "operation": "Update", "subresource": "status", "time": "2026-11-22T10:05:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}}}}},
        {"manager": "nfd-master", "operation": "Update", "time": "2026-11-22T10:01:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}}},
        {"manager": "kubectl-taint", "operation": "Update", "time": "2026-11-22T10:02:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:taints": {}}}},
        {"manager": "odd", "operation": "Update", "fieldsV1": null}
      ]}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}"#;

    fn owners(node: &SlimNode) -> Vec<OwnedFields<'_>> {
        node.metadata.managed_fields.iter().flatten().filter_map(owned_fields).collect()
    }

    #[test]
    fn keeps_only_label_and_taint_owners() {
        let node: SlimNode = serde_json::from_str(NODE).unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap().as_second();
        assert_eq!(
            owners(&node),
            [
                OwnedFields {
                    manager: "kubelet",
                    time: at("2026-11-22T10:00:00Z"),
                    labels: vec!["pool"],
                    taints: false
                },
                OwnedFields {
                    manager: "nfd-master",
                    time: at("2026-11-22T10:01:00Z"),
                    labels: vec!["gpu"],
                    taints: false
                },
                OwnedFields {
                    manager: "kubectl-taint",
                    time: at("2026-11-22T10:02:00Z"),
                    labels: vec![],
                    taints: true
                },
            ]
        );
        // Nothing of the status entries survives decoding.
        let kept = serde_json::to_string(&node.metadata.managed_fields).unwrap();
        assert!(!kept.contains("status") && !kept.contains("annotations"), "{kept}");
    }

    #[test]
    fn a_full_object_reads_the_same() {
        let full: k8s_openapi::api::core::v1::Node = serde_json::from_str(NODE).unwrap();
        let slim: SlimNode = serde_json::from_str(NODE).unwrap();
        let from_full: Vec<_> = full.metadata.managed_fields.iter().flatten().filter_map(owned_fields).collect();
        assert_eq!(from_full, owners(&slim));
    }

    #[test]
    fn malformed_fields_are_a_decode_error_not_a_panic() {
        for bad in [
            r#"{"fieldsV1": {"f:metadata": {"f:labels": 3}}}"#,
            r#"{"fieldsV1": {"f:metadata": 3}}"#,
            r#"{"fieldsV1": 3}"#,
        ] {
            let json = format!(r#"{{"metadata": {{"name": "n", "managedFields": [{bad}]}}}}"#);
            assert!(serde_json::from_str::<SlimNode>(&json).is_err(), "{bad}");
        }
    }
}
