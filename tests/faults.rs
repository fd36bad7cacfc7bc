//! Faults on the lab's real control plane: the API server killed and restarted, the
//! exporter alone cut off while the cluster changes, watches expired by etcd
//! compaction (410 Gone), and RBAC that denies `watch pods` until it is granted.
//! Through all of them the exporter keeps serving, `/readyz` tells the truth, and it
//! recovers without a restart and without stale series.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use misschedule_exporter::index::Resource;
use misschedule_exporter::shared::HEALTHY_AFTER_CLEAN;
use serde_json::{Value, json};
use support::cluster::*;
use support::http;
use support::proxy::Proxy;

/// Namespace, two nodes, one DaemonSet running everywhere, and the exporter's
/// user bound to a ClusterRole with `pod_verbs` on pods (and full read elsewhere).
async fn scene(admin: &Cluster, pod_verbs: &[&str]) {
    agent_scene(admin, &["n1", "n2"]).await;
    grant_exporter(admin, pod_verbs).await;
}

fn drain(node: &str) -> BTreeSet<(String, String, String, String)> {
    [("agent".into(), node.into(), "autoscaler_drain".into(), "ToBeDeletedByClusterAutoscaler".into())].into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn apiserver_outage_serves_last_state_and_recovers() {
    let cp = ControlPlane::start("outage");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    scene(&admin, &READ).await;
    let mut exporter = Exporter::start(cp.get("EXPORTER_KUBECONFIG"));
    wait_until("ready", Duration::from_secs(30), || exporter.ready()).await;
    expect(&admin, &exporter, "pods bound", BTreeSet::new()).await;
    admin
        .set_taints("n1", json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]))
        .await;
    expect(&admin, &exporter, "before the outage", drain("n1")).await;

    assert!(cp.script("kill-apiserver").success());
    let killed = Instant::now();
    let noticed =
        wait_until("/readyz 503 while the API server is down", Duration::from_secs(20), || !exporter.ready()).await;
    println!("outage noticed after {noticed:?}");
    // The last known state is still served, and the staleness is visible.
    let metrics = exporter.metrics();
    assert_eq!(reported_rows(&metrics), drain("n1"), "last known state while down");
    assert!(metrics.contains("misschedule_exporter_watch_healthy{resource=\"nodes\"} 0"), "staleness not visible");
    // Down for 20 s: never ready, and the lists that fail at once are retried on the
    // backoff (0.8, 1.6, 3.2, 6.4, 12.8 s, each stretched by up to as much again), neither
    // in a hot loop nor given up.
    let errors = "misschedule_exporter_watch_errors_total{resource=\"nodes\",reason=\"unreachable\"}";
    let errors_before = exporter.sample(errors).unwrap();
    let window = Instant::now();
    while killed.elapsed() < Duration::from_secs(20) {
        assert!(!exporter.ready(), "ready while the API server is down");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let retried = exporter.sample(errors).unwrap() - errors_before;
    println!("{retried} failed node lists in {:?} of outage", window.elapsed());
    assert!((2.0..=7.0).contains(&retried), "{retried} failed lists in {:?}", window.elapsed());
    assert!(exporter.child.try_wait().unwrap().is_none(), "the exporter exited");

    assert!(cp.script("start-apiserver").success());
    let back = Instant::now();
    // Changes right after the API server returns, before or while the exporter resyncs:
    // the drained node's pod is deleted and a taint is added elsewhere.
    let pods = admin.pods.list(&ListParams::default()).await.unwrap();
    let on_n1 = pods.into_iter().find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("n1")).unwrap();
    admin.pods.delete(on_n1.metadata.name.as_deref().unwrap(), &DeleteParams::default().grace_period(0)).await.unwrap();
    admin.set_taints("n2", json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])).await;
    let expected: BTreeSet<_> = [("agent".into(), "n2".into(), "taint_added".into(), "dedicated".into())].into();
    // The exporter's own answer once its backoff (by now up to 25.6 s) lets it retry; the
    // controller-manager reconnects on its own backoff, so parity with its status is
    // checked next, on the usual step timeout. Not ready before a relist has been watched
    // cleanly for HEALTHY_AFTER_CLEAN.
    let resynced = wait_until("exporter resynced", Duration::from_secs(35), || {
        let too_soon = back.elapsed() + Duration::from_millis(300) < HEALTHY_AFTER_CLEAN;
        assert!(!(too_soon && exporter.ready()), "ready {:?} after the API server returned", back.elapsed());
        reported_rows(&exporter.metrics()) == expected
    })
    .await;
    println!("exporter shows the post-outage state {resynced:?} after the API server returned");
    expect(&admin, &exporter, "after the outage", expected).await;
    let matched = back.elapsed();
    println!("metrics match the controller's status {matched:?} after the API server returned");
    let ready = wait_until("ready again", Duration::from_secs(20), || exporter.ready()).await;
    println!("ready again {:?} after the API server returned", back.elapsed().min(matched + ready));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn rbac_denied_watch_backs_off_and_recovers_when_granted() {
    let cp = ControlPlane::start("rbac");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    scene(&admin, &["get", "list"]).await;
    let log = cp.dir.join("exporter.log");
    // With --events, though its role never allows writing them (checked at the end).
    let mut exporter = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &["--events"], &log);
    wait_until("serving", Duration::from_secs(30), || exporter.get("/healthz").is_some()).await;

    // For 25 s: never ready, still alive, and retrying ever less often: each streamed list
    // is refused (it is a watch), and the delays double (0.8, 1.6, 3.2, 6.4, 12.8 s, each
    // stretched by up to as much again); readiness stays red through gaps longer than its
    // 5 s clean period.
    let errors = "misschedule_exporter_watch_errors_total{resource=\"pods\",reason=\"refused\"}";
    let watching = Instant::now();
    let mut failed_at = Vec::new();
    let mut count = 0.0;
    while watching.elapsed() < Duration::from_secs(25) {
        assert!(!exporter.ready(), "ready without permission to watch pods");
        let now = exporter.sample(errors).unwrap_or(count);
        if now > count {
            count = now;
            failed_at.push(watching.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exporter.child.try_wait().unwrap().is_none(), "the exporter exited");
    let gaps: Vec<Duration> = failed_at.windows(2).map(|w| w[1] - w[0]).collect();
    println!("{count} pod watch errors in 25 s; gaps between them: {gaps:?}");
    assert!((4.0..=7.0).contains(&count), "{count} watch errors in 25 s: expected 0.8, 1.6, 3.2, 6.4 s apart or more");
    let slack = Duration::from_millis(300);
    assert!(gaps.windows(2).all(|w| w[1] + slack >= w[0]), "the delays shrank: {gaps:?}");
    assert!(gaps.last().is_some_and(|g| *g >= Duration::from_secs(6)), "never backed off beyond 6 s: {gaps:?}");
    assert_eq!(errors_by_resource(&exporter)["nodes"], 0.0);
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged.lines().find(|l| l.contains("watch failed")).expect("no watch failure logged");
    assert!(line.contains("pods") && line.contains("watch") && line.contains("forbidden"), "unclear error: {line}");

    // Grant it: ready again without a restart, on the next attempt, once the watch has run
    // cleanly for HEALTHY_AFTER_CLEAN after that attempt's list.
    let patch: Value = serde_json::to_value(exporter_role(&READ)).unwrap();
    Api::<ClusterRole>::all(admin.client.clone())
        .patch("misschedule-exporter", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let granted = Instant::now();
    let lists = "misschedule_exporter_watch_events_total{resource=\"pods\",type=\"init_done\"}";
    let lists_before = exporter.sample(lists).unwrap();
    let mut relisted = None;
    // The next attempt comes when the backoff says (up to 25.6 s by now), then the clean period.
    wait_until("ready once granted", Duration::from_secs(45), || {
        if relisted.is_none() && exporter.sample(lists).is_some_and(|n| n > lists_before) {
            relisted = Some(Instant::now());
        }
        exporter.ready()
    })
    .await;
    let relisted = relisted.expect("ready without a relist");
    let proving = relisted.elapsed();
    println!("ready {:?} after the grant, {proving:?} after the relist", granted.elapsed());
    assert!(proving + Duration::from_millis(300) >= HEALTHY_AFTER_CLEAN, "ready {proving:?} after the relist");
    expect(&admin, &exporter, "working after the grant", BTreeSet::new()).await;

    // Events denied: one clear log line and a self-metric, and the exporter keeps serving.
    let forbidden = "misschedule_exporter_kube_events_total{result=\"forbidden\"}";
    for (tried, node) in [(1.0, "n1"), (2.0, "n2")] {
        admin.set_taints(node, taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")).await;
        expect(&admin, &exporter, "drained with Events denied", drain(node)).await;
        wait_until("the denied Event counted", Duration::from_secs(10), || {
            exporter.sample(forbidden).is_some_and(|n| n >= tried)
        })
        .await;
        admin.set_taints(node, json!([])).await;
    }
    assert!(exporter.ready(), "still ready");
    assert_eq!(exporter.sample("misschedule_exporter_kube_events_total{result=\"sent\"}"), Some(0.0));
    let logged = std::fs::read_to_string(&log).unwrap();
    let denied: Vec<_> = logged.lines().filter(|l| l.contains("cannot write Events")).collect();
    assert_eq!(denied.len(), 1, "one log line, not one per Event: {denied:?}");
    assert!(denied[0].contains("RBAC") && denied[0].contains("core events"), "unclear: {}", denied[0]);
}

fn taint(key: &str, value: &str, effect: &str) -> Value {
    json!([{"key": key, "value": value, "effect": effect}])
}

/// Failed calls per resource, whatever the reason.
fn errors_by_resource(exporter: &Exporter) -> BTreeMap<String, f64> {
    let metrics = exporter.metrics();
    Resource::ALL
        .into_iter()
        .map(|r| {
            let prefix = format!("misschedule_exporter_watch_errors_total{{resource=\"{}\",", r.as_str());
            let lines = metrics.lines().filter(|l| l.starts_with(&prefix));
            (r.as_str().to_owned(), lines.filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok()).sum())
        })
        .collect()
}

fn relists(exporter: &Exporter) -> BTreeMap<String, f64> {
    exporter.per_resource("misschedule_exporter_watch_events_total", ",type=\"init\"")
}

/// Compact etcd up to its current revision (the API server does this every 5 minutes),
/// through etcd's HTTP gateway. Returns that revision.
fn compact_etcd(endpoint: &str) -> i64 {
    let port: u16 = endpoint.rsplit(':').next().and_then(|p| p.parse().ok()).expect("etcd endpoint port");
    let (status, body) = http::request(port, "POST", "/v3/kv/range", Some(r#"{"key":"L3JlZ2lzdHJ5"}"#)).unwrap();
    assert_eq!(status, 200, "{body}");
    let header: Value = serde_json::from_str(&body).unwrap();
    let revision: i64 = header["header"]["revision"].as_str().and_then(|r| r.parse().ok()).expect("revision");
    let request = format!(r#"{{"revision":"{revision}","physical":true}}"#);
    let (status, body) = http::request(port, "POST", "/v3/kv/compaction", Some(&request)).unwrap();
    assert_eq!(status, 200, "{body}");
    revision
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn exporter_cut_off_and_expired_watches_resync_without_stale_series() {
    // Without the watch cache the API server serves watches from etcd, so compacting etcd
    // expires the exporter's resourceVersions, exactly as a long disconnection would.
    let cp = ControlPlane::start_with("expiry", "--watch-cache=false");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    scene(&admin, &READ).await;
    let pp = PostParams::default();
    admin.add_nodes(&["n3"], &[]).await;

    // The exporter reaches the API server only through a proxy the test can cut.
    let (proxy, kubeconfig) = Proxy::for_exporter(&cp).await;
    let exporter = Exporter::start_with(&kubeconfig, &["--watch-timeout-seconds", "5"], &cp.dir.join("exporter.log"));
    wait_until("ready", Duration::from_secs(30), || exporter.ready()).await;
    // A pod on every node first: a taint that comes before the pod keeps the pod away instead.
    let started = Instant::now();
    loop {
        let pods = admin.pods.list(&ListParams::default()).await.unwrap();
        if pods.items.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count() == 3 {
            break;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "daemon pods not on all three nodes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin.set_taints("n2", taint("dedicated", "db", "NoSchedule")).await;
    admin.set_taints("n3", taint("dedicated", "gpu", "NoSchedule")).await;
    let before: BTreeSet<_> = [
        ("agent".into(), "n2".into(), "taint_added".into(), "dedicated".into()),
        ("agent".into(), "n3".into(), "taint_added".into(), "dedicated".into()),
    ]
    .into();
    expect(&admin, &exporter, "before the cut", before.clone()).await;

    // Cut off, the exporter misses: a misscheduled pod deleted, a misscheduled node
    // deleted, and a drain taint added.
    proxy.cut();
    wait_until("/readyz 503 while cut off", Duration::from_secs(20), || !exporter.ready()).await;
    let pods = admin.pods.list(&ListParams::default()).await.unwrap();
    let on_n2 = pods.into_iter().find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("n2")).unwrap();
    let deleted_pod = on_n2.metadata.name.clone().unwrap();
    admin.pods.delete(&deleted_pod, &DeleteParams::default().grace_period(0)).await.unwrap();
    admin.nodes.delete("n3", &DeleteParams::default()).await.unwrap();
    admin.set_taints("n1", taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")).await;
    admin.resync().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(reported_rows(&exporter.metrics()), before, "the exporter is cut off: it serves the last known state");

    proxy.restore();
    // The next attempt comes when the backoff says: up to 30 s.
    let caught_up = wait_until("caught up after reconnecting", Duration::from_secs(40), || {
        reported_rows(&exporter.metrics()) == drain("n1")
    })
    .await;
    println!("exporter caught up {caught_up:?} after its connection was restored");
    expect(&admin, &exporter, "after reconnecting", drain("n1")).await;
    let metrics = exporter.metrics();
    assert!(!metrics.contains("node=\"n3\""), "series for the deleted node n3:\n{metrics}");
    assert!(!metrics.contains(&deleted_pod), "series for the deleted pod {deleted_pod}");
    wait_until("ready after reconnecting", Duration::from_secs(20), || exporter.ready()).await;

    // Watch expiry: writes the exporter does not watch move etcd on, compaction drops
    // every revision the exporter holds, and the next resumed watch gets 410 Gone.
    let relists_before = relists(&exporter);
    let expiries_before = exporter.per_resource("misschedule_exporter_watch_expiries_total", "");
    let errors_before = errors_by_resource(&exporter);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.client.clone(), NS);
    // Two writes: etcd keeps the compaction revision itself, and a watch resumes one past
    // the revision it holds.
    for name in ["unwatched-1", "unwatched-2"] {
        configmaps.create(&pp, &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()).await.unwrap();
    }
    let revision = compact_etcd(cp.get("ETCD_ENDPOINT"));
    println!("compacted etcd at revision {revision}");
    let mut stayed_ready = true;
    let expired = wait_until("every watch expired (410) and relisted", Duration::from_secs(30), || {
        stayed_ready &= exporter.ready();
        let (relisted, expiries) =
            (relists(&exporter), exporter.per_resource("misschedule_exporter_watch_expiries_total", ""));
        relisted.iter().all(|(r, n)| *n > relists_before[r]) && expiries.iter().all(|(r, n)| *n > expiries_before[r])
    })
    .await;
    println!("all four watches expired and relisted within {expired:?}");
    assert!(stayed_ready, "a routine 410 must not make the exporter unready");
    assert_eq!(errors_by_resource(&exporter), errors_before, "a 410 is not an error");
    // Relisted state: the same rows, once each, and still live.
    let metrics = exporter.metrics();
    let info: Vec<_> = metrics.lines().filter(|l| l.starts_with("daemonset_misscheduled_pod_info{")).collect();
    assert_eq!(info.len(), info.iter().collect::<BTreeSet<_>>().len(), "duplicate series after the relist");
    expect(&admin, &exporter, "after the relist", drain("n1")).await;
    admin.set_taints("n1", json!([])).await;
    expect(&admin, &exporter, "watching again after the relist", BTreeSet::new()).await;
    drop(proxy);
}
