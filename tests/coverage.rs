//! Lost coverage, driven through `Index::apply` with hand-built objects: a (DaemonSet,
//! node) pair whose misscheduled pod went, while the node stays and is still skipped.

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{self, Index};
use misschedule_exporter::k8s::slim::SlimPod;
use serde_json::json;
use support::*;

const GPU: &str = "feature.node.kubernetes.io/pci-10de.present";

/// (node, reason, key, manager, since) for every lost node, then losses by (reason, key).
type Lost = (Vec<(String, String, String, String, i64)>, Vec<(String, String, u64)>);

fn lost(index: &Index) -> Lost {
    let views = index.daemonsets();
    let nodes = views
        .iter()
        .flat_map(|v| v.lost_nodes())
        .map(|l| {
            let v = l.verdict;
            let manager = v.manager.as_deref().unwrap_or_default().to_owned();
            (l.node.to_string(), v.reason.to_string(), v.key.to_string(), manager, l.since)
        })
        .collect();
    let counts = views
        .iter()
        .flat_map(|v| v.losses())
        .map(|(reason, key, n)| (reason.to_string(), key.to_string(), n))
        .collect();
    (nodes, counts)
}

fn loss(node: &str, reason: &str, key: &str, since: i64) -> (String, String, String, String, i64) {
    (node.into(), reason.into(), key.into(), String::new(), since)
}

fn count(reason: &str, key: &str, n: u64) -> (String, String, u64) {
    (reason.into(), key.into(), n)
}

fn gpu_node(name: &str, gpu: bool) -> Node {
    node(name, if gpu { &[(GPU, "true")] } else { &[] }, &[])
}

/// A GPU agent selecting `GPU=true`, on n1 and n2, both with their pod.
fn gpu_cluster() -> (Index, Pod, Pod) {
    let ds = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    let (p1, p2) = (daemon_pod(&ds, "n1", "h", true), daemon_pod(&ds, "n2", "h", true));
    let index = cluster(
        vec![gpu_node("n1", true), gpu_node("n2", true)],
        vec![ds.clone()],
        vec![revision(&ds, "h")],
        vec![p1.clone(), p2.clone()],
    );
    (index, p1, p2)
}

fn terminating(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(from(json!("2026-05-31T23:59:00Z")));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    pod
}

#[test]
fn a_label_removal_deletes_the_pod_and_the_node_stays_lost_until_a_pod_is_back() {
    let (mut index, p1, _) = gpu_cluster();
    assert_eq!(lost(&index), (vec![], vec![]));
    // NFD drops the label: the pod is misscheduled, then the controller deletes it.
    index.set_now(NOW + 10);
    apply(&mut index, gpu_node("n1", false));
    assert_eq!(misscheduled(&index).len(), 1);
    assert_eq!(lost(&index), (vec![], vec![]), "misscheduled, not lost, while the pod is there");
    index.set_now(NOW + 11);
    apply(&mut index, terminating(p1.clone()));
    assert_eq!(lost(&index), (vec![], vec![]), "a terminating pod is still there");
    index.set_now(NOW + 40);
    delete(&mut index, terminating(p1.clone()));
    assert_eq!(misscheduled(&index), vec![], "nothing is misscheduled any more");
    assert_eq!(lost(&index), (vec![loss("n1", "nfd_change", GPU, NOW + 40)], vec![count("nfd_change", GPU, 1)]));
    // The label comes back: eligible, but uncovered until the controller makes the pod.
    index.set_now(NOW + 50);
    apply(&mut index, gpu_node("n1", true));
    assert_eq!(lost(&index).0.len(), 1, "still no agent on n1");
    apply(&mut index, p1.clone());
    assert_eq!(lost(&index), (vec![], vec![count("nfd_change", GPU, 1)]), "covered again; the counter stays");
    // It flaps: a second loss of the same key counts again.
    apply(&mut index, gpu_node("n1", false));
    delete(&mut index, p1);
    assert_eq!(lost(&index), (vec![loss("n1", "nfd_change", GPU, NOW + 50)], vec![count("nfd_change", GPU, 2)]));
}

