//! A daemon pod as the exporter reads it: metadata, the placement part of its spec, and
//! what its status says of it being available: whether its phase is terminal, its Ready and
//! PodScheduled conditions, and why a container waits.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::LocalKey;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use serde::{Deserialize, Deserializer};

use super::affinity::AffinityTarget;
use super::labels::FlatLabels;
use super::memo::{ByText, TextMemo};
use super::meta::{ControllerUid, slim_pod_meta};
use super::parsed_str;
use super::status::PodStatus;
use crate::model::{PlacementSpec, TaintEffect, TolerationOperator, TolerationParts};
use crate::rules::eligibility::DEFAULT_TOLERATIONS;

/// A daemon pod: metadata plus the placement part of its spec, read through `PodParts`.
/// Boxed: from sonic-rs to the index, a decoded pod is moved about ten times (the event, the
/// stream's poll, the list's item, the batch; a uprobe's count, 2026-12-05) before the index
/// converts it, and each move was of 768 B where boxed it is of a pointer.
#[derive(Clone, Default, Deserialize)]
#[serde(from = "WirePod")]
pub struct SlimPod(Box<PodParts>);

/// What a `SlimPod` holds.
#[derive(Clone, Debug, Default)]
pub struct PodParts {
    /// Name, namespace, UID, resource version and timestamps. The pod's labels and owner
    /// references are read into `labels` and `controller_uid` instead: they are never here.
    pub metadata: ObjectMeta,
    pub labels: FlatLabels,
    /// The UID of the owner reference marked controller (`GetControllerOf`).
    pub controller_uid: Option<String>,
    pub spec: Option<PodPlacement>,
    pub status: Option<PodStatus>,
}

impl std::ops::Deref for SlimPod {
    type Target = PodParts;
    fn deref(&self) -> &PodParts {
        &self.0
    }
}

impl std::ops::DerefMut for SlimPod {
    fn deref_mut(&mut self) -> &mut PodParts {
        &mut self.0
    }
}

impl From<PodParts> for SlimPod {
    fn from(parts: PodParts) -> Self {
        Self(Box::new(parts))
    }
}

/// As the parts read: the box says nothing of the pod.
impl std::fmt::Debug for SlimPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A `Pod` as the API knows it (what `#[resource(inherit = Pod)]` derives, by hand: the
/// derive reads `metadata` off the struct itself, and here it is in the box).
impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = <Pod as kube::Resource>::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodParts {
    pub fn is_terminal(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.terminal)
    }
}

/// A pod as it is sent, its metadata split where `SlimPod` keeps the parts.
#[derive(Deserialize)]
struct WirePod {
    /// Read only to be checked (`super::core_v1`).
    #[serde(rename = "apiVersion", deserialize_with = "super::core_v1", default)]
    _api_version: (),
    #[serde(deserialize_with = "slim_pod_meta", default)]
    metadata: (ObjectMeta, FlatLabels, ControllerUid),
    #[serde(default)]
    spec: Option<PodPlacement>,
    #[serde(default)]
    status: Option<PodStatus>,
}

impl From<WirePod> for SlimPod {
    fn from(wire: WirePod) -> Self {
        let (metadata, labels, ControllerUid(controller_uid)) = wire.metadata;
        Self::from(PodParts { metadata, labels, controller_uid, spec: wire.spec, status: wire.status })
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
    /// Of the affinity, the node its required terms name (`AffinityTarget`).
    #[serde(rename = "affinity", default)]
    pub affinity_target: AffinityTarget,
    /// Shared by the pods whose list reads the same (`memo`).
    #[serde(default, deserialize_with = "super::memo::by_text")]
    pub tolerations: Tolerations,
    pub host_network: Option<bool>,
}

/// A pod's tolerations, shared with every pod whose list reads the same.
pub type Tolerations = Option<Arc<[PodToleration]>>;

impl ByText for Tolerations {
    fn memo() -> &'static LocalKey<TextMemo<Self>> {
        thread_local!(static SEEN: TextMemo<Tolerations> = TextMemo::default());
        &SEEN
    }
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

impl PodToleration {
    /// A toleration from its four fields as the protobuf wire sends them, each empty where
    /// unset: read as the JSON wire, which leaves them out, is.
    pub(in crate::k8s) fn from_fields(key: &str, operator: &str, value: &str, effect: &str) -> Self {
        Self {
            key: (!key.is_empty()).then(|| common(key)),
            operator: TolerationOperator::parse(operator),
            value: (!value.is_empty()).then(|| value.to_owned()),
            effect: TaintEffect::parse_optional(effect),
        }
    }
}

/// Keys every daemon pod repeats: those of the tolerations the DaemonSet controller adds.
/// Read as static strings, they cost no allocation per pod.
fn common(s: &str) -> Cow<'static, str> {
    match DEFAULT_TOLERATIONS.iter().map(|(key, _, _)| *key).find(|c| *c == s) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(s.to_owned()),
    }
}

