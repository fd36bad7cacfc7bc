//! Why a node a DaemonSet should run on has no available pod: the pure rules, against what
//! the real kube-scheduler wrote (tests/fixtures/scheduler-messages, one file per version,
//! recorded by scripts/record-scheduler-messages.sh).

use std::path::Path;

use misschedule_exporter::rules::uncovered::scheduler_detail;

/// Each recorded DaemonSet's scene, and the reason the scheduler gives for its own node.
const EXPECTED: [(&str, &str); 5] = [
    ("memory", "Insufficient memory"),
    ("cpu", "Insufficient cpu"),
    ("both", "Insufficient cpu, Insufficient memory"),
    ("port-b", "node(s) didn't have free ports for the requested pod ports"),
    ("shy", "node(s) didn't match pod anti-affinity rules"),
];

#[test]
fn the_scheduler_detail_is_the_target_nodes_reason_in_every_recorded_version() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scheduler-messages");
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut seen = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let [daemonset, node, message] = line.splitn(3, '\t').collect::<Vec<_>>()[..] else {
                panic!("{}: not DaemonSet, node, message: {line}", path.display())
            };
            let (_, want) = EXPECTED.iter().find(|(ds, _)| *ds == daemonset).expect("a recorded scene");
            assert_eq!(scheduler_detail(message), *want, "{} {daemonset} on {node}", path.display());
            seen.push(daemonset);
        }
        for (ds, _) in EXPECTED {
            assert!(seen.contains(&ds), "{}: no message for {ds}", path.display());
        }
        versions.push(path.file_stem().unwrap().to_string_lossy().into_owned());
    }
    versions.sort();
    assert!(
        versions.iter().any(|v| v.starts_with("1.33.")) && versions.iter().any(|v| v.starts_with("1.37.")),
        "{versions:?}"
    );
}

mod support;

use k8s_openapi::api::core::v1::Pod;
use misschedule_exporter::index::Index;
use serde_json::json;
use support::*;

fn waiting(pod: Pod, reason: &str, message: &str) -> Pod {
    with_status(
        pod,
        json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-06-01T00:00:00Z"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": "2026-06-01T00:00:00Z"}],
        "containerStatuses": [{"name": "agent", "image": "registry.example/agent:2", "ready": false,
                               "state": {"waiting": {"reason": reason, "message": message}},
                               "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}}]}),
    )
}

fn unschedulable(pod: Pod, message: &str) -> Pod {
    with_status(
        pod,
        json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
         "lastTransitionTime": "2026-06-01T00:00:00Z"}]}),
    )
}

/// (node, pod, reason, detail) for every uncovered node.
fn uncovered(index: &Index) -> Vec<(String, String, String, String)> {
    index
        .daemonsets()
        .iter()
        .flat_map(|v| v.uncovered_nodes())
        .map(|u| {
            let pod = u.pod.map(|p| p.id.name()).unwrap_or_default();
            let detail = u.detail.map(|d| d.to_string()).unwrap_or_default();
            (u.node.to_string(), pod, u.reason.to_string(), detail)
        })
        .collect()
}

fn row(node: &str, pod: &str, reason: &str, detail: &str) -> (String, String, String, String) {
    (node.into(), pod.into(), reason.into(), detail.into())
}

#[test]
fn every_node_without_an_available_pod_has_one_reason() {
    let ds = daemonset("agent", json!({}));
    let pod = |node: &str| daemon_pod(&ds, node, "h", true);
    let nodes = ["n1", "n2", "n3", "n4", "n5"].map(|n| node(n, &[], &[])).to_vec();
    let pods = vec![
        ready(pod("n1")),
        waiting(pod("n2"), "ImagePullBackOff", "Back-off pulling image \"registry.example/agent:2\""),
        waiting(pod("n3"), "CrashLoopBackOff", "back-off 5m0s restarting failed container=agent pod=agent-n3_ns(6f1c)"),
        unschedulable(
            pod("n4"),
            "0/5 nodes are available: 1 Insufficient memory, 4 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
        ),
    ];
    let mut index = cluster(nodes, vec![ds.clone()], vec![revision(&ds, "h")], pods);
    assert_eq!(
        uncovered(&index),
        [
            row("n2", "agent-n2", "image_pull", "ImagePullBackOff: image registry.example/agent:2"),
            row("n3", "agent-n3", "crash_loop", "CrashLoopBackOff: container agent exited 2 (Error)"),
            row("n4", "agent-n4", "unschedulable", "Insufficient memory"),
            row("n5", "", "starting", ""),
        ]
    );
    // No pod for n5 past the grace: the controller cannot make one.
    index.set_now(NOW + 600);
    assert_eq!(uncovered(&index)[3], row("n5", "", "create_failed", ""));
    let counts = index.daemonsets()[0].uncovered_nodes_by_reason();
    assert_eq!(counts.iter().sum::<u32>(), 4);

    // Each recovers when its pod becomes Ready.
    for node in ["n2", "n3", "n4", "n5"] {
        apply(&mut index, ready(pod(node)));
    }
    assert_eq!(uncovered(&index), []);
    // A node the DaemonSet skips is no concern of it; one that goes takes its row along.
    apply(&mut index, waiting(pod("n2"), "CreateContainerConfigError", "secret \"agent-token\" not found"));
    assert_eq!(
        uncovered(&index),
        [row("n2", "agent-n2", "config_error", "CreateContainerConfigError: secret \"agent-token\" not found")]
    );
    delete(&mut index, node("n2", &[], &[]));
    assert_eq!(uncovered(&index), []);
}

