//! The shipped `examples/` were recorded from the real control plane. On each,
//! our per-DaemonSet totals must equal the `status.numberMisscheduled` the real
//! controller wrote, and every pod must get the reason the scene was made for.

use std::collections::BTreeSet;
use std::path::PathBuf;

use misschedule_exporter::index::Index;
use misschedule_exporter::source::snapshot::Snapshot;

const AVX: &str = "feature.node.kubernetes.io/cpu-cpuid.AVX";

fn load(name: &str) -> Index {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    let mut index = Index::default();
    index.set_now(misschedule_exporter::clock::unix_now());
    Snapshot::read_files(&[path]).unwrap().load_into(&mut index, &[]).unwrap();
    index
}

fn rows(index: &Index) -> BTreeSet<(String, String, String, String)> {
    index
        .daemonsets()
        .iter()
        .flat_map(|ds| ds.misscheduled_pods().into_iter().map(move |p| (ds.ds.id.name.to_string(), p)))
        .map(|(ds, p)| (ds, p.node.to_string(), p.classification.reason.to_string(), p.classification.key.to_string()))
        .collect()
}

fn on(node: &str, dss: &[&str], reason: &str, key: &str) -> BTreeSet<(String, String, String, String)> {
    dss.iter().map(|ds| (ds.to_string(), node.to_string(), reason.to_string(), key.to_string())).collect()
}

const ALL: [&str; 4] = ["avx-agent", "datadog-agent", "ssd-agent", "zone-agent"];

#[test]
fn every_example_matches_the_controller_status() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let index = load(&name);
        for view in index.daemonsets() {
            let status = view.ds.status.expect("recorded DaemonSets have a status");
            assert_eq!(
                view.misscheduled_node_count() as i64,
                status.number_misscheduled,
                "{name}: {}",
                view.ds.id.name
            );
            let by_reason: u32 = view.misscheduled_nodes_by_reason().iter().sum();
            assert_eq!(i64::from(by_reason), status.number_misscheduled, "{name}: {} by reason", view.ds.id.name);
            assert_eq!(
                view.eligible_nodes() as i64,
                status.desired_number_scheduled,
                "{name}: {} desired",
                view.ds.id.name
            );
        }
        checked += 1;
    }
    assert!(checked >= 9, "expected the recorded examples, found {checked}");
}

#[test]
fn yaml_and_json_recordings_of_a_scene_agree() {
    // Recorded seconds apart from the same scene: the same pods, nodes, reasons and keys.
    assert_eq!(rows(&load("cluster-autoscaler-drain.yaml")), rows(&load("cluster-autoscaler-drain.json")));
}

#[test]
fn every_example_has_its_reason() {
    let drain = "ToBeDeletedByClusterAutoscaler";
    assert_eq!(rows(&load("cluster-autoscaler-drain.json")), on("n1", &ALL, "autoscaler_drain", drain));
    assert_eq!(
        rows(&load("taint-added.json")),
        on("n2", &["avx-agent", "datadog-agent", "zone-agent"], "taint_added", "dedicated")
    );
    let mut tol = on("n2", &["avx-agent", "datadog-agent", "zone-agent"], "taint_added", "dedicated");
    tol.extend(on("n2", &["ssd-agent"], "daemonset_changed", "dedicated"));
    assert_eq!(rows(&load("toleration-removed.json")), tol);
    assert_eq!(rows(&load("noexecute-terminating.json")), on("n3", &ALL, "taint_added", "evict"));
    assert_eq!(rows(&load("label-drift.json")), on("n2", &["ssd-agent"], "label_drift", "disk"));
    assert_eq!(rows(&load("nfd-label-removed.json")), on("n3", &["avx-agent"], "nfd_change", AVX));
    let all_nodes = |ds: &str, key: &str| -> BTreeSet<_> {
        ["n1", "n2", "n3"].iter().flat_map(|n| on(n, &[ds], "daemonset_changed", key)).collect()
    };
    assert_eq!(rows(&load("daemonset-selector-changed.json")), all_nodes("ssd-agent", "disk"));
    assert_eq!(rows(&load("affinity-changed.json")), all_nodes("zone-agent", "zone"));
}

#[test]
fn drain_since_comes_from_the_autoscaler_taint_value() {
    let index = load("cluster-autoscaler-drain.json");
    // The recorder wrote the unix time into the taint; every pod's since must be exactly that.
    let taint_value = load_taint_value();
    for view in index.daemonsets() {
        for pod in view.misscheduled_pods() {
            assert_eq!(pod.since, taint_value, "{}", pod.pod.id);
        }
    }
}

fn load_taint_value() -> i64 {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/cluster-autoscaler-drain.json");
    let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "Node")
        .flat_map(|n| n["spec"]["taints"].as_array().cloned().unwrap_or_default())
        .find(|t| t["key"] == "ToBeDeletedByClusterAutoscaler")
        .and_then(|t| t["value"].as_str()?.parse().ok())
        .unwrap()
}
