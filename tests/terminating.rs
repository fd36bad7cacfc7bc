//! The scenes where the DaemonSet controller deletes pods, on a lab whose nodes take the
//! whole grace period to finish a delete, as a kubelet does with a container that ignores
//! SIGTERM (tests/lab/stages/pod-stop-at-grace.yaml). While the pods terminate, the
//! exporter must list each as misscheduled with its reason and key, agree with the
//! controller's `numberMisscheduled` (which counts terminating pods), and not call the
//! node uncovered: the DaemonSet no longer wants it.
//!
//! Set RECORD_SNAPSHOTS=DIR to write each scene, taken while its pods terminate, to DIR
//! (scripts/record-examples.sh: that is how five of examples/ are made; tests/examples.rs
//! checks them).

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use support::cluster::*;
use support::nfd::set_feature_on;
use support::scene::*;

/// Long enough for every step of a scene, short enough that a forgotten pod goes soon.
const GRACE_SECONDS: u32 = 120;

fn on_every_node(ds: &str, reason: &str, key: &str) -> BTreeSet<Row> {
    NODES.iter().map(|node| row(ds, node, reason, key)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn pods_the_controller_deletes_are_misscheduled_until_they_go() {
    let cp = ControlPlane::start_lab("terminating", &LabOptions { components: &["nfd"], ..Default::default() });
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    create_scene(&admin, Deletes::AtGraceEnd(GRACE_SECONDS)).await;
    let exporter = Exporter::spawn(&["--kubeconfig", cp.get("EXPORTER_KUBECONFIG")], Stdio::inherit());
    let record_dir = std::env::var_os("RECORD_SNAPSHOTS").map(PathBuf::from);
    let started = Instant::now();
    while !exporter.ready() {
        assert!(started.elapsed() < Duration::from_secs(30), "exporter never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    expect(&admin, &exporter, "baseline: all pods bound", BTreeSet::new()).await;

    let zone = |z: &str| {
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}]}}}}}}})
    };
    let selector = |disk: &str| json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": disk}}}}});
    for scene in
        ["noexecute-terminating", "label-drift", "nfd-label-removed", "daemonset-selector-changed", "affinity-changed"]
    {
        let expected = match scene {
            "noexecute-terminating" => {
                admin.set_taints("n3", json!([{"key": "evict", "value": "now", "effect": "NoExecute"}])).await;
                rows_on("n3", &ALL, "taint_added", "evict")
            }
            "label-drift" => {
                admin.patch_node("n2", json!({"metadata": {"labels": {"disk": null}}})).await;
                [row("ssd-agent", "n2", "label_drift", "disk")].into()
            }
            "nfd-label-removed" => {
                set_feature_on(&admin, &["n3"], AVX, None).await;
                [row("avx-agent", "n3", "nfd_change", AVX)].into()
            }
            "daemonset-selector-changed" => {
                admin.patch_daemonset("ssd-agent", selector("nvme")).await;
                on_every_node("ssd-agent", "daemonset_changed", "disk")
            }
            _ => {
                admin.patch_daemonset("zone-agent", zone("b")).await;
                on_every_node("zone-agent", "daemonset_changed", "zone")
            }
        };
        expect(&admin, &exporter, &format!("{scene}: pods terminating"), expected.clone()).await;
        let terminating = terminating_pods(&admin).await;
        assert_eq!(terminating.len(), expected.len(), "{scene}: {terminating:?}");
        let uncovered = samples(&exporter.metrics(), "daemonset_uncovered_node_info");
        assert!(uncovered.is_empty(), "{scene}: a node the DaemonSet left is not uncovered: {uncovered:?}");
        if let Some(dir) = &record_dir {
            Cluster::record(cp.get("ADMIN_KUBECONFIG"), dir, scene);
        }

        // Undone, and the terminating pods killed now rather than at the end of their grace.
        match scene {
            "noexecute-terminating" => admin.set_taints("n3", json!([])).await,
            "label-drift" => admin.patch_node("n2", json!({"metadata": {"labels": {"disk": "ssd"}}})).await,
            "nfd-label-removed" => set_feature_on(&admin, &["n3"], AVX, Some("true")).await,
            "daemonset-selector-changed" => admin.patch_daemonset("ssd-agent", selector("ssd")).await,
            _ => admin.patch_daemonset("zone-agent", zone("a")).await,
        }
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        for pod in terminating {
            let _ = admin.pods.delete(&pod, &now).await;
        }
        expect(&admin, &exporter, &format!("{scene}: undone"), BTreeSet::new()).await;
        for ds in ALL {
            admin.wait_bound(ds, NODES.len()).await;
        }
    }
}

/// The names of the pods in NS being deleted.
async fn terminating_pods(admin: &Cluster) -> Vec<String> {
    let pods = admin.pods.list(&ListParams::default()).await.unwrap().items;
    pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_some()).filter_map(|p| p.metadata.name).collect()
}