#[test]
fn a_loss_ends_with_its_node_or_its_daemonset() {
    let (mut index, p1, p2) = gpu_cluster();
    for (n, p) in [("n1", &p1), ("n2", &p2)] {
        apply(&mut index, gpu_node(n, false));
        delete(&mut index, p.clone());
    }
    assert_eq!(lost(&index).0.len(), 2);
    delete(&mut index, gpu_node("n1", false));
    assert_eq!(lost(&index).0, vec![loss("n2", "nfd_change", GPU, NOW)], "a deleted node is not lost");
    // Recreated under the same name, it is a new node that never had the agent.
    apply(&mut index, gpu_node("n1", false));
    assert_eq!(lost(&index).0.len(), 1);
    delete(&mut index, daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}})));
    assert!(index.daemonsets().is_empty());
    // The same DaemonSet again is a new start: nothing lost, nothing counted.
    apply(&mut index, daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}})));
    assert_eq!(lost(&index), (vec![], vec![]));
}

#[test]
fn a_loss_is_forgotten_after_the_retention() {
    let mut index = Index::new(index::Config { lost_retention: 3600, ..Default::default() });
    index.set_now(NOW);
    let ds = daemonset("agent", json!({}));
    let pod = daemon_pod(&ds, "n1", "h", true);
    list(&mut index, vec![node("n1", &[], &[])]);
    list(&mut index, vec![ds]);
    list(&mut index, Vec::<k8s_openapi::api::apps::v1::ControllerRevision>::new());
    list(&mut index, vec![pod.clone()]);
    // An untolerated NoExecute taint: the controller deletes the pod at once.
    apply(&mut index, node("n1", &[], &["dedicated=infra:NoExecute"]));
    delete(&mut index, pod);
    assert_eq!(lost(&index).0, vec![loss("n1", "taint_added", "dedicated", NOW)]);
    let generation = index.generation();
    index.set_now(NOW + 3599);
    assert_eq!(lost(&index).0.len(), 1);
    assert_eq!(index.generation(), generation, "nothing changed yet");
    index.set_now(NOW + 3600);
    assert_eq!(lost(&index), (vec![], vec![count("taint_added", "dedicated", 1)]), "forgotten; still counted");
    assert!(index.generation() > generation, "readers see it go");
}

#[test]
fn only_a_misscheduled_pod_that_goes_is_a_loss() {
    // A drained node keeps its pod (NoSchedule): misscheduled, not lost; the drain itself
    // evicting it makes the node lost, as a drain.
    let ds = daemonset("agent", json!({}));
    let (p1, p2) = (daemon_pod(&ds, "n1", "h", true), daemon_pod(&ds, "n2", "h", true));
    let drained = node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1780271000:NoSchedule"]);
    let mut index = cluster(
        vec![drained, node("n2", &[], &[])],
        vec![ds.clone()],
        vec![revision(&ds, "h")],
        vec![p1.clone(), p2.clone()],
    );
    assert_eq!(lost(&index).0, vec![]);
    delete(&mut index, p1);
    assert_eq!(lost(&index).0, vec![loss("n1", "autoscaler_drain", "ToBeDeletedByClusterAutoscaler", NOW)]);
    // A pod deleted from a node it should run on is a restart, not a loss.
    delete(&mut index, p2);
    assert_eq!(lost(&index).0.len(), 1);
    // A node the DaemonSet never covered is not lost either.
    apply(&mut index, node("n3", &[], &["dedicated=infra:NoExecute"]));
    assert_eq!(lost(&index).0.len(), 1);
}

#[test]
fn a_daemonset_being_deleted_loses_nothing() {
    let (mut index, p1, _) = gpu_cluster();
    apply(&mut index, gpu_node("n1", false));
    let mut deleting = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    deleting.metadata.deletion_timestamp = Some(from(json!("2026-06-01T00:00:00Z")));
    apply(&mut index, deleting);
    delete(&mut index, p1);
    apply(&mut index, daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}})));
    assert_eq!(lost(&index), (vec![], vec![]), "its pods went with it");
}

#[test]
fn after_a_restart_a_terminating_pod_is_the_evidence() {
    // The exporter starts while the pod is being deleted from a node that lost its label:
    // misscheduled, and lost once the delete finishes, seen live.
    let ds = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    let pod = terminating(daemon_pod(&ds, "n1", "h", true));
    let mut index = cluster(vec![gpu_node("n1", false)], vec![ds.clone()], vec![revision(&ds, "h")], vec![pod.clone()]);
    assert_eq!(lost(&index).0, vec![]);
    index.set_now(NOW + 20);
    delete(&mut index, pod.clone());
    assert_eq!(lost(&index).0, vec![loss("n1", "nfd_change", GPU, NOW + 20)]);

    // The delete finished while the pod watch was down: the relist that shows it gone says
    // when the delete was asked for, the best evidence of when the agent stopped.
    let mut index = cluster(vec![gpu_node("n1", false)], vec![ds.clone()], vec![revision(&ds, "h")], vec![pod]);
    index.set_now(NOW + 300);
    index.apply(Event::<SlimPod>::Init).unwrap();
    index.apply(Event::<SlimPod>::InitDone).unwrap();
    // deletionTimestamp (NOW - 60) is when the grace period (30 s) ends.
    let deletion_requested = NOW - 90;
    assert_eq!(lost(&index).0, vec![loss("n1", "nfd_change", GPU, deletion_requested)]);

    // Without such a pod, what happened before the start is unknown: a skipped node
    // without a pod is just a node the DaemonSet does not want.
    let index = cluster(vec![gpu_node("n1", false)], vec![ds.clone()], vec![revision(&ds, "h")], vec![]);
    assert_eq!(lost(&index), (vec![], vec![]));
}

