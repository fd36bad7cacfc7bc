//! A node's `metadata.managedFields` as it is sent, read for one question: which field
//! manager owns each label and the taint list (`field_owners`). Everything else in an entry
//! (kubelet's status fields are most of a node's JSON) is skipped while parsing.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::field_owners::{LabelAndTaintOwner, LabelKeys};
use super::{WithStr, one_of, parsed_str};

/// `managedFields`, keeping only the entries that own labels or taints, each down to that.
/// Null reads as none.
pub(super) fn label_and_taint_owners<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<LabelAndTaintOwner>, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<LabelAndTaintOwner>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of managedFields entries")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut owners = Vec::new();
            while let Some(entry) = seq.next_element::<Entry>()? {
                owners.extend(entry.into_owner());
            }
            Ok(owners)
        }
    }
    deserializer.deserialize_any(Entries)
}

/// An entry as it is sent, read down to what `LabelAndTaintOwner` keeps.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    manager: Option<String>,
    /// Whether it is `Update` (not `Apply`).
    #[serde(default, deserialize_with = "is_update")]
    operation: bool,
    /// Whether it names one (`status`): an edit of the node itself writes no such entry.
    #[serde(default, deserialize_with = "is_set")]
    subresource: bool,
    time: Option<Time>,
    #[serde(rename = "fieldsV1", default)]
    fields: Owned,
}

fn is_update<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, |operation| operation == "Update")
}

fn is_set<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, |subresource| !subresource.is_empty())
}

impl Entry {
    fn into_owner(self) -> Option<LabelAndTaintOwner> {
        let owner = LabelAndTaintOwner {
            manager: self.manager.unwrap_or_default(),
            update: self.operation && !self.subresource,
            time: self.time.as_ref().map_or(0, |t| t.0.as_second()),
            labels: self.fields.labels,
            taints: self.fields.taints,
        };
        owner.owns_any().then_some(owner)
    }
}

/// One entry as the protobuf wire sends it: its fields, with `fieldsV1` still the JSON it is
/// on either wire. `None` where it owns no label and not the taints.
pub(in crate::k8s) fn owner_of_fields(
    manager: Option<String>,
    operation: &str,
    subresource: &str,
    time: Option<Time>,
    fields_v1: Option<&[u8]>,
) -> Result<Option<LabelAndTaintOwner>, serde_json::Error> {
    let fields = match fields_v1 {
        Some(json) => serde_json::from_slice(json)?,
        None => Owned::default(),
    };
    let entry = Entry { manager, operation: operation == "Update", subresource: !subresource.is_empty(), time, fields };
    Ok(entry.into_owner())
}

