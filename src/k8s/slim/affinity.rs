//! Of a daemon pod's affinity, the one thing the exporter reads: the node its required terms
//! name. The controller writes `matchFields: metadata.name In [node]` into every pod it
//! makes (`GetTargetNodeName` reads it back); a pod's other constraints are read from its
//! DaemonSet revision. Read as nested vectors, that one name cost four allocations per pod;
//! here it costs one, and nothing is kept of the terms but the name.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::Affinity;
use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{NullAsDefault, parsed_str};
use crate::rules::eligibility::NODE_NAME_FIELD;

/// `GetTargetNodeName`'s fallback: the value of the first `metadata.name In` requirement of
/// the required node terms' `matchFields`, if it has exactly one value (else the controller
/// finds no target, as for a pod with no such requirement).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AffinityTarget(pub Option<String>);

impl<'de> Deserialize<'de> for AffinityTarget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let affinity = Option::<WireAffinity>::deserialize(deserializer)?;
        let required = affinity.and_then(|a| a.node_affinity).and_then(|n| n.required);
        let first = required.and_then(|r| r.node_selector_terms).and_then(|t| t.0).and_then(|t| t.match_fields);
        Ok(Self(first.and_then(|f| f.0).and_then(|r| r.values.0)))
    }
}

impl From<&Affinity> for AffinityTarget {
    fn from(affinity: &Affinity) -> Self {
        let required = affinity
            .node_affinity
            .as_ref()
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        let terms = required.into_iter().flat_map(|r| &r.node_selector_terms);
        let mut fields = terms.flat_map(|t| t.match_fields.iter().flatten());
        let first = fields.find(|f| f.key == NODE_NAME_FIELD && f.operator == "In");
        Self(first.and_then(|f| match f.values.as_deref() {
            Some([only]) => Some(only.clone()),
            _ => None,
        }))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAffinity {
    node_affinity: Option<WireNodeAffinity>,
}

#[derive(Deserialize)]
struct WireNodeAffinity {
    #[serde(rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    required: Option<WireNodeSelector>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeSelector {
    /// Null reads as none, as Go's decoder reads it.
    node_selector_terms: Option<First<WireTerm>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTerm {
    match_fields: Option<First<NodeNameRequirement>>,
}

/// A `matchFields` requirement, kept only if it is `metadata.name In`.
#[derive(Deserialize)]
struct WireRequirement {
    #[serde(default, deserialize_with = "is_node_name_field")]
    key: bool,
    #[serde(default, deserialize_with = "is_in")]
    operator: bool,
    #[serde(default)]
    values: OneValue,
}

/// A `metadata.name In` requirement.
struct NodeNameRequirement {
    values: OneValue,
}

/// What a list element must be to be the one `First` keeps.
trait Found: Sized {
    type Wire: for<'de> Deserialize<'de>;
    fn found(wire: Self::Wire) -> Option<Self>;
}

impl Found for NodeNameRequirement {
    type Wire = WireRequirement;
    fn found(wire: WireRequirement) -> Option<Self> {
        (wire.key && wire.operator).then_some(Self { values: wire.values })
    }
}

/// A term counts once one of its `matchFields` is the requirement.
impl Found for WireTerm {
    type Wire = WireTerm;
    fn found(wire: WireTerm) -> Option<Self> {
        wire.match_fields.as_ref().is_some_and(|f| f.0.is_some()).then_some(wire)
    }
}

/// The first element of a list that is `T`; the rest are read, as the whole list was before,
/// only to be checked.
struct First<T>(Option<T>);

impl<'de, T: Found> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Elements<T>(PhantomData<T>);
        impl<'de, T: Found> Visitor<'de> for Elements<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let mut first = None;
                while let Some(element) = seq.next_element::<T::Wire>()? {
                    if first.is_none() {
                        first = T::found(element);
                    }
                }
                Ok(First(first))
            }
        }
        deserializer.deserialize_seq(Elements(PhantomData))
    }
}

/// A requirement's values: the value when there is exactly one.
#[derive(Default)]
struct OneValue(Option<String>);

impl<'de> Deserialize<'de> for OneValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Values;
        impl<'de> Visitor<'de> for Values {
            type Value = OneValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of strings")
            }
            // No list is built: the one value is kept, any others only checked.
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneValue, A::Error> {
                let first = seq.next_element::<String>()?;
                let mut more = false;
                while seq.next_element::<IgnoredString>()?.is_some() {
                    more = true;
                }
                Ok(OneValue(first.filter(|_| !more)))
            }
        }
        deserializer.deserialize_option(NullAsDefault(Values))
    }
}

/// A string read only to be checked.
struct IgnoredString;

impl<'de> Deserialize<'de> for IgnoredString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parsed_str(deserializer, |_| ()).map(|()| Self)
    }
}

fn is_node_name_field<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, |s| s == NODE_NAME_FIELD)
}

fn is_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, |s| s == "In")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn target(affinity: serde_json::Value) -> Option<String> {
        let read: AffinityTarget = serde_json::from_value(affinity.clone()).unwrap();
        // The full object, converted, says the same.
        if let Ok(full) = serde_json::from_value::<Affinity>(affinity) {
            assert_eq!(AffinityTarget::from(&full), read);
        }
        read.0
    }

    fn required(terms: serde_json::Value) -> serde_json::Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    fn field(key: &str, operator: &str, values: &[&str]) -> serde_json::Value {
        json!({"key": key, "operator": operator, "values": values})
    }

    /// `GetTargetNodeName`: the first `metadata.name In` requirement of any term decides,
    /// and it must have exactly one value.
    #[test]
    fn the_first_node_name_requirement_decides() {
        let named = |n: &str| field("metadata.name", "In", &[n]);
        assert_eq!(target(required(json!([{"matchFields": [named("n1")]}]))), Some("n1".into()));
        let later = json!([{"matchExpressions": [field("zone", "In", &["a"])]}, {"matchFields": [field("metadata.name", "NotIn", &["x"]), named("n2"), named("n3")]}]);
        assert_eq!(target(required(later)), Some("n2".into()));
        let two = json!([{"matchFields": [field("metadata.name", "In", &["a", "b"])]}, {"matchFields": [named("c")]}]);
        assert_eq!(target(required(two)), None, "the first requirement has two values");
        assert_eq!(target(required(json!([{"matchFields": [field("metadata.name", "In", &[])]}]))), None);
        assert_eq!(target(required(json!([]))), None);
        assert_eq!(target(required(json!(null))), None);
        assert_eq!(target(json!({"nodeAffinity": null})), None);
        assert_eq!(target(json!(null)), None);
        assert_eq!(target(json!({})), None);
    }

    #[test]
    fn a_malformed_affinity_is_an_error() {
        assert!(serde_json::from_value::<AffinityTarget>(required(json!({"a": 1}))).is_err());
        let values = json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": "n1"}]}]);
        assert!(serde_json::from_value::<AffinityTarget>(required(values)).is_err());
        let later = json!([{"matchFields": [field("metadata.name", "In", &["n1"])]}, {"matchFields": 3}]);
        assert!(
            serde_json::from_value::<AffinityTarget>(required(later)).is_err(),
            "elements after the first are checked"
        );
    }
}
