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

fn terminating(pod: Pod) -> Pod {
    deleted_at(pod, "2026-05-31T23:59:00Z")
}

/// The pod with its delete asked for, with a 30 s grace period ending at `deletion_timestamp`.
fn deleted_at(mut pod: Pod, deletion_timestamp: &str) -> Pod {
    pod.metadata.deletion_timestamp = Some(from(json!(deletion_timestamp)));
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
    // The controller asks at NOW + 11; the kubelet honours the 30 s grace period.
    let deleting = deleted_at(p1.clone(), "2026-06-01T00:00:41Z");
    index.set_now(NOW + 11);
    apply(&mut index, deleting.clone());
    assert_eq!(lost(&index), (vec![], vec![]), "a terminating pod is still there");
    index.set_now(NOW + 40);
    delete(&mut index, deleting);
    assert_eq!(misscheduled(&index), vec![], "nothing is misscheduled any more");
    // Coverage ended when the controller asked, not when the pod object went.
    assert_eq!(lost(&index), (vec![loss("n1", "nfd_change", GPU, NOW + 11)], vec![count("nfd_change", GPU, 1)]));
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
    // misscheduled, and lost once the delete finishes, since the delete was asked for.
    let ds = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    let pod = terminating(daemon_pod(&ds, "n1", "h", true));
    let mut index = cluster(vec![gpu_node("n1", false)], vec![ds.clone()], vec![revision(&ds, "h")], vec![pod.clone()]);
    assert_eq!(lost(&index).0, vec![]);
    index.set_now(NOW + 20);
    delete(&mut index, pod.clone());
    // deletionTimestamp (NOW - 60) is when the grace period (30 s) ends.
    let deletion_requested = NOW - 90;
    assert_eq!(lost(&index).0, vec![loss("n1", "nfd_change", GPU, deletion_requested)]);

    // The delete finished while the pod watch was down: the relist that shows it gone says
    // when the delete was asked for, the best evidence of when the agent stopped.
    let mut index = cluster(vec![gpu_node("n1", false)], vec![ds.clone()], vec![revision(&ds, "h")], vec![pod]);
    index.set_now(NOW + 300);
    index.apply(Event::<SlimPod>::Init).unwrap();
    index.apply(Event::<SlimPod>::InitDone).unwrap();
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

/// One watch event, on the stream of its kind.
#[derive(Clone)]
enum Step {
    Node(Node),
    Pod(Pod),
    PodGone(Pod),
    DaemonSet(k8s_openapi::api::apps::v1::DaemonSet),
}

/// Every way of merging `streams` that keeps each stream's own order: the exporter's
/// watches are separate, and any of them may be behind the others.
fn interleavings(streams: &[Vec<Step>]) -> Vec<Vec<Step>> {
    fn go(streams: &[Vec<Step>], next: &mut [usize], so_far: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        let mut done = true;
        for s in 0..streams.len() {
            if next[s] < streams[s].len() {
                done = false;
                so_far.push(streams[s][next[s]].clone());
                next[s] += 1;
                go(streams, next, so_far, out);
                next[s] -= 1;
                so_far.pop();
            }
        }
        if done {
            out.push(so_far.clone());
        }
    }
    let mut out = Vec::new();
    go(streams, &mut vec![0; streams.len()], &mut Vec::new(), &mut out);
    out
}

impl Step {
    fn label(&self) -> String {
        match self {
            Step::Node(n) => {
                let labelled = n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(GPU));
                format!("node {}", if labelled { "labelled" } else { "unlabelled" })
            }
            Step::Pod(p) => {
                let failed = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
                let deleting = p.metadata.deletion_timestamp.is_some();
                let name = p.metadata.name.as_deref().unwrap_or_default();
                format!("pod {name}{}{}", if deleting { " deleting" } else { "" }, if failed { " Failed" } else { "" })
            }
            Step::PodGone(p) => format!("pod {} gone", p.metadata.name.as_deref().unwrap_or_default()),
            Step::DaemonSet(_) => "daemonset status".into(),
        }
    }
}

fn replay(index: &mut Index, steps: &[Step]) {
    for step in steps.iter().cloned() {
        match step {
            Step::Node(n) => apply(index, n),
            Step::Pod(p) => apply(index, p),
            Step::PodGone(p) => delete(index, p),
            Step::DaemonSet(d) => apply(index, d),
        }
    }
}