#[test]
fn a_failed_create_says_why_each_node_without_a_pod_has_none() {
    use misschedule_exporter::index::{EVENTS_REFUSED, FailedCreateEvent};
    let ds = daemonset("agent", json!({}));
    let nodes = vec![node("n1", &[], &[]), node("n2", &[], &[])];
    let pods = vec![ready(daemon_pod(&ds, "n1", "h", true))];
    let mut index = cluster(nodes, vec![ds.clone()], vec![revision(&ds, "h")], pods);
    assert_eq!(uncovered(&index), [row("n2", "", "starting", "")]);
    let refused = FailedCreateEvent {
        uid: "e1".into(),
        daemonset: ds.metadata.uid.clone().unwrap(),
        message: "Error creating: pods \"agent-x7k2p\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1".into(),
        at: NOW,
        first: NOW,
    };
    // The controller tried since n2 went without a pod, and was refused: no grace.
    index.apply_failed_create(&refused);
    let detail = "forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1";
    assert_eq!(uncovered(&index), [row("n2", "", "create_failed", detail)]);
    // An older Event does not replace a newer one; a newer one does.
    index.apply_failed_create(&FailedCreateEvent {
        uid: "e0".into(),
        message: "old".into(),
        at: NOW - 60,
        ..refused.clone()
    });
    assert_eq!(uncovered(&index)[0].3, detail);
    // The Event expires: the node still has no pod past the grace, with nothing to say why.
    index.delete_failed_create("e1");
    index.set_now(NOW + 600);
    assert_eq!(uncovered(&index), [row("n2", "", "create_failed", "")]);
    // Events that cannot be read are said to be unread.
    index.failed_creates_refused();
    assert_eq!(uncovered(&index), [row("n2", "", "create_failed", EVENTS_REFUSED)]);
    // A relist brings back what exists, and the pod once made ends it.
    index.reset_failed_creates(&[refused]);
    assert_eq!(uncovered(&index), [row("n2", "", "create_failed", detail)]);
    apply(&mut index, ready(daemon_pod(&ds, "n2", "h", true)));
    assert_eq!(uncovered(&index), []);
}

#[test]
fn a_pod_counts_as_available_once_ready_for_longer_than_min_ready_seconds() {
    let ds = daemonset("agent", json!({}));
    let mut ds_slow = ds.clone();
    ds_slow.spec.as_mut().unwrap().min_ready_seconds = Some(30);
    let became_ready = |pod: Pod| {
        let mut pod = ready(pod);
        let at = rfc3339(NOW);
        pod.status.as_mut().unwrap().conditions.as_mut().unwrap()[1].last_transition_time = Some(from(json!(at)));
        pod
    };
    let pods = vec![became_ready(daemon_pod(&ds, "n1", "h", true))];
    let mut index = cluster(vec![node("n1", &[], &[])], vec![ds_slow.clone()], vec![revision(&ds, "h")], pods);
    assert_eq!(uncovered(&index), [row("n1", "agent-n1", "starting", "")], "Ready, not for 30 s yet");
    index.set_now(NOW + 30);
    assert_eq!(uncovered(&index).len(), 1, "podutil.IsPodAvailable wants longer than minReadySeconds");
    index.set_now(NOW + 31);
    assert_eq!(uncovered(&index), [], "by the clock alone");
    // Without minReadySeconds, Ready is available at once.
    apply(&mut index, ds);
    apply(&mut index, became_ready(daemon_pod(&ds_slow, "n1", "h", true)));
    assert_eq!(uncovered(&index), []);
}

