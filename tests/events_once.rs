//! `--events` on the real control plane with two replicas, as the chart runs them for
//! availability, one of them restarted twice: exactly one Event object per (pod, verdict).
//! A new verdict after the restarts is written once; a pod that recovers and relapses the
//! same way is one repeat on that Event's series, counted once.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::cluster::*;

/// Long enough for both publishers to look at the index a few times (every 200 ms).
const SETTLE: Duration = Duration::from_secs(3);

/// The Misscheduled Events in NS: name → (note, series count).
async fn events(admin: &Cluster) -> BTreeMap<String, (String, i32)> {
    let events: Api<Event> = Api::namespaced(admin.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Misscheduled"))
        .map(|e| {
            let count = e.series.map_or(1, |s| s.count);
            (e.metadata.name.unwrap_or_default(), (e.note.unwrap_or_default(), count))
        })
        .collect()
}

/// Wait until the Events are exactly `want` (a note fragment and a series count each), then
/// check they stay so for `SETTLE`.
async fn expect_events(admin: &Cluster, step: &str, want: &[(&str, i32)]) {
    let matches = |got: &BTreeMap<String, (String, i32)>| {
        got.len() == want.len()
            && want.iter().all(|(words, count)| got.values().any(|(note, c)| note.contains(words) && c == count))
    };
    let started = Instant::now();
    loop {
        let got = events(admin).await;
        if matches(&got) {
            break;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "{step}: want {want:?}, have {got:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(SETTLE).await;
    let got = events(admin).await;
    assert!(matches(&got), "{step}: written again after settling: {got:#?}");
    println!(
        "step {step:<50} ok: {} Event objects, counts {:?}",
        got.len(),
        got.values().map(|v| v.1).collect::<Vec<_>>()
    );
}

fn replica(kubeconfig: &str, dir: &std::path::Path, name: &str) -> Exporter {
    Exporter::start_with(kubeconfig, &["--events"], &dir.join(format!("{name}.log")))
}

async fn ready(exporter: &Exporter) {
    let started = Instant::now();
    while !exporter.ready() {
        assert!(started.elapsed() < STEP_TIMEOUT, "replica not ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn two_replicas_and_restarts_write_each_event_once() {
    let cp = ControlPlane::start("events-once");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    agent_scene(&admin, &["n1", "n2"]).await;
    grant_exporter(&admin, &READ).await;
    grant_events(&admin).await;
    let dir: PathBuf = cp.dir.clone();
    let kubeconfig = cp.get("EXPORTER_KUBECONFIG").to_owned();
    let first = replica(&kubeconfig, &dir, "first");
    let mut second = replica(&kubeconfig, &dir, "second");
    expect(&admin, &first, "pods bound", Default::default()).await;
    ready(&second).await;

    // The cluster autoscaler drains n2: both replicas see the pod there become misscheduled.
    let drain = json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]);
    admin.set_taints("n2", drain.clone()).await;
    let drained = rows_on("n2", &["agent"], "autoscaler_drain", "ToBeDeletedByClusterAutoscaler");
    expect(&admin, &first, "n2 drained", drained.clone()).await;
    expect_events(&admin, "two replicas: one Event", &[("autoscaler_drain", 1)]).await;

    // The second replica restarts twice: it sees the same verdict as new each time.
    for restart in 1..=2 {
        drop(second);
        second = replica(&kubeconfig, &dir, &format!("second-{restart}"));
        ready(&second).await;
        expect(&admin, &second, "restarted replica synced", drained.clone()).await;
        expect_events(&admin, &format!("after restart {restart}: still one Event"), &[("autoscaler_drain", 1)]).await;
    }
    let exists = second.sample("misschedule_exporter_kube_events_total{result=\"exists\"}").unwrap_or_default();
    assert!(exists >= 1.0, "the restarted replica found the Event written: {exists}");

    // A new verdict after the restarts: a second taint that the drain no longer explains.
    let tainted = json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
    admin.set_taints("n1", tainted).await;
    let mut both = drained.clone();
    both.extend(rows_on("n1", &["agent"], "taint_added", "dedicated"));
    expect(&admin, &first, "n1 tainted", both).await;
    expect_events(&admin, "a new verdict: written once", &[("autoscaler_drain", 1), ("taint_added", 1)]).await;

    // n2's drain is called off, then starts again: the same verdict a second time is one
    // repeat on its Event, not a second object, and counted once by the two replicas.
    admin.set_taints("n2", json!([])).await;
    expect(&admin, &first, "drain called off", rows_on("n1", &["agent"], "taint_added", "dedicated")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    admin.set_taints("n2", drain).await;
    expect_events(&admin, "a relapse: one repeat", &[("autoscaler_drain", 2), ("taint_added", 1)]).await;
    for exporter in [&first, &second] {
        let failed = exporter.sample("misschedule_exporter_kube_events_total{result=\"failed\"}");
        assert_eq!(failed, Some(0.0), "no Event write failed");
    }
}