fn failed(mut pod: Pod) -> Pod {
    pod.status = Some(from(json!({"phase": "Failed"})));
    pod
}

/// NFD drops the label a DaemonSet selects on; the controller deletes the pod (a kubelet
/// may mark it Failed first); NFD puts the label back once the pod is gone; the controller
/// makes a new pod. Live, 4 runs in 5 missed such a loss. Replayed in every order the
/// three streams can arrive in, each of them counts the one loss, with the label as the
/// key, and ends covered.
#[test]
fn a_loss_is_counted_whatever_order_the_streams_deliver_it_in() {
    let ds = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    let mut reported = ds.clone();
    reported.status = Some(from(json!({"numberMisscheduled": 1, "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1, "numberReady": 1})));
    let old = daemon_pod(&ds, "n1", "h", true);
    // Asked for in the same second as everything else: the order is all that differs.
    let deleting = deleted_at(old.clone(), "2026-06-01T00:00:30Z");
    let mut new = daemon_pod(&ds, "n1", "h", true);
    new.metadata.name = Some("gpu-agent-n1-new".into());
    new.metadata.uid = Some("pod-gpu-agent-n1-new".into());

    for kubelet_marks_failed in [false, true] {
        let mut pods = vec![Step::Pod(deleting.clone())];
        if kubelet_marks_failed {
            pods.push(Step::Pod(failed(deleting.clone())));
        }
        pods.extend([Step::PodGone(deleting.clone()), Step::Pod(new.clone())]);
        let nodes = vec![Step::Node(gpu_node("n1", false)), Step::Node(gpu_node("n1", true))];
        let daemonsets = vec![Step::DaemonSet(reported.clone())];
        let orders = interleavings(&[nodes, pods, daemonsets]);
        assert_eq!(orders.len(), if kubelet_marks_failed { 105 } else { 60 });
        for (i, order) in orders.iter().enumerate() {
            let mut index =
                cluster(vec![gpu_node("n1", true)], vec![ds.clone()], vec![revision(&ds, "h")], vec![old.clone()]);
            replay(&mut index, order);
            let order: Vec<String> = order.iter().map(Step::label).collect();
            let position = |label: &str| order.iter().position(|l| l == label);
            // The node stream so far behind that the new pod came before the label's removal:
            // the index saw the old pod deleted from a node it thought eligible, then replaced,
            // which a restart of the agent also looks like.
            let unknowable = position("pod gpu-agent-n1-new") < position("node unlabelled");
            let expected = if unknowable { vec![] } else { vec![count("nfd_change", GPU, 1)] };
            assert_eq!(lost(&index), (vec![], expected), "order {i}: {}", order.join(", "));
        }
    }
}

#[test]
fn a_pod_gone_from_a_node_that_stays_eligible_is_no_loss() {
    // A restart of the agent: deleted and replaced, the node never skipped.
    let (mut index, p1, _) = gpu_cluster();
    delete(&mut index, terminating(p1.clone()));
    let mut new = daemon_pod(&daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}})), "n1", "h", true);
    new.metadata.uid = Some("pod-new".into());
    apply(&mut index, new);
    // The label goes later, with the new pod there: misscheduled, not lost.
    apply(&mut index, gpu_node("n1", false));
    assert_eq!(misscheduled(&index).len(), 1);
    assert_eq!(lost(&index), (vec![], vec![]));
}

