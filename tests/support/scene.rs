//! The scene most scenario tests on the lab start from: three nodes, four DaemonSets that
//! select them in each way the controller knows.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::cluster::{Cluster, NS, dry_run_chart, render_chart};
use super::nfd::set_feature_on;

pub const NODES: [&str; 3] = ["n1", "n2", "n3"];
pub const AVX: &str = "feature.node.kubernetes.io/cpu-cpuid.AVX";
pub const ALL: [&str; 4] = ["datadog-agent", "ssd-agent", "avx-agent", "zone-agent"];

/// How the lab's nodes finish a delete the controller asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletes {
    /// At once, as a kubelet whose containers stop on SIGTERM.
    AtOnce,
    /// When the grace period of this many seconds ends, as a kubelet kills a container
    /// that ignores SIGTERM (the lab's stages/pod-stop-at-grace.yaml): the pod is seen
    /// terminating on its node meanwhile.
    AtGraceEnd(u32),
}

/// Nodes n1..n3 (disk=ssd, zone=a, the AVX feature label from nfd-master), the exporter's
/// user bound to the chart's ClusterRole, and four DaemonSets on every node: datadog-agent,
/// ssd-agent (nodeSelector disk, OnDelete), avx-agent (nodeSelector AVX), zone-agent
/// (required affinity zone=a).
pub async fn create_scene(admin: &Cluster, deletes: Deletes) {
    let pp = PostParams::default();
    admin.create_namespace(NS).await;

    // The exporter's permissions: exactly the ClusterRole the chart renders.
    let rendered = render_chart();
    dry_run_chart(admin, &rendered).await;
    let role: ClusterRole = serde_json::from_value(rendered["clusterrole.yaml"].clone()).unwrap();
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata.name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "misschedule-exporter"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.client.clone()).create(&pp, &binding).await.unwrap();

    admin.add_nodes(&NODES, &[("disk", "ssd"), ("zone", "a")]).await;
    // The CPU feature label, as nfd-master writes it.
    set_feature_on(admin, &NODES, AVX, Some("true")).await;
    let (annotations, grace) = match deletes {
        Deletes::AtOnce => (json!({}), json!(null)),
        Deletes::AtGraceEnd(seconds) => (json!({"lab.misschedule.io/stop": "at-grace-end"}), json!(seconds)),
    };
    let ds = |name: &str, spec: Value| -> DaemonSet {
        let mut pod_spec = json!({"containers": [{"name": "agent", "image": "registry.example/agent:1"}]});
        if !grace.is_null() {
            pod_spec["terminationGracePeriodSeconds"] = grace.clone();
        }
        pod_spec.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": annotations}, "spec": pod_spec}}
        }))
        .unwrap()
    };
    let zone = |z: &str| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}]}}})
    };
    for d in [
        ds("datadog-agent", json!({})),
        // OnDelete: a template change replaces no pod by itself, so a pod the change strands
        // (it keeps a node it no longer tolerates) stays to be seen; under RollingUpdate the
        // rollout deletes it soon after, and the node is lost instead.
        on_delete(ds(
            "ssd-agent",
            json!({"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
        )),
        ds("avx-agent", json!({"nodeSelector": {AVX: "true"}})),
        ds("zone-agent", json!({"affinity": zone("a")})),
    ] {
        admin.daemonsets.create(&pp, &d).await.unwrap();
    }
}

fn on_delete(mut ds: DaemonSet) -> DaemonSet {
    let strategy = serde_json::from_value(json!({"type": "OnDelete"})).unwrap();
    ds.spec.as_mut().unwrap().update_strategy = Some(strategy);
    ds
}