#[test]
fn each_loss_is_a_notice_but_a_daemonset_leaving_nodes_on_purpose() {
    use misschedule_exporter::publish::notice::{self, Kind};
    let ds = daemonset("agent", json!({}));
    let (p1, p2) = (daemon_pod(&ds, "n1", "h", true), daemon_pod(&ds, "n2", "h", true));
    let mut index = cluster(
        vec![node("n1", &[("pool", "a")], &[]), node("n2", &[("pool", "b")], &[])],
        vec![ds.clone()],
        vec![revision(&ds, "h")],
        vec![p1.clone(), p2.clone()],
    );
    // n1 gains a NoExecute taint; then the DaemonSet narrows to pool=a, leaving n2.
    apply(&mut index, node("n1", &[("pool", "a")], &["maintenance=x:NoExecute"]));
    delete(&mut index, p1);
    apply(&mut index, daemonset("agent", json!({"nodeSelector": {"pool": "a"}})));
    delete(&mut index, p2);
    let reasons: Vec<String> =
        lost(&index).0.into_iter().map(|(node, reason, ..)| format!("{node} {reason}")).collect();
    assert_eq!(reasons, ["n1 taint_added", "n2 daemonset_changed"]);
    let notices = notice::current(&index);
    let lost_nodes: Vec<&str> = notices.iter().filter(|n| n.kind == Kind::NodeLost).map(|n| &*n.node).collect();
    assert_eq!(lost_nodes, ["n1"], "no Event per node a DaemonSet leaves on purpose");
}

#[test]
fn a_relapse_within_the_second_is_a_new_episode_and_nothing_else_is() {
    use misschedule_exporter::publish::notice::{self, Kind, Notice};
    let (mut index, p1, _) = gpu_cluster();
    let notice_of = |index: &Index, kind: Kind| -> Vec<Notice> {
        notice::current(index).into_iter().filter(|n| n.kind == kind).collect()
    };
    index.set_now(NOW + 10);
    apply(&mut index, gpu_node("n1", false));
    let [misscheduled] = <[Notice; 1]>::try_from(notice_of(&index, Kind::Misscheduled)).unwrap();
    // Unrelated changes and a relist keep the episode.
    apply(&mut index, gpu_node("n3", true));
    list(&mut index, vec![gpu_node("n1", false), gpu_node("n2", true), gpu_node("n3", true)]);
    assert_eq!(notice_of(&index, Kind::Misscheduled), std::slice::from_ref(&misscheduled));
    // The label flaps back and away in the same second: the same Event, a later episode.
    apply(&mut index, gpu_node("n1", true));
    apply(&mut index, gpu_node("n1", false));
    let [relapse] = <[Notice; 1]>::try_from(notice_of(&index, Kind::Misscheduled)).unwrap();
    assert_eq!(relapse.event_id(), misscheduled.event_id());
    assert!(relapse.episode > misscheduled.episode);

    // The same for a lost node: lost, covered again and lost again within the second.
    delete(&mut index, p1.clone());
    let [lost] = <[Notice; 1]>::try_from(notice_of(&index, Kind::NodeLost)).unwrap();
    apply(&mut index, gpu_node("n3", false));
    assert_eq!(notice_of(&index, Kind::NodeLost), std::slice::from_ref(&lost));
    apply(&mut index, gpu_node("n1", true));
    apply(&mut index, p1.clone());
    apply(&mut index, gpu_node("n1", false));
    delete(&mut index, p1);
    let [again] = <[Notice; 1]>::try_from(notice_of(&index, Kind::NodeLost)).unwrap();
    assert_eq!(again.event_id(), lost.event_id());
    assert!(again.episode > lost.episode);
}