#[test]
fn a_daemonset_edit_seen_after_its_pod_went_is_a_loss_it_explains() {
    // The DaemonSet stream is behind: its pod on n1 is gone before the index sees the
    // nodeSelector that no longer matches n1.
    let (mut index, p1, _) = gpu_cluster();
    index.set_now(NOW + 5);
    let deleting = deleted_at(p1, "2026-06-01T00:00:33Z");
    apply(&mut index, deleting.clone());
    delete(&mut index, deleting);
    assert_eq!(lost(&index), (vec![], vec![]), "n1 is still eligible, as far as the index knows");
    apply(&mut index, daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true", "zone": "a"}})));
    // n2 keeps its pod: misscheduled there, not lost.
    let lost_since_delete_request = loss("n1", "daemonset_changed", "zone", NOW + 3);
    assert_eq!(lost(&index), (vec![lost_since_delete_request], vec![count("daemonset_changed", "zone", 1)]));
}

#[test]
fn a_pod_deleted_long_after_its_episode_ended_is_no_loss() {
    // The label flapped while the pod stayed; an hour later someone deletes the pod.
    let (mut index, p1, _) = gpu_cluster();
    apply(&mut index, gpu_node("n1", false));
    apply(&mut index, gpu_node("n1", true));
    let deleting = deleted_at(p1.clone(), "2026-06-01T01:00:30Z");
    apply(&mut index, deleting.clone());
    delete(&mut index, deleting);
    assert_eq!(lost(&index), (vec![], vec![]), "a delete outside the episode says nothing about it");
    // The same pod deleted within the episode (the pod stream behind): the controller's.
    let (mut index, p1, _) = gpu_cluster();
    apply(&mut index, gpu_node("n1", false));
    apply(&mut index, gpu_node("n1", true));
    let deleting = deleted_at(p1, "2026-06-01T00:00:30Z");
    apply(&mut index, deleting.clone());
    delete(&mut index, deleting);
    assert_eq!(lost(&index), (vec![loss("n1", "nfd_change", GPU, NOW)], vec![count("nfd_change", GPU, 1)]));
}

#[test]
fn a_misscheduled_pod_being_deleted_says_its_node_is_about_to_lose_the_agent() {
    use misschedule_exporter::report::explain::{Selection, explain};
    use misschedule_exporter::report::scope::Origin;
    let (mut index, p1, _) = gpu_cluster();
    apply(&mut index, gpu_node("n1", false));
    let fix = |index: &Index| {
        let answer = explain(index, &Selection::default(), &Origin::watched("test", vec![]), NOW);
        answer.misscheduled.iter().map(|r| r.fix.clone()).collect::<Vec<_>>()
    };
    let before = fix(&index);
    assert!(before[0].starts_with("node-feature-discovery no longer reports"), "{before:?}");
    apply(&mut index, deleted_at(p1, "2026-06-01T00:00:30Z"));
    let deleting = fix(&index);
    assert_eq!(
        deleting,
        [format!(
            "the pod is being deleted: n1 is about to lose its agent (then listed under lost nodes); {}",
            before[0]
        )]
    );
}

#[test]
fn a_restart_takes_back_the_losses_its_events_told_while_they_still_hold() {
    use misschedule_exporter::index::{PastLoss, Restored};
    use misschedule_exporter::rules::reason::Reason;
    // After the restart: n1 lost its GPU label and its pod, n2 has both, n3 lost the label
    // and has a pod again (misscheduled), n4 is gone.
    let ds = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}}));
    let index_with = |pods| {
        cluster(
            vec![gpu_node("n1", false), gpu_node("n2", true), gpu_node("n3", false)],
            vec![ds.clone()],
            vec![revision(&ds, "h")],
            pods,
        )
    };
    let mut index = index_with(vec![daemon_pod(&ds, "n2", "h", true), daemon_pod(&ds, "n3", "h", true)]);
    assert_eq!(lost(&index), (vec![], vec![]), "a fresh start knows no loss");
    let told = |node: &str| PastLoss {
        daemonset: ds.metadata.uid.clone().unwrap(),
        node: node.into(),
        reason: Reason::NfdChange,
        key: GPU.into(),
        manager: Some("nfd-master".into()),
        at: NOW - 120,
    };
    assert_eq!(index.restore_loss(&told("n1")), Restored::Lost);
    let restored =
        (vec![("n1".to_owned(), "nfd_change".to_owned(), GPU.to_owned(), "nfd-master".to_owned(), NOW - 120)], vec![]);
    assert_eq!(lost(&index), restored, "the loss is back, with its verdict and time; no counter moves");
    assert_eq!(index.restore_loss(&told("n1")), Restored::Moot, "taken back once");
    assert!(matches!(index.restore_loss(&told("n2")), Restored::Covered(id) if &*id.name == "gpu-agent"));
    assert_eq!(index.restore_loss(&told("n3")), Restored::Moot, "misscheduled again: told as such");
    assert_eq!(index.restore_loss(&told("n4")), Restored::Moot, "the node is gone");
    assert_eq!(index.restore_loss(&PastLoss { daemonset: "another".into(), ..told("n1") }), Restored::Moot);
    // From then on it is a loss like any other: the pod back ends it.
    apply(&mut index, gpu_node("n1", true));
    apply(&mut index, daemon_pod(&ds, "n1", "h", true));
    assert_eq!(lost(&index), (vec![], vec![]));
}