/// `at` (unix seconds) as the API writes a time.
fn rfc3339(at: i64) -> String {
    jiff::Timestamp::from_second(at).unwrap().to_string()
}

#[test]
fn a_new_daemonset_is_starting_everywhere_until_its_pods_are_ready() {
    let ds = daemonset("agent", json!({"nodeSelector": {"pool": "a"}}));
    let nodes = vec![node("n1", &[("pool", "a")], &[]), node("n2", &[], &[])];
    let mut index = cluster(nodes, vec![], vec![], vec![]);
    apply(&mut index, ds.clone());
    assert_eq!(uncovered(&index), [row("n1", "", "starting", "")], "n2 is not wanted");
    let mut created = daemon_pod(&ds, "n1", "h", false);
    created.metadata.creation_timestamp = Some(from(json!("2026-06-01T00:00:00Z")));
    apply(&mut index, created);
    assert_eq!(uncovered(&index), [row("n1", "agent-n1", "starting", "")], "created, not bound yet");
    apply(&mut index, ready(daemon_pod(&ds, "n1", "h", true)));
    assert_eq!(uncovered(&index), []);
}

#[test]
fn every_surface_lists_them_apart_from_what_is_expected() {
    use misschedule_exporter::report::explain::{Selection, explain};
    use misschedule_exporter::report::scope::Origin;
    use misschedule_exporter::report::text::{Output, print};
    let ds = daemonset("agent", json!({}));
    let pod = |node: &str| daemon_pod(&ds, node, "h", true);
    let mut fresh = pod("n3");
    fresh.metadata.creation_timestamp = Some(from(json!("2026-06-01T00:00:00Z")));
    let pods = vec![ready(pod("n1")), waiting(pod("n2"), "ErrImagePull", "pull access denied"), fresh];
    let nodes = ["n1", "n2", "n3"].map(|n| node(n, &[], &[])).to_vec();
    let index = cluster(nodes, vec![ds.clone()], vec![revision(&ds, "h")], pods);
    let answer = explain(&index, &Selection::default(), &Origin::watched("cluster https://k8s", vec![]), NOW);
    let json = serde_json::to_value(&answer).unwrap();
    let rows: Vec<(&str, &str, &str, &str)> = json["uncovered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["node"].as_str().unwrap(),
                r["pod"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
                r["detail"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("n2", "agent-n2", "image_pull", "ErrImagePull: image registry.example/agent:2"),
            ("n3", "agent-n3", "starting", "")
        ]
    );
    assert!(answer.needs_action(), "an image that cannot be pulled needs someone");
    let table = print(&answer, Output::Table).unwrap();
    assert!(table.starts_with("No misscheduled daemon pods in any namespace: 1 DaemonSet on 3 nodes checked (cluster https://k8s). 1 node has no available pod and needs action: see below.\n"), "{table}");
    assert!(table.contains("\nNodes without an available pod, needing action:\nNAMESPACE  DAEMONSET  NODE  POD       REASON      DETAIL"), "{table}");
    assert!(
        table.contains("\n1 node without an available pod yet: pods on their way (expected; -o wide lists them).\n"),
        "{table}"
    );
    let wide = print(&answer, Output::Wide).unwrap();
    assert!(wide.contains("\nNodes without an available pod yet (expected: pods on their way):\n"), "{wide}");
    assert!(wide.contains("the image cannot be pulled"), "{wide}");
}

#[test]
fn every_uncovered_reason_has_a_runbook_section_the_page_links() {
    use misschedule_exporter::report::html::ReasonLink;
    use misschedule_exporter::rules::uncovered::Uncovered;
    let runbooks = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runbooks.md")).unwrap();
    for reason in Uncovered::ALL {
        let name = reason.as_str();
        assert!(runbooks.contains(&format!("\n### `{name}`\n")), "docs/runbooks.md has no section for {name}");
        let link = ReasonLink(name).to_string();
        assert!(link.contains(&format!("docs/runbooks.md#{name}\">{name}</a>")), "{link}");
        assert_eq!(link.contains("expected"), reason.expected(), "{link}");
    }
}

/// One event of the node-replacement sequence, each on its own watch stream.
#[derive(Clone, Copy, Debug)]
enum Step {
    NodeGone,
    NodeBack,
    OldPodTerminating,
    OldPodGone,
    NewPodPending,
    NewPodReady,
}

/// A node deleted and recreated under churn, as the lab's churn does it: the old pod goes
/// (terminating first, or at once) and the controller's new one starts, then turns Ready.
/// Node events and pod events come on two streams, so every interleaving that keeps each
/// stream's order is a possible history. Whatever the order, once everything has arrived the
/// index must say what one built from the final objects says: the node covered.
#[test]
fn a_replaced_pod_that_turns_ready_covers_its_node_in_every_order_the_streams_allow() {
    let ds = daemonset("agent", json!({"containers": [{"name": "agent", "image": "a"}]}));
    let n1 = node("n1", &[], &[]);
    let old = ready(daemon_pod(&ds, "n1", "h", true));
    let mut new = daemon_pod(&ds, "n1", "h", true);
    new.metadata.name = Some("agent-new".into());
    new.metadata.uid = Some("pod-agent-new".into());
    new.metadata.creation_timestamp = Some(from(json!("2026-01-01T00:10:00Z")));
    let new_pending = waiting(new.clone(), "ContainerCreating", "");
    let new_ready = ready(new.clone());
    let mut terminating = old.clone();
    terminating.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:09:00Z")));

    let node_steps = [Step::NodeGone, Step::NodeBack];
    for pod_steps in [
        vec![Step::OldPodGone, Step::NewPodPending, Step::NewPodReady],
        vec![Step::OldPodTerminating, Step::NewPodPending, Step::OldPodGone, Step::NewPodReady],
        vec![Step::OldPodTerminating, Step::NewPodPending, Step::NewPodReady, Step::OldPodGone],
    ] {
        let total = node_steps.len() + pod_steps.len();
        // Each interleaving: which positions the node stream takes.
        for first in 0..total {
            for second in first + 1..total {
                let (mut n, mut p) = (node_steps.iter(), pod_steps.iter());
                let order: Vec<Step> =
                    (0..total).map(|i| *if i == first || i == second { n.next() } else { p.next() }.unwrap()).collect();
                let mut index =
                    cluster(vec![n1.clone()], vec![ds.clone()], vec![revision(&ds, "h")], vec![old.clone()]);
                for step in &order {
                    match step {
                        Step::NodeGone => delete(&mut index, n1.clone()),
                        Step::NodeBack => apply(&mut index, n1.clone()),
                        Step::OldPodTerminating => apply(&mut index, terminating.clone()),
                        Step::OldPodGone => delete(&mut index, old.clone()),
                        Step::NewPodPending => apply(&mut index, new_pending.clone()),
                        Step::NewPodReady => apply(&mut index, new_ready.clone()),
                    }
                }
                let fresh =
                    cluster(vec![n1.clone()], vec![ds.clone()], vec![revision(&ds, "h")], vec![new_ready.clone()]);
                assert_eq!(uncovered(&index), uncovered(&fresh), "{order:?}");
            }
        }
    }
}

/// One event of the churn, as the exporter's four streams deliver them.
#[derive(Clone, Debug)]
enum ChurnOp {
    SetNode {
        node: usize,
        worker: bool,
        tainted: bool,
    },
    DeleteNode(usize),
    /// A template change: which nodes the DaemonSet wants.
    SetDaemonSet {
        ds: usize,
        worker_only: bool,
        tolerates: bool,
    },
    /// Pod `slot` of `ds` on `node`: two per pair, so that a replacement meets its
    /// predecessor. `health` indexes `HEALTHS`.
    SetPod {
        ds: usize,
        node: usize,
        slot: usize,
        health: usize,
        deleting: bool,
        terminal: bool,
    },
    DeletePod {
        ds: usize,
        node: usize,
        slot: usize,
    },
    /// A watch restarted: the whole resource listed again.
    RelistNodes,
    RelistPods,
}

const HEALTHS: usize = 4;

fn churn_op() -> impl proptest::strategy::Strategy<Value = ChurnOp> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0..3usize, any::<bool>(), proptest::bool::weighted(0.3))
            .prop_map(|(node, worker, tainted)| ChurnOp::SetNode { node, worker, tainted }),
        1 => (0..3usize).prop_map(ChurnOp::DeleteNode),
        1 => (0..2usize, proptest::bool::weighted(0.3), any::<bool>())
            .prop_map(|(ds, worker_only, tolerates)| ChurnOp::SetDaemonSet { ds, worker_only, tolerates }),
        6 => (0..2usize, 0..3usize, 0..2usize, 0..HEALTHS, proptest::bool::weighted(0.2), proptest::bool::weighted(0.1))
            .prop_map(|(ds, node, slot, health, deleting, terminal)| ChurnOp::SetPod { ds, node, slot, health, deleting, terminal }),
        2 => (0..2usize, 0..3usize, 0..2usize).prop_map(|(ds, node, slot)| ChurnOp::DeletePod { ds, node, slot }),
        1 => Just(ChurnOp::RelistNodes),
        1 => Just(ChurnOp::RelistPods),
    ]
}