/// `fieldsV1`, read down to `f:metadata.f:labels` keys and `f:spec.f:taints`.
#[derive(Default)]
struct Owned {
    labels: LabelKeys,
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
                while let Some(key) = map.next_key_seed(one_of(&["f:metadata", "f:spec"]))? {
                    match key {
                        Some(0) => owned.labels = map.next_value::<Sub<LabelsOnly>>()?.0.0,
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

/// The keys of a `f:labels` object that name a label (`f:…`), read without their `f:`;
/// `.` (the map itself) dropped.
#[derive(Default)]
struct LabelsOnly(LabelKeys);

impl<'de> Deserialize<'de> for LabelsOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = LabelsOnly;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LabelsOnly, A::Error> {
                let mut keys = LabelKeys::default();
                let mut push_label = |field: &str| field.strip_prefix("f:").is_none_or(|key| keys.push(key));
                while let Some(fits) = map.next_key_seed(WithStr(&mut push_label))? {
                    if !fits {
                        return Err(de::Error::custom("the label fields are longer than 4 GiB"));
                    }
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(LabelsOnly(keys.into_ordered_set()))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// One member of an object, picked by a `Pick`, the rest skipped.
struct Sub<P: Pick>(P);

trait Pick: Default {
    const FIELD: &'static str;
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error>;
}

impl Pick for LabelsOnly {
    const FIELD: &'static str = "f:labels";
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        map.next_value()
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
                while let Some(key) = map.next_key_seed(one_of(&[P::FIELD]))? {
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

#[cfg(test)]
mod tests {
    use super::super::{SlimNode, owner_of};
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

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

    fn owner(manager: &str, time: &str, labels: &[&str], taints: bool) -> LabelAndTaintOwner {
        let time = time.parse::<jiff::Timestamp>().unwrap().as_second();
        let labels = labels.iter().copied().collect();
        LabelAndTaintOwner { manager: manager.into(), update: true, time, labels, taints }
    }

    #[test]
    fn keeps_only_label_and_taint_owners() {
        let node: SlimNode = serde_json::from_str(NODE).unwrap();
        // Neither status entry, nor the one with no fields, is kept; nor is anything but
        // the label keys and the taints of the others.
        assert_eq!(
            node.owners,
            [
                owner("kubelet", "2026-11-22T10:00:00Z", &["pool"], false),
                owner("nfd-master", "2026-11-22T10:01:00Z", &["gpu"], false),
                owner("kubectl-taint", "2026-11-22T10:02:00Z", &[], true),
            ]
        );
        assert_eq!(node.metadata.managed_fields, None, "the owners live in one place");
    }

    #[test]
    fn a_full_object_reads_the_same() {
        let full: k8s_openapi::api::core::v1::Node = serde_json::from_str(NODE).unwrap();
        let slim: SlimNode = serde_json::from_str(NODE).unwrap();
        let from_full: Vec<_> = full.metadata.managed_fields.iter().flatten().filter_map(owner_of).collect();
        assert_eq!(from_full, slim.owners);
        assert_eq!(SlimNode::from(full).owners, slim.owners);
    }

    /// Only an Update of the node itself is the entry an edit by its manager writes into.
    #[test]
    fn an_update_is_one_of_the_node_itself() {
        let read = |entry: &str| {
            let json = format!(
                r#"{{"metadata": {{"managedFields": [{{"manager": "m", {entry}
                  "fieldsV1": {{"f:metadata": {{"f:labels": {{"f:a\u002fb": {{}}, "f:c": {{}}}}}}}}}}]}}}}"#
            );
            let node: SlimNode = serde_json::from_str(&json).unwrap();
            let [owner] = &node.owners[..] else { panic!("{:?}", node.owners) };
            assert_eq!(owner.labels.iter().collect::<Vec<_>>(), ["a/b", "c"], "read unescaped, without f:");
            owner.is_update_by("m")
        };
        assert!(read(r#""operation": "Update","#));
        assert!(read(r#""operation": "Update", "subresource": "","#));
        assert!(!read(r#""operation": "Update", "subresource": "status","#));
        assert!(!read(r#""operation": "Apply","#));
        assert!(!read(""));
    }

    /// Out of order or repeated, the keys read as a full object's map of them reads them.
    #[test]
    fn keys_out_of_order_read_as_a_full_object_reads_them() {
        let entry = r#"{"manager": "m", "fieldsV1": {"f:metadata": {"f:labels": {"f:z": {}, "f:a": {}, "f:z": {}}}}}"#;
        let full: ManagedFieldsEntry = serde_json::from_str(entry).unwrap();
        let json = format!(r#"{{"metadata": {{"managedFields": [{entry}]}}}}"#);
        let slim: SlimNode = serde_json::from_str(&json).unwrap();
        assert_eq!(slim.owners, owner_of(&full).into_iter().collect::<Vec<_>>());
        assert_eq!(slim.owners[0].labels.iter().collect::<Vec<_>>(), ["a", "z"]);
    }

    #[test]
    fn malformed_fields_are_a_decode_error_not_a_panic() {
        for bad in [
            r#"{"fieldsV1": {"f:metadata": {"f:labels": 3}}}"#,
            r#"{"fieldsV1": {"f:metadata": 3}}"#,
            r#"{"fieldsV1": 3}"#,
            r#"{"operation": 3, "fieldsV1": {"f:spec": {"f:taints": {}}}}"#,
        ] {
            let json = format!(r#"{{"metadata": {{"name": "n", "managedFields": [{bad}]}}}}"#);
            assert!(serde_json::from_str::<SlimNode>(&json).is_err(), "{bad}");
        }
    }
}
