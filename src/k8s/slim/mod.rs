//! The shapes the exporter watches: Pods and Nodes with only the fields
//! classification reads. serde skips everything else while parsing (containers,
//! a pod's status but its phase, Ready and PodScheduled conditions and waiting
//! containers, a pod's annotations and managedFields and most of a node's, owner
//! references but their UID, node images…), which is most
//! of each object's JSON, so lists decode several times faster and nothing large is
//! ever allocated.
//!
//! They are ordinary `kube::Resource`s: the watcher and the snapshot reader
//! decode straight into them. `meta` reads the metadata both share; `pod` and `node`
//! the rest of each, `status` what a pod's status says of it being available. A pod is
//! decoded on every status update, so its parts are read into forms that cost few
//! allocations: its labels into one buffer (`labels`), its affinity into the one node it
//! names (`affinity`), its conditions into the two availability reads; and the parts every
//! pod of a DaemonSet's revision repeats (labels, owner reference, tolerations) are read
//! once for each distinct text (`memo`). A node, decoded on
//! every heartbeat, likewise: its labels into one buffer, and its managedFields into who
//! owns which of them and its taints (`field_owners`, `managed_fields`).

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, Visitor};

mod affinity;
mod field_owners;
mod labels;
mod managed_fields;
mod memo;
mod meta;
mod node;
mod pod;
mod status;
mod str_list;

pub use self::affinity::AffinityTarget;
pub use self::field_owners::{LabelAndTaintOwner, LabelKeys, owner_of};
pub use self::labels::FlatLabels;
pub(in crate::k8s) use self::managed_fields::owner_of_fields;
pub(in crate::k8s) use self::memo::Memo;
pub(in crate::k8s) use self::meta::NODE_ANNOTATIONS_READ;
pub use self::node::{NodeTaintsSpec, SlimNode};
pub use self::pod::{PodParts, PodPlacement, PodToleration, SlimPod, Tolerations};
pub use self::status::{
    ConditionKind, Conditions, ContainerState, ContainerStatus, PodCondition, PodStatus, Terminated, Waiting,
    is_terminal_phase,
};

/// Pods and Nodes are core `v1`: an `apiVersion` that says otherwise (a number, an object,
/// another version) is a malformed object, not one to read as if it were right. Absent is
/// fine: the objects inside a list carry none when the list is typed.
fn core_v1<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
    let version = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
    if version == "v1" {
        Ok(())
    } else {
        Err(serde::de::Error::invalid_value(serde::de::Unexpected::Str(&version), &"\"v1\""))
    }
}

/// Reads an optional string straight into what `parse` makes of it, without
/// allocating; null and absent read as `T::default()`.
fn parsed_str<'de, D: Deserializer<'de>, T: Default>(deserializer: D, parse: fn(&str) -> T) -> Result<T, D::Error> {
    deserializer.deserialize_option(NullAsDefault(WithStr(parse)))
}

/// Wraps a visitor so that null reads as its value's default, as Go's decoder reads a
/// null map, list or string; anything else goes to the wrapped visitor. Pass it to
/// `deserialize_option`.
struct NullAsDefault<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for NullAsDefault<V>
where
    V::Value: Default,
{
    type Value = V::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        Ok(V::Value::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        Ok(V::Value::default())
    }
    // JSON says what it holds, so the wrapped visitor gets whatever is there; a kind it
    // does not take is its usual "invalid type" error.
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        deserializer.deserialize_any(self.0)
    }
}

/// A string handed to a closure as it is read (the scratch text of the parser, escaped
/// or not), never made a `String` of its own: a map key matched against the names wanted,
/// a label appended to a buffer, an enum parsed. The value is what the closure returns.
struct WithStr<F>(F);

impl<'de, T, F: FnOnce(&str) -> T> DeserializeSeed<'de> for WithStr<F> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, T, F: FnOnce(&str) -> T> Visitor<'de> for WithStr<F> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(v))
    }
}

/// A map key read as its position in a list of names (or `None`).
fn one_of(names: &'static [&'static str]) -> WithStr<impl FnOnce(&str) -> Option<usize>> {
    WithStr(move |key: &str| names.iter().position(|name| *name == key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_version_is_checked_not_assumed() {
        let pod = |version: &str| {
            serde_json::from_str::<SlimPod>(&format!(r#"{{"apiVersion":{version},"metadata":{{"name":"p"}}}}"#))
        };
        assert!(pod(r#""v1""#).is_ok());
        assert!(serde_json::from_str::<SlimNode>(r#"{"metadata":{"name":"n"}}"#).is_ok(), "absent is fine");
        for wrong in ["1", r#"{"x":1}"#, r#""v2""#, "null"] {
            let error = pod(wrong).unwrap_err().to_string();
            assert!(error.contains("expected"), "{wrong}: {error}");
        }
        let node = serde_json::from_str::<SlimNode>(r#"{"apiVersion":7,"metadata":{"name":"n"}}"#);
        assert!(node.unwrap_err().to_string().starts_with("invalid type: integer `7`"));
    }

    #[test]
    fn null_reads_as_the_default_and_a_wrong_kind_as_the_wrapped_visitors_error() {
        let read = |json: &str| parsed_str(&mut serde_json::Deserializer::from_str(json), str::len);
        assert_eq!(read("null").unwrap(), 0);
        assert_eq!(read(r#""four""#).unwrap(), 4);
        let error = read("[1]").unwrap_err().to_string();
        assert!(error.starts_with("invalid type: sequence, expected a string"), "{error}");
    }
}