fn churn_ds(i: usize, worker_only: bool, tolerates: bool) -> k8s_openapi::api::apps::v1::DaemonSet {
    let mut spec = json!({"containers": [{"name": "agent", "image": "a"}]});
    if worker_only {
        spec["nodeSelector"] = json!({"role": "worker"});
    }
    if tolerates {
        spec["tolerations"] = json!([{"key": "x", "operator": "Exists"}]);
    }
    daemonset(&format!("ds{i}"), spec)
}

fn churn_pod(ds: usize, node: usize, slot: usize, health: usize, deleting: bool, terminal: bool) -> Pod {
    let mut pod = daemon_pod(&churn_ds(ds, false, false), &format!("n{node}"), "h", health != 0);
    pod.metadata.name = Some(format!("ds{ds}-n{node}-{slot}"));
    pod.metadata.uid = Some(format!("pod-ds{ds}-n{node}-{slot}"));
    // The second slot is the replacement, made later.
    pod.metadata.creation_timestamp = Some(from(json!(format!("2026-01-01T00:0{slot}:00Z"))));
    let mut pod = match health {
        0 => pod,
        1 => waiting(pod, "ContainerCreating", ""),
        2 => ready(pod),
        _ => waiting(pod, "ImagePullBackOff", "back-off"),
    };
    if terminal && let Some(status) = pod.status.as_mut() {
        status.phase = Some("Failed".into());
    }
    if deleting {
        pod.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:09:00Z")));
    }
    pod
}

