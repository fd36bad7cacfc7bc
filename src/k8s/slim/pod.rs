//! A daemon pod as the exporter reads it: metadata, the placement part of its spec, and
//! what its status says of it being available: whether its phase is terminal, its Ready and
//! PodScheduled conditions, and why a container waits.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use serde::{Deserialize, Deserializer};

use super::meta::slim_meta;
use super::parsed_str;
use super::status::PodStatus;
use crate::model::{PlacementSpec, TaintEffect, TolerationOperator, TolerationParts};
use crate::rules::eligibility::{DEFAULT_TOLERATIONS, NODE_NAME_FIELD};

/// A daemon pod: metadata plus the placement part of its spec.
#[derive(Clone, Debug, Default, Deserialize, kube::Resource)]
#[resource(inherit = Pod)]
pub struct SlimPod {
    /// Read only to be checked (`super::core_v1`).
    #[serde(rename = "apiVersion", deserialize_with = "super::core_v1", default)]
    pub api_version: (),
    #[serde(deserialize_with = "slim_meta", default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<PodPlacement>,
    #[serde(default)]
    pub status: Option<PodStatus>,
}

impl SlimPod {
    pub fn is_terminal(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.terminal)
    }
}

/// A daemon pod's placement. Tolerations and affinity are read into slim types:
/// with the default tolerations a daemon pod carries about eight, and the
/// k8s-openapi ones cost three strings each to build and to drop.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlacement {
    pub node_name: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub affinity: Option<PodAffinity>,
    pub tolerations: Option<Vec<PodToleration>>,
    pub host_network: Option<bool>,
}

/// A pod toleration; operator and effect are read straight into the model's enums.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PodToleration {
    #[serde(default, deserialize_with = "common_str")]
    pub key: Option<Cow<'static, str>>,
    #[serde(default, deserialize_with = "toleration_operator")]
    pub operator: TolerationOperator,
    pub value: Option<String>,
    #[serde(default, deserialize_with = "taint_effect")]
    pub effect: Option<TaintEffect>,
}

/// Of a pod's affinity only the required node terms' `matchFields` matter: the
/// controller names the target node there (`GetTargetNodeName`). A daemon pod's
/// other constraints are read from its DaemonSet revision, not from the pod.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinity {
    pub node_affinity: Option<PodNodeAffinity>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodNodeAffinity {
    #[serde(rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<PodNodeSelector>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodNodeSelector {
    /// Null reads as none, as Go's decoder reads it.
    pub node_selector_terms: Option<Vec<PodNodeSelectorTerm>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodNodeSelectorTerm {
    pub match_fields: Option<Vec<PodFieldRequirement>>,
}

/// A `matchFields` requirement; the controller writes `metadata.name In [node]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PodFieldRequirement {
    #[serde(default, deserialize_with = "common_str")]
    pub key: Option<Cow<'static, str>>,
    #[serde(default, deserialize_with = "common_str")]
    pub operator: Option<Cow<'static, str>>,
    pub values: Option<Vec<String>>,
}

/// Strings every daemon pod repeats: the keys of the tolerations the DaemonSet
/// controller adds, and its `matchFields` term. Read as static strings, they cost
/// no allocation per pod.
fn common_strings() -> impl Iterator<Item = &'static str> {
    DEFAULT_TOLERATIONS.iter().map(|(key, _, _)| *key).chain([NODE_NAME_FIELD, "In"])
}

fn common(s: &str) -> Cow<'static, str> {
    match common_strings().find(|c| *c == s) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(s.to_owned()),
    }
}

impl PodPlacement {
    /// The required node terms' `matchFields`, in order.
    pub fn required_match_fields(&self) -> impl Iterator<Item = &PodFieldRequirement> {
        let terms = self.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()).and_then(|n| n.required.as_ref());
        let terms = terms.into_iter().flat_map(|r| r.node_selector_terms.iter().flatten());
        terms.flat_map(|t| t.match_fields.iter().flatten())
    }
}

impl PlacementSpec for PodPlacement {
    fn node_selector(&self) -> impl Iterator<Item = (&str, &str)> {
        self.node_selector.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    fn tolerations(&self) -> impl Iterator<Item = TolerationParts<'_>> {
        self.tolerations.iter().flatten().map(|t| {
            (t.key.as_deref().unwrap_or_default(), t.operator, t.value.as_deref().unwrap_or_default(), t.effect)
        })
    }
    fn host_network(&self) -> bool {
        self.host_network.unwrap_or(false)
    }
}

