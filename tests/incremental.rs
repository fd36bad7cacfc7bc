//! The index is updated one event at a time. Whatever the order of events, it
//! must end up saying exactly what an index built from the final objects says.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use misschedule_exporter::index::Index;
use proptest::prelude::*;
use serde_json::json;
use support::*;

const TAINTS: [&str; 4] =
    ["x:NoSchedule", "y:NoExecute", "ToBeDeletedByClusterAutoscaler=1:NoSchedule", "z:PreferNoSchedule"];

#[derive(Clone, Debug)]
enum Op {
    SetNode { node: usize, worker: bool, taints: [bool; 4] },
    DeleteNode(usize),
    SetDaemonSet { ds: usize, worker_only: bool, tolerate_x: bool },
    DeleteDaemonSet(usize),
    SetPod { ds: usize, node: usize, bound: bool, matches: bool },
    DeletePod { ds: usize, node: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, any::<bool>(), any::<[bool; 4]>()).prop_map(|(node, worker, taints)| Op::SetNode { node, worker, taints }),
        1 => (0..3usize).prop_map(Op::DeleteNode),
        2 => (0..2usize, any::<bool>(), any::<bool>()).prop_map(|(ds, worker_only, tolerate_x)| Op::SetDaemonSet { ds, worker_only, tolerate_x }),
        1 => (0..2usize).prop_map(Op::DeleteDaemonSet),
        3 => (0..2usize, 0..4usize, any::<bool>(), any::<bool>()).prop_map(|(ds, node, bound, matches)| Op::SetPod { ds, node, bound, matches }),
        1 => (0..2usize, 0..4usize).prop_map(|(ds, node)| Op::DeletePod { ds, node }),
    ]
}

fn make_node(i: usize, worker: bool, taints: [bool; 4]) -> Node {
    let on: Vec<&str> = TAINTS.iter().zip(taints).filter(|(_, on)| *on).map(|(t, _)| *t).collect();
    node(&format!("n{i}"), if worker { &[("role", "worker")] } else { &[] }, &on)
}

fn make_ds(j: usize, worker_only: bool, tolerate_x: bool) -> DaemonSet {
    let mut spec = json!({});
    if worker_only {
        spec["nodeSelector"] = json!({"role": "worker"});
    }
    if tolerate_x {
        spec["tolerations"] = json!([{"key": "x", "operator": "Exists"}]);
    }
    daemonset(&format!("ds{j}"), spec)
}

fn make_pod(ds: &DaemonSet, node: usize, bound: bool, matches: bool) -> Pod {
    let mut pod = daemon_pod(ds, &format!("n{node}"), "h", bound);
    if !matches {
        pod.metadata.labels.as_mut().unwrap().insert("app".into(), "released".into());
    }
    pod
}

/// Everything the metrics are made of, except timestamps.
fn observable(index: &Index) -> Vec<String> {
    let mut out = misscheduled(index).into_iter().map(|r| format!("{r:?}")).collect::<Vec<_>>();
    for view in index.daemonsets() {
        out.push(format!(
            "{} eligible={} misscheduled={} by_reason={:?} ineligible={:?}",
            view.ds.id.name,
            view.eligible_nodes(),
            view.misscheduled_node_count(),
            view.misscheduled_nodes_by_reason(),
            view.ineligible_nodes()
        ));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn incremental_equals_from_scratch(ops in proptest::collection::vec(op(), 1..40)) {
        let mut live = cluster(vec![], vec![], vec![], vec![]);
        let mut nodes = BTreeMap::new();
        let mut daemonsets = BTreeMap::new();
        let mut pods = BTreeMap::new();
        for op in ops {
            match op {
                Op::SetNode { node, worker, taints } => {
                    let n = make_node(node, worker, taints);
                    apply(&mut live, n.clone());
                    nodes.insert(node, n);
                }
                Op::DeleteNode(node) => {
                    if let Some(n) = nodes.remove(&node) { delete(&mut live, n); }
                }
                Op::SetDaemonSet { ds, worker_only, tolerate_x } => {
                    let d = make_ds(ds, worker_only, tolerate_x);
                    apply(&mut live, d.clone());
                    daemonsets.insert(ds, d);
                }
                Op::DeleteDaemonSet(ds) => {
                    if let Some(d) = daemonsets.remove(&ds) { delete(&mut live, d); }
                }
                Op::SetPod { ds, node, bound, matches } => {
                    // Pods reference their DaemonSet by UID, which does not need to exist.
                    let p = make_pod(&make_ds(ds, false, false), node, bound, matches);
                    apply(&mut live, p.clone());
                    pods.insert((ds, node), p);
                }
                Op::DeletePod { ds, node } => {
                    if let Some(p) = pods.remove(&(ds, node)) { delete(&mut live, p); }
                }
            }
        }
        let fresh = cluster(
            nodes.into_values().collect(),
            daemonsets.into_values().collect(),
            Vec::<ControllerRevision>::new(),
            pods.into_values().collect(),
        );
        prop_assert_eq!(observable(&live), observable(&fresh));
    }
}
