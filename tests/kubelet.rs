//! The test kit's stand-in kubelet on the real control plane: it binds the pods the
//! DaemonSet controller creates and finishes the deletes the controller asks for, so that
//! a pod removed from a node that stopped being eligible is gone, as in a real cluster,
//! instead of Terminating forever.

mod support;

use std::time::{Duration, Instant};

use kube::api::ListParams;
use serde_json::json;
use support::cluster::*;
use support::kubelet::Kubelet;

/// (node, terminating) of each daemon pod in NS.
async fn pods(admin: &Cluster) -> Vec<(String, bool)> {
    let list = admin.pods.list(&ListParams::default()).await.unwrap();
    let mut pods: Vec<_> = list
        .into_iter()
        .map(|p| {
            let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
            (node, p.metadata.deletion_timestamp.is_some())
        })
        .collect();
    pods.sort();
    pods
}

async fn wait_for_pods(admin: &Cluster, step: &str, want: &[(&str, bool)]) -> Duration {
    let want: Vec<(String, bool)> = want.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect();
    let started = Instant::now();
    loop {
        let got = pods(admin).await;
        if got == want {
            println!("step {step:<45} ok after {:.1?}: {got:?}", started.elapsed());
            return started.elapsed();
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "{step}: want {want:?}, have {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: scripts/test.sh runs it"]
async fn the_stand_in_kubelet_binds_daemon_pods_and_finishes_deletes() {
    let cp = ControlPlane::start("kubelet");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    // The kubelet first, so that it binds the pods as soon as the controller makes them.
    let kubelet = Kubelet::start(admin.client.clone(), Duration::from_secs(1));
    agent_scene(&admin, &["n1", "n2"]).await;
    wait_for_pods(&admin, "a pod bound on each node", &[("n1", false), ("n2", false)]).await;
    assert_eq!(kubelet.bound(), 2);

    // An untolerated NoExecute taint: the controller deletes the pod at once, and with a
    // kubelet the delete finishes; no new pod comes, since the node is not eligible.
    admin.set_taints("n2", json!([{"key": "maintenance", "value": "x", "effect": "NoExecute"}])).await;
    let gone = wait_for_pods(&admin, "the pod on n2 deleted and gone", &[("n1", false)]).await;
    assert!(gone >= Duration::from_secs(1), "finished before the stand-in grace period: {gone:?}");
    assert_eq!(kubelet.finished(), 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pods(&admin).await, [("n1".to_owned(), false)], "n2 stays without its agent");

    // Taint removed: the controller creates a pod again, and the stand-in binds it.
    admin.set_taints("n2", json!([])).await;
    wait_for_pods(&admin, "coverage back on n2", &[("n1", false), ("n2", false)]).await;
    assert_eq!(kubelet.bound(), 3);
}