impl PlacementSpec for PodSpec {
    fn node_selector(&self) -> impl Iterator<Item = (&str, &str)> {
        self.node_selector.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    fn tolerations(&self) -> impl Iterator<Item = TolerationParts<'_>> {
        self.tolerations.iter().flatten().map(|t| {
            let operator = t.operator.as_deref().map_or(TolerationOperator::Equal, TolerationOperator::parse);
            let effect = t.effect.as_deref().and_then(TaintEffect::parse_optional);
            (t.key.as_deref().unwrap_or_default(), operator, t.value.as_deref().unwrap_or_default(), effect)
        })
    }
    fn host_network(&self) -> bool {
        self.host_network.unwrap_or(false)
    }
}

fn toleration_operator<'de, D: Deserializer<'de>>(deserializer: D) -> Result<TolerationOperator, D::Error> {
    parsed_str(deserializer, TolerationOperator::parse)
}

fn common_str<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Cow<'static, str>>, D::Error> {
    parsed_str(deserializer, |s| Some(common(s)))
}

fn taint_effect<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<TaintEffect>, D::Error> {
    parsed_str(deserializer, TaintEffect::parse_optional)
}

/// Full objects (tests, tools) convert to the watched shapes.
impl From<Pod> for SlimPod {
    fn from(pod: Pod) -> Self {
        let spec = pod.spec.map(|s| PodPlacement {
            tolerations: s.tolerations.is_some().then(|| {
                s.tolerations()
                    .map(|(key, operator, value, effect)| PodToleration {
                        key: (!key.is_empty()).then(|| Cow::Owned(key.to_owned())),
                        operator,
                        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
                        effect,
                    })
                    .collect()
            }),
            affinity: s.affinity.map(PodAffinity::from),
            node_name: s.node_name,
            node_selector: s.node_selector,
            host_network: s.host_network,
        });
        // The wire shape, read as the exporter reads it.
        let status = pod.status.and_then(|s| serde_json::to_value(s).ok()).and_then(|s| serde_json::from_value(s).ok());
        Self { api_version: (), metadata: pod.metadata, spec, status }
    }
}

impl From<Affinity> for PodAffinity {
    fn from(affinity: Affinity) -> Self {
        let required = affinity.node_affinity.and_then(|n| n.required_during_scheduling_ignored_during_execution);
        Self {
            node_affinity: Some(PodNodeAffinity {
                required: required.map(|r| PodNodeSelector {
                    node_selector_terms: Some(
                        r.node_selector_terms
                            .into_iter()
                            .map(|t| PodNodeSelectorTerm {
                                match_fields: t.match_fields.map(|fields| {
                                    fields
                                        .into_iter()
                                        .map(|f| PodFieldRequirement {
                                            key: Some(Cow::Owned(f.key)),
                                            operator: Some(Cow::Owned(f.operator)),
                                            values: f.values,
                                        })
                                        .collect()
                                }),
                            })
                            .collect(),
                    ),
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::interner::Interner;
    use crate::model::{Placement, Str, Toleration};

    /// The interner finds a pod's own placement by its slim parts without building one.
    #[test]
    fn a_pod_placement_found_by_its_parts_is_the_built_one() {
        let mut interner = Interner::default();
        let built = interner.placement(Placement {
            node_selector: vec![(Str::from("pool"), Str::from("a"))],
            tolerations: vec![Toleration {
                key: Str::from("k"),
                operator: TolerationOperator::Exists,
                value: Str::from(""),
                effect: None,
            }],
            ..Placement::default()
        });
        let mut spec = PodPlacement {
            node_selector: Some([("pool".to_owned(), "a".to_owned())].into()),
            tolerations: Some(vec![PodToleration {
                key: Some("k".into()),
                operator: TolerationOperator::Exists,
                ..PodToleration::default()
            }]),
            ..PodPlacement::default()
        };
        assert!(Arc::ptr_eq(&built, &interner.own_placement(Some(&spec))));
        spec.host_network = Some(true);
        let other = interner.own_placement(Some(&spec));
        assert!(!Arc::ptr_eq(&built, &other));
        assert!(other.host_network);
        assert!(Arc::ptr_eq(&other, &interner.own_placement(Some(&spec))));
    }
}