/// (DaemonSet, node, pod, reason, detail) for every uncovered node.
fn uncovered_everywhere(index: &Index) -> Vec<(String, (String, String, String, String))> {
    let views = index.daemonsets();
    let rows = views.iter().flat_map(|v| {
        let ds = v.ds.id.name.to_string();
        v.uncovered_nodes().into_iter().map(move |u| {
            let pod = u.pod.map(|p| p.id.name()).unwrap_or_default();
            let detail = u.detail.map(|d| d.to_string()).unwrap_or_default();
            (ds.clone(), (u.node.to_string(), pod, u.reason.to_string(), detail))
        })
    });
    let mut rows: Vec<_> = rows.collect();
    rows.sort();
    rows
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

    /// Nodes deleted and recreated, pods replaced (two per pair), health moving both ways,
    /// watches restarted, in any order: after every event the uncovered nodes are what an
    /// index built from the objects as they now are says.
    #[test]
    fn uncovered_nodes_follow_any_churn(ops in proptest::collection::vec(churn_op(), 1..60)) {
        use std::collections::BTreeMap;
        let mut nodes = BTreeMap::new();
        let mut daemonsets: BTreeMap<usize, _> = (0..2).map(|i| (i, churn_ds(i, false, false))).collect();
        let mut pods = BTreeMap::new();
        let mut live = cluster(vec![], daemonsets.values().cloned().collect(), vec![], vec![]);
        for op in &ops {
            match *op {
                ChurnOp::SetNode { node: i, worker, tainted } => {
                    let n = node(&format!("n{i}"), if worker { &[("role", "worker")] } else { &[] }, if tainted { &["x:NoSchedule"] } else { &[] });
                    apply(&mut live, n.clone());
                    nodes.insert(i, n);
                }
                ChurnOp::DeleteNode(i) => {
                    if let Some(n) = nodes.remove(&i) { delete(&mut live, n); }
                }
                ChurnOp::SetDaemonSet { ds, worker_only, tolerates } => {
                    let d = churn_ds(ds, worker_only, tolerates);
                    apply(&mut live, d.clone());
                    daemonsets.insert(ds, d);
                }
                ChurnOp::SetPod { ds, node, slot, health, deleting, terminal } => {
                    let p = churn_pod(ds, node, slot, health, deleting, terminal);
                    apply(&mut live, p.clone());
                    pods.insert((ds, node, slot), p);
                }
                ChurnOp::DeletePod { ds, node, slot } => {
                    if let Some(p) = pods.remove(&(ds, node, slot)) { delete(&mut live, p); }
                }
                ChurnOp::RelistNodes => list(&mut live, nodes.values().cloned().collect()),
                ChurnOp::RelistPods => list(&mut live, pods.values().cloned().collect()),
            }
            let fresh = cluster(
                nodes.values().cloned().collect(),
                daemonsets.values().cloned().collect(),
                vec![],
                pods.values().cloned().collect(),
            );
            proptest::prop_assert_eq!(uncovered_everywhere(&live), uncovered_everywhere(&fresh), "after {:?}", op);
        }
    }
}