impl PlacementSpec for PodPlacement {
    fn node_selector(&self) -> impl Iterator<Item = (&str, &str)> {
        self.node_selector.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    fn tolerations(&self) -> impl Iterator<Item = TolerationParts<'_>> {
        self.tolerations.iter().flat_map(|list| list.iter()).map(|t| {
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
            affinity_target: s.affinity.as_ref().map(AffinityTarget::from).unwrap_or_default(),
            node_name: s.node_name,
            node_selector: s.node_selector,
            host_network: s.host_network,
        });
        // The wire shape, read as the exporter reads it.
        let status = pod.status.and_then(|s| serde_json::to_value(s).ok()).and_then(|s| serde_json::from_value(s).ok());
        let mut metadata = pod.metadata;
        let labels = metadata.labels.take().as_ref().map(FlatLabels::from).unwrap_or_default();
        let owners = metadata.owner_references.take().unwrap_or_default();
        let controller_uid = owners.into_iter().find(|o| o.controller == Some(true)).map(|o| o.uid);
        Self::from(PodParts { metadata, labels, controller_uid, spec, status })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::k8s::slim::ConditionKind;
    use crate::model::interner::Interner;
    use crate::model::{Placement, Str, Toleration};

    /// The watch asks the API server for what `Resource` names: written out by hand, it must
    /// name what `Pod` names, or the exporter would watch some other path.
    #[test]
    fn a_slim_pod_is_the_same_resource_as_a_pod() {
        use kube::Resource;
        assert_eq!(
            (SlimPod::kind(&()), SlimPod::group(&()), SlimPod::version(&()), SlimPod::plural(&())),
            (Pod::kind(&()), Pod::group(&()), Pod::version(&()), Pod::plural(&()))
        );
        assert_eq!(SlimPod::api_version(&()), Pod::api_version(&()));
        assert_eq!(SlimPod::url_path(&(), Some("kube-system")), Pod::url_path(&(), Some("kube-system")));
        assert_eq!(SlimPod::url_path(&(), None), Pod::url_path(&(), None));
    }

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
            tolerations: Some(Arc::from([PodToleration {
                key: Some("k".into()),
                operator: TolerationOperator::Exists,
                ..PodToleration::default()
            }])),
            ..PodPlacement::default()
        };
        assert!(Arc::ptr_eq(&built, &interner.own_placement(Some(&spec))));
        spec.host_network = Some(true);
        let other = interner.own_placement(Some(&spec));
        assert!(!Arc::ptr_eq(&built, &other));
        assert!(other.host_network);
        assert!(Arc::ptr_eq(&other, &interner.own_placement(Some(&spec))));
    }

    /// What the watcher decodes from a pod's JSON is what a full pod converts to: labels,
    /// controller, the affinity's target and the two conditions availability reads.
    #[test]
    fn a_decoded_pod_is_the_converted_one() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "agent-x", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"tier": "node", "app": "agent", "controller-revision-hash": "5d8f"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "not-it"},
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1", "controller": true}]},
            "spec": {"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
            "status": {"phase": "Running", "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"}]}
        });
        let decoded: SlimPod = serde_json::from_value(pod.clone()).unwrap();
        let converted = SlimPod::from(serde_json::from_value::<Pod>(pod).unwrap());
        for slim in [&decoded, &converted] {
            let labels: Vec<_> = slim.labels.iter().collect();
            assert_eq!(labels, [("app", "agent"), ("controller-revision-hash", "5d8f"), ("tier", "node")]);
            assert_eq!(slim.controller_uid.as_deref(), Some("ds-1"));
            assert_eq!(slim.metadata.labels, None, "labels live in one place");
            assert_eq!(slim.metadata.owner_references, None, "so does the controller");
            let spec = slim.spec.as_ref().unwrap();
            assert_eq!(spec.affinity_target.0.as_deref(), Some("n1"));
            let conditions = &slim.status.as_ref().unwrap().conditions;
            let ready = conditions.get(ConditionKind::Ready).unwrap();
            assert!(!ready.true_, "the first Ready condition counts, as `find` reads it");
            assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
            assert!(conditions.get(ConditionKind::PodScheduled).unwrap().true_);
            assert_eq!(conditions.get(ConditionKind::Other), None);
        }
        assert_eq!(decoded.metadata.name.as_deref(), Some("agent-x"));
        assert_eq!(decoded.metadata.resource_version.as_deref(), Some("7"));
    }

    /// Two pods of one revision, decoded as the watcher decodes them (sonic-rs): the parts
    /// they repeat are read once, and read as serde_json reads them.
    #[test]
    fn pods_of_one_revision_share_the_parts_they_repeat() {
        let pod = |name: &str, node: &str| {
            json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                    "labels": {"app": "agent", "controller-revision-hash": "5d8f", "pod-template-generation": "2"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                        "uid": "ds-1", "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"nodeName": node, "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}})
            .to_string()
        };
        let (one, two) = (pod("agent-a", "n1"), pod("agent-b", "n2"));
        let by_sonic = |text: &str| sonic_rs::from_str::<SlimPod>(text).unwrap();
        let (a, b) = (by_sonic(&one), by_sonic(&two));
        let tolerations = |pod: &SlimPod| pod.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap();
        assert!(Arc::ptr_eq(&tolerations(&a), &tolerations(&b)), "one parse, shared");
        assert_eq!(tolerations(&a)[1].value.as_deref(), Some("gpu"));
        assert_eq!((a.labels.get("pod-template-generation"), b.controller_uid.as_deref()), (Some("2"), Some("ds-1")));
        for (text, decoded) in [(&one, a), (&two, b)] {
            let plain = serde_json::from_str::<SlimPod>(text).unwrap();
            assert_eq!(format!("{decoded:?}"), format!("{plain:?}"));
        }
    }

    #[test]
    fn a_pod_without_labels_owners_or_conditions_reads_as_none() {
        let pod: SlimPod =
            serde_json::from_value(json!({"metadata": {"name": "p", "labels": null, "ownerReferences": null},
                "status": {"conditions": null}}))
            .unwrap();
        assert!(pod.labels.is_empty());
        assert_eq!(pod.controller_uid, None);
        assert_eq!(pod.status.as_ref().unwrap().conditions.get(ConditionKind::Ready), None);
        let error = serde_json::from_value::<SlimPod>(json!({"metadata": {"labels": ["a"]}})).unwrap_err();
        assert!(error.to_string().contains("map of label keys"), "{error}");
    }
}
