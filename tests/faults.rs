//! Faults on the real control plane: the API server killed and restarted, and
//! RBAC that denies `watch pods` until it is granted. Through both the exporter
//! keeps serving, `/readyz` tells the truth, and it recovers without a restart.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::*;

const READ: [&str; 3] = ["get", "list", "watch"];

/// Namespace, two nodes, one DaemonSet running everywhere, and the exporter's
/// user bound to a ClusterRole with `pod_verbs` on pods (and full read elsewhere).
async fn scene(admin: &Cluster, pod_verbs: &[&str]) {
    let pp = PostParams::default();
    Api::<Namespace>::all(admin.client.clone())
        .create(&pp, &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap())
        .await
        .unwrap();
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &role(pod_verbs)).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "misschedule-exporter"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "misschedule-exporter"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.client.clone()).create(&pp, &binding).await.unwrap();
    for name in ["n1", "n2"] {
        admin.nodes.create(&pp, &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()).await.unwrap();
    }
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}
    }))
    .unwrap();
    admin.daemonsets.create(&pp, &ds).await.unwrap();
}

fn role(pod_verbs: &[&str]) -> ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": READ},
            {"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs},
            {"apiGroups": ["apps"], "resources": ["daemonsets", "controllerrevisions"], "verbs": READ}
        ]
    }))
    .unwrap()
}

async fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

fn drain(node: &str) -> BTreeSet<(String, String, String, String)> {
    [("agent".into(), node.into(), "autoscaler_drain".into(), "ToBeDeletedByClusterAutoscaler".into())].into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_outage_serves_last_state_and_recovers() {
    let cp = ControlPlane::start("outage");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    scene(&admin, &READ).await;
    let mut exporter = Exporter::start(cp.get("EXPORTER_KUBECONFIG"));
    wait_for("ready", Duration::from_secs(30), || exporter.ready()).await;
    expect(&admin, &exporter, "pods bound", BTreeSet::new()).await;
    admin
        .set_taints("n1", json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]))
        .await;
    expect(&admin, &exporter, "before the outage", drain("n1")).await;

    assert!(cp.script("kill-apiserver").success());
    let killed = Instant::now();
    let noticed =
        wait_for("/readyz 503 while the API server is down", Duration::from_secs(20), || !exporter.ready()).await;
    println!("outage noticed after {noticed:?}");
    // The last known state is still served, and the staleness is visible.
    let metrics = exporter.metrics();
    assert_eq!(reported_rows(&metrics), drain("n1"), "last known state while down");
    assert!(metrics.contains("misschedule_exporter_watch_healthy{resource=\"nodes\"} 0"), "staleness not visible");
    assert!(exporter.child.try_wait().unwrap().is_none(), "the exporter exited");
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(killed.elapsed())).await;

    assert!(cp.script("start-apiserver").success());
    let back = Instant::now();
    // Changes right after the API server returns, before or while the exporter resyncs:
    // the drained node's pod is deleted and a taint is added elsewhere.
    let pods = admin.pods.list(&ListParams::default()).await.unwrap();
    let on_n1 = pods.into_iter().find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("n1")).unwrap();
    admin.pods.delete(on_n1.metadata.name.as_deref().unwrap(), &DeleteParams::default().grace_period(0)).await.unwrap();
    admin.set_taints("n2", json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])).await;
    let expected: BTreeSet<_> = [("agent".into(), "n2".into(), "taint_added".into(), "dedicated".into())].into();
    // The exporter's own answer within 10 s; the controller-manager reconnects on its own
    // backoff, so parity with its status is checked next, on the usual step timeout.
    let resynced =
        wait_for("exporter resynced", Duration::from_secs(10), || reported_rows(&exporter.metrics()) == expected).await;
    println!("exporter shows the post-outage state {resynced:?} after the API server returned");
    expect(&admin, &exporter, "after the outage", expected).await;
    let matched = back.elapsed();
    println!("metrics match the controller's status {matched:?} after the API server returned");
    let ready = wait_for("ready again", Duration::from_secs(15), || exporter.ready()).await;
    println!("ready again {:?} after the API server returned", back.elapsed().min(matched + ready));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_denied_watch_backs_off_and_recovers_when_granted() {
    let cp = ControlPlane::start("rbac");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    scene(&admin, &["get", "list"]).await;
    let log = cp.dir.join("exporter.log");
    let mut exporter = Exporter::start_logging(cp.get("EXPORTER_KUBECONFIG"), &log);
    wait_for("serving", Duration::from_secs(30), || exporter.get("/healthz").is_some()).await;

    // For 10 s: never ready, still alive, retrying with backoff rather than in a hot loop.
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_secs(10) {
        assert!(!exporter.ready(), "ready without permission to watch pods");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exporter.child.try_wait().unwrap().is_none(), "the exporter exited");
    let errors = exporter.sample("misschedule_exporter_watch_errors_total{resource=\"pods\"}").unwrap();
    assert!((2.0..=12.0).contains(&errors), "{errors} watch errors in 10 s: not a backoff");
    assert_eq!(exporter.sample("misschedule_exporter_watch_errors_total{resource=\"nodes\"}"), Some(0.0));
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged.lines().find(|l| l.contains("watch failed")).expect("no watch failure logged");
    assert!(line.contains("pods") && line.contains("watch") && line.contains("forbidden"), "unclear error: {line}");

    // Grant it: ready again without a restart.
    let patch: Value = serde_json::to_value(role(&READ)).unwrap();
    Api::<ClusterRole>::all(admin.client.clone())
        .patch("misschedule-exporter", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let granted = Instant::now();
    wait_for("ready once granted", Duration::from_secs(20), || exporter.ready()).await;
    println!("ready {:?} after the permission was granted", granted.elapsed());
    expect(&admin, &exporter, "working after the grant", BTreeSet::new()).await;
}
