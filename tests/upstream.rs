//! Cases ported from upstream's own unit tests, one test function per upstream test
//! (named in each doc comment). The objects and expected results carry over; the code
//! is ours. Where we follow a later controller than the test's, or deliberately differ,
//! the case says so.
//!
//! Upstream's sync tests count the pods the controller creates and deletes. Here the
//! same facts are read from the status we compute, for the DaemonSet under test:
//! creates = `desired - scheduled`, and the deletes of misscheduled pods are the
//! misscheduled pods on nodes where `shouldContinueRunning` is false.

mod support;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use misschedule_exporter::index::Index;
use misschedule_exporter::k8s::convert::{self, target_node_name};
use misschedule_exporter::k8s::slim::SlimPod;
use misschedule_exporter::model::interner::Interner;
use misschedule_exporter::rules::eligibility::should_run;
use serde_json::{Value, json};
use support::{cluster, from, misscheduled};

const DS_LABELS: &[(&str, &str)] = &[("name", "simple-daemon"), ("type", "production")];
const DS_LABELS2: &[(&str, &str)] = &[("name", "simple-daemon"), ("type", "test")];
const NODE_LABELS: &[(&str, &str)] = &[("color", "blue"), ("speed", "fast")];
const NODE_LABELS2: &[(&str, &str)] = &[("color", "red"), ("speed", "fast")];

fn map(pairs: &[(&str, &str)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
}

/// `newDaemonSet(name)` in namespace `default`, selecting `selector`, with `spec` as its template's spec.
fn new_daemonset(name: &str, selector: &[(&str, &str)], spec: Value) -> DaemonSet {
    from(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"selector": {"matchLabels": map(selector)},
                 "template": {"metadata": {"labels": map(DS_LABELS)}, "spec": spec}}
    }))
}

fn new_node(name: &str, labels: &[(&str, &str)]) -> Node {
    support::node(name, labels, &[])
}

/// `newPod(name, node, labels, ds)`: the DaemonSet's template spec when given, bound to
/// `node`, controlled by `ds`.
fn new_pod(name: &str, node: &str, labels: &[(&str, &str)], ds: Option<&DaemonSet>) -> Pod {
    let owners = ds.map(|ds| {
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds.metadata.name,
                "uid": ds.metadata.uid, "controller": true}])
    });
    let mut spec = match ds.and_then(|ds| ds.spec.as_ref()?.template.spec.as_ref()) {
        Some(template) => serde_json::to_value(template).unwrap(),
        None => json!({}),
    };
    spec["nodeName"] = json!(node);
    from(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": map(labels),
                     "creationTimestamp": "2026-01-01T00:00:00Z", "ownerReferences": owners},
        "spec": spec
    }))
}

/// `addPods(store, node, labels, ds, n)`.
fn add_pods(pods: &mut Vec<Pod>, node: &str, labels: &[(&str, &str)], ds: &DaemonSet, n: usize) {
    for _ in 0..n {
        let name = format!("{node}-{}", pods.len());
        pods.push(new_pod(&name, node, labels, Some(ds)));
    }
}

fn nodes(from: usize, count: usize, labels: &[(&str, &str)]) -> Vec<Node> {
    (from..from + count).map(|i| new_node(&format!("node-{i}"), labels)).collect()
}

/// What the controller would write for the DaemonSet named `name`:
/// (desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, misscheduled pods).
fn status(index: &Index, name: &str) -> Option<(usize, usize, usize, usize)> {
    let views = index.daemonsets();
    let view = views.iter().find(|v| &*v.ds.id.name == name)?;
    Some((
        view.eligible_nodes(),
        view.scheduled_nodes(),
        view.misscheduled_node_count(),
        view.misscheduled_pods().len(),
    ))
}

fn sync(nodes: Vec<Node>, daemonsets: Vec<DaemonSet>, pods: Vec<Pod>) -> Index {
    cluster(nodes, daemonsets, vec![], pods)
}

/// `NodeShouldRunDaemonPod(node, ds)` as (shouldRun, shouldContinueRunning).
fn node_should_run(spec: Value, node: &Node) -> (bool, bool) {
    let mut interner = Interner::default();
    let ds = convert::daemonset(&new_daemonset("ds", DS_LABELS, spec), &mut interner).unwrap();
    let node = convert::node(&node.clone().into(), &mut interner).unwrap();
    match should_run(&node, &ds.template) {
        None => (true, true),
        Some(skip) => (false, skip.should_continue_running()),
    }
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn resources(node_name: &str, memory: &str, cpu: &str) -> Value {
    json!({"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"memory": memory, "cpu": cpu}}}]})
}

const RUN: (bool, bool) = (true, true);
const KEEP: (bool, bool) = (false, true);
const EVICT: (bool, bool) = (false, false);

/// daemon_controller_test.go `TestNodeShouldRunDaemonPod`. Resource and host-port
/// predicates are gone from the controller (the scheduler handles them), so those cases
/// run; an unschedulable node still runs daemon pods.
#[test]
fn test_node_should_run_daemon_pod() {
    let node = new_node("test-node", DS_LABELS);
    let host_port = json!({"containers": [{"name": "c", "ports": [{"hostPort": 666, "containerPort": 666}]}]});
    let cases: Vec<(&str, Value, (bool, bool))> = vec![
        ("ShouldRunDaemonPod", resources("", "50M", "0.5"), RUN),
        ("InsufficientResourceError", resources("", "200M", "0.5"), RUN),
        ("ErrPodNotMatchHostName", resources("other-node", "50M", "0.5"), EVICT),
        ("ErrPodNotFitsHostPorts", host_port, RUN),
        ("ErrNodeSelectorNotMatch", json!({"nodeSelector": map(DS_LABELS2)}), EVICT),
        ("ShouldRunDaemonPod (nodeSelector)", json!({"nodeSelector": map(DS_LABELS)}), RUN),
        ("ErrPodAffinityNotMatch", affinity(json!([{"matchExpressions": [req("type", "In", &["test"])]}])), EVICT),
        (
            "ShouldRunDaemonPod (affinity)",
            affinity(json!([{"matchExpressions": [req("type", "In", &["production"])]}])),
            RUN,
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(node_should_run(spec, &node), want, "{name}");
    }
    let mut unschedulable = node.clone();
    unschedulable.spec.get_or_insert_default().unschedulable = Some(true);
    assert_eq!(
        node_should_run(resources("", "50M", "0.5"), &unschedulable),
        RUN,
        "ShouldRunDaemonPodOnUnschedulableNode"
    );
}

/// The sync tests of daemon_controller_test.go, as the status they imply.
#[test]
fn test_sync_daemon_sets_by_node_selection() {
    let ds = |spec: Value| new_daemonset("foo", DS_LABELS, spec);
    let plain_and_labelled = || [nodes(0, 4, &[]), nodes(4, 3, NODE_LABELS)].concat();
    // TestSimpleDaemonSetLaunchesPods: 5 creates.
    assert_eq!(status(&sync(nodes(0, 5, &[]), vec![ds(json!({}))], vec![]), "foo"), Some((5, 0, 0, 0)));
    // TestNoNodesDoesNothing.
    assert_eq!(status(&sync(vec![], vec![ds(json!({}))], vec![]), "foo"), Some((0, 0, 0, 0)));
    // TestOneNodeDaemonLaunchesPod.
    assert_eq!(status(&sync(vec![new_node("only-node", &[])], vec![ds(json!({}))], vec![]), "foo"), Some((1, 0, 0, 0)));
    // TestSelectorDaemonLaunchesPods / TestSelectorDaemonSetLaunchesPods: 3 creates.
    let selector = json!({"nodeSelector": map(NODE_LABELS)});
    assert_eq!(status(&sync(plain_and_labelled(), vec![ds(selector.clone())], vec![]), "foo"), Some((3, 0, 0, 0)));
    // TestBadSelectorDaemonDoesNothing.
    let bad = json!({"nodeSelector": map(NODE_LABELS2)});
    assert_eq!(status(&sync(plain_and_labelled(), vec![ds(bad)], vec![]), "foo"), Some((0, 0, 0, 0)));
    // TestNameDaemonSetLaunchesPods and TestBadNameDaemonSetDoesNothing.
    assert_eq!(
        status(&sync(nodes(0, 5, &[]), vec![ds(json!({"nodeName": "node-0"}))], vec![]), "foo"),
        Some((1, 0, 0, 0))
    );
    assert_eq!(
        status(&sync(nodes(0, 5, &[]), vec![ds(json!({"nodeName": "node-10"}))], vec![]), "foo"),
        Some((0, 0, 0, 0))
    );
    // TestNameAndSelectorDaemonSetLaunchesPods and TestInconsistentNameSelectorDaemonSetDoesNothing.
    let named = |name: &str| json!({"nodeSelector": map(NODE_LABELS), "nodeName": name});
    assert_eq!(status(&sync(plain_and_labelled(), vec![ds(named("node-6"))], vec![]), "foo"), Some((1, 0, 0, 0)));
    assert_eq!(status(&sync(plain_and_labelled(), vec![ds(named("node-0"))], vec![]), "foo"), Some((0, 0, 0, 0)));
    // TestNodeAffinityDaemonLaunchesPods.
    let color = affinity(json!([{"matchExpressions": [req("color", "In", &["blue"])]}]));
    assert_eq!(status(&sync(plain_and_labelled(), vec![ds(color)], vec![]), "foo"), Some((3, 0, 0, 0)));
    // TestNotReadyNodeDaemonDoesLaunchPod and TestNetworkUnavailableNodeDaemonLaunchesPod:
    // conditions alone change nothing.
    let mut not_ready = new_node("not-ready", &[]);
    not_ready.status = Some(from(json!({"conditions": [{"type": "Ready", "status": "False"},
                                                        {"type": "NetworkUnavailable", "status": "True"}]})));
    assert_eq!(status(&sync(vec![not_ready], vec![ds(json!({}))], vec![]), "foo"), Some((1, 0, 0, 0)));
    // TestInsufficientCapacityNodeDaemonDoesNotUnscheduleRunningPod: a pod that nothing
    // owns and the selector does not match is not the DaemonSet's: 1 create.
    let spec = resources("too-much-mem", "75M", "75m");
    let stranger = new_pod("stranger", "too-much-mem", &[], None);
    let index = sync(vec![new_node("too-much-mem", &[])], vec![ds(spec)], vec![stranger]);
    assert_eq!(status(&index, "foo"), Some((1, 0, 0, 0)));
}

/// TestDealsWithExistingPods, TestSelectorDaemonDeletesUnselectedPods,
/// TestSelectorDaemonDealsWithExistingPods: pods already on the nodes.
#[test]
fn test_sync_daemon_sets_with_existing_pods() {
    // TestDealsWithExistingPods: 2 creates (node-0, and node-4 whose pods no longer
    // match the selector), 5 deletes of excess pods; nothing misscheduled.
    let foo = new_daemonset("foo", DS_LABELS, json!({}));
    let mut pods = Vec::new();
    add_pods(&mut pods, "node-1", DS_LABELS, &foo, 1);
    add_pods(&mut pods, "node-2", DS_LABELS, &foo, 2);
    add_pods(&mut pods, "node-3", DS_LABELS, &foo, 5);
    add_pods(&mut pods, "node-4", DS_LABELS2, &foo, 2);
    assert_eq!(status(&sync(nodes(0, 5, &[]), vec![foo], pods), "foo"), Some((5, 3, 0, 0)));

    // TestSelectorDaemonDeletesUnselectedPods: 5 creates on the labelled nodes; 4 deletes,
    // which are the misscheduled pods on node-1 and node-4 (node-0's pods are released).
    let foo = new_daemonset("foo", DS_LABELS, json!({"nodeSelector": map(NODE_LABELS)}));
    let mut pods = Vec::new();
    add_pods(&mut pods, "node-0", DS_LABELS2, &foo, 2);
    add_pods(&mut pods, "node-1", DS_LABELS, &foo, 3);
    add_pods(&mut pods, "node-1", DS_LABELS2, &foo, 1);
    add_pods(&mut pods, "node-4", DS_LABELS, &foo, 1);
    let cluster_nodes = || [nodes(0, 5, &[]), nodes(5, 5, NODE_LABELS)].concat();
    let index = sync(cluster_nodes(), vec![foo.clone()], pods);
    assert_eq!(status(&index, "foo"), Some((5, 0, 2, 4)));
    assert!(misscheduled(&index).iter().all(|(_, _, reason, key)| reason == "label_drift" && key == "color"));

    // TestSelectorDaemonDealsWithExistingPods: 3 creates; 20 deletes = 8 misscheduled
    // pods (node-0, node-1, node-2) + 12 excess pods on node-6.
    let mut pods = Vec::new();
    add_pods(&mut pods, "node-0", DS_LABELS, &foo, 1);
    add_pods(&mut pods, "node-1", DS_LABELS, &foo, 3);
    add_pods(&mut pods, "node-1", DS_LABELS2, &foo, 2);
    add_pods(&mut pods, "node-2", DS_LABELS, &foo, 4);
    add_pods(&mut pods, "node-6", DS_LABELS, &foo, 13);
    add_pods(&mut pods, "node-7", DS_LABELS2, &foo, 4);
    add_pods(&mut pods, "node-9", DS_LABELS, &foo, 1);
    add_pods(&mut pods, "node-9", DS_LABELS2, &foo, 1);
    assert_eq!(status(&sync(cluster_nodes(), vec![foo], pods), "foo"), Some((5, 2, 3, 8)));
}

/// TestDaemonKillFailedPods, TestDaemonSetRespectsTermination and
/// TestDeleteUnscheduledPodForNotExistingNode.
#[test]
fn test_sync_daemon_sets_pod_lifecycle() {
    let foo = new_daemonset("foo", DS_LABELS, json!({}));
    let with_phase = |name: &str, phase: &str| {
        let mut pod = new_pod(name, "node-0", DS_LABELS, Some(&foo));
        pod.status = Some(from(json!({"phase": phase})));
        pod
    };
    // TestDaemonKillFailedPods: a failed pod is replaced, but it is on an eligible node,
    // so it never counts as misscheduled (and it is scheduled until it is gone).
    for (failed, normal) in [(0, 1), (0, 0), (1, 0), (1, 3)] {
        let mut pods: Vec<Pod> = (0..failed).map(|i| with_phase(&format!("failed-{i}"), "Failed")).collect();
        add_pods(&mut pods, "node-0", DS_LABELS, &foo, normal);
        let scheduled = usize::from(failed + normal > 0);
        assert_eq!(status(&sync(nodes(0, 1, &[]), vec![foo.clone()], pods), "foo"), Some((1, scheduled, 0, 0)));
    }
    // TestDaemonSetRespectsTermination: a terminating pod still occupies its node.
    let mut terminating = new_pod("terminating", "node-0", DS_LABELS, Some(&foo));
    terminating.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:01:00Z")));
    let index = sync(nodes(0, 1, NODE_LABELS), vec![foo.clone()], vec![terminating]);
    assert_eq!(status(&index, "foo"), Some((1, 1, 0, 0)));
    // TestDeleteUnscheduledPodForNotExistingNode: pods for node-1 (bound) and node-2 (by
    // affinity only) target nodes that do not exist and count nowhere.
    let mut pods = Vec::new();
    add_pods(&mut pods, "node-0", DS_LABELS, &foo, 1);
    add_pods(&mut pods, "node-1", DS_LABELS, &foo, 1);
    let mut by_affinity = new_pod("pod1-node-3", "", DS_LABELS, Some(&foo));
    by_affinity.spec.as_mut().unwrap().affinity =
        Some(from(affinity(json!([{"matchFields": [req("metadata.name", "In", &["node-2"])]}]))["affinity"].clone()));
    pods.push(by_affinity);
    assert_eq!(status(&sync(nodes(0, 1, &[]), vec![foo], pods), "foo"), Some((1, 1, 0, 0)));
}

/// The taint tests of daemon_controller_test.go.
#[test]
fn test_sync_daemon_sets_with_taints() {
    let tainted = |taint: &str| support::node("tainted", &[], &[taint]);
    let intolerant = new_daemonset("intolerant", DS_LABELS, json!({}));
    let pod = |ds: &DaemonSet| new_pod("keep-running-me", "tainted", DS_LABELS, Some(ds));
    // TestNoScheduleTaintedDoesntEvicitRunningIntolerantPod: misscheduled but kept.
    let index = sync(vec![tainted("dedicated=user1:NoSchedule")], vec![intolerant.clone()], vec![pod(&intolerant)]);
    assert_eq!(status(&index, "intolerant"), Some((0, 0, 1, 1)));
    let node = tainted("dedicated=user1:NoSchedule");
    assert_eq!(node_should_run(json!({}), &node), KEEP);
    // TestNoExecuteTaintedDoesEvicitRunningIntolerantPod: misscheduled and deleted.
    let index = sync(vec![tainted("dedicated=user1:NoExecute")], vec![intolerant.clone()], vec![pod(&intolerant)]);
    assert_eq!(status(&index, "intolerant"), Some((0, 0, 1, 1)));
    assert_eq!(node_should_run(json!({}), &tainted("dedicated=user1:NoExecute")), EVICT);
    // TestTaintedNodeDaemonDoesNotLaunchIntolerantPod.
    let index = sync(vec![tainted("dedicated=user1:NoSchedule")], vec![intolerant.clone()], vec![]);
    assert_eq!(status(&index, "intolerant"), Some((0, 0, 0, 0)));
    // TestTaintedNodeDaemonLaunchesToleratePod and TestNodeDaemonLaunchesToleratePod.
    let tolerations = json!({"tolerations": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]});
    let tolerate = new_daemonset("tolerate", DS_LABELS, tolerations);
    let index = sync(vec![tainted("dedicated=user1:NoSchedule")], vec![tolerate.clone()], vec![]);
    assert_eq!(status(&index, "tolerate"), Some((1, 0, 0, 0)));
    assert_eq!(status(&sync(nodes(0, 1, &[]), vec![tolerate], vec![]), "tolerate"), Some((1, 0, 0, 0)));
    // TestNotReadyNodeDaemonLaunchesPod, TestUnreachableNodeDaemonLaunchesPod and
    // TestTaintPressureNodeDaemonLaunchesPod: the default daemon tolerations.
    for taints in [
        &["node.kubernetes.io/not-ready:NoExecute"][..],
        &["node.kubernetes.io/unreachable:NoExecute"],
        &[
            "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/memory-pressure:NoSchedule",
            "node.kubernetes.io/pid-pressure:NoSchedule",
        ],
    ] {
        let index = sync(vec![support::node("tainted", &[], taints)], vec![intolerant.clone()], vec![]);
        assert_eq!(status(&index, "intolerant"), Some((1, 0, 0, 0)), "{taints:?}");
    }
}

/// TestDontDoAnythingIfBeingDeleted, TestDontDoAnythingIfBeingDeletedRace and
/// TestPodIsNotDeletedByDaemonsetWithEmptyLabelSelector: DaemonSets the controller does
/// not sync get no status, and adopt nothing.
#[test]
fn test_daemon_sets_the_controller_does_not_sync() {
    let mut deleting = new_daemonset("foo", DS_LABELS, json!({"nodeSelector": {"no": "match"}}));
    deleting.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:00:00Z")));
    let mut pods = Vec::new();
    add_pods(&mut pods, "node-0", DS_LABELS, &deleting, 1);
    pods.push(new_pod("orphan", "node-0", DS_LABELS, None));
    let index = sync(nodes(0, 5, &[]), vec![deleting], pods.clone());
    assert_eq!(status(&index, "foo"), None);

    let mut selects_all = new_daemonset("foo", DS_LABELS, json!({"nodeSelector": {"foo": "bar"}}));
    selects_all.spec.as_mut().unwrap().selector = from(json!({}));
    let index = sync(
        vec![new_node("node1", &[])],
        vec![selects_all],
        vec![new_pod("bang", "node1", &[("bang", "boom")], None)],
    );
    assert_eq!(status(&index, "foo"), None);

    // The same for a selector `labels.NewRequirement` rejects (the sync fails upstream).
    let mut invalid = new_daemonset("foo", DS_LABELS, json!({}));
    invalid.spec.as_mut().unwrap().selector = from(json!({"matchLabels": {"invalid key": "x"}}));
    assert_eq!(status(&sync(nodes(0, 1, &[]), vec![invalid], vec![]), "foo"), None);
}

/// TestGetNodesToDaemonPods: which pods a DaemonSet counts. Every node is made ineligible
/// here, so that each counted pod shows as misscheduled and can be named.
#[test]
fn test_get_nodes_to_daemon_pods() {
    let ineligible = json!({"nodeSelector": {"no": "match"}});
    let ds = new_daemonset("foo", DS_LABELS, ineligible.clone());
    let terminal = |name: &str, node: &str, phase: &str, deleted: bool| {
        let mut pod = new_pod(name, node, DS_LABELS, Some(&ds));
        pod.status = Some(from(json!({"phase": phase})));
        if deleted {
            pod.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:01:00Z")));
        }
        pod
    };
    let wanted_owned = vec![
        new_pod("matching-owned-0", "node-0", DS_LABELS, Some(&ds)),
        new_pod("matching-owned-1", "node-1", DS_LABELS, Some(&ds)),
        terminal("matching-owned-succeeded-pod-0", "node-0", "Succeeded", false),
        terminal("matching-owned-failed-pod-1", "node-1", "Failed", false),
    ];
    let orphans = vec![
        new_pod("matching-orphan-0", "node-0", DS_LABELS, None),
        new_pod("matching-orphan-1", "node-1", DS_LABELS, None),
    ];
    // Every pod the DaemonSet named `ds` counts (all its nodes are ineligible).
    let counted_names = |index: &Index, ds: &str| -> Vec<String> {
        let views = index.daemonsets();
        let view = views.iter().find(|v| &*v.ds.id.name == ds).expect("synced");
        let mut names: Vec<String> = view.misscheduled_pods().iter().map(|p| p.pod.id.name()).collect();
        names.sort();
        names
    };
    let names = |pods: &[Pod]| -> Vec<String> {
        let mut names: Vec<String> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        names.sort();
        names
    };
    let ignored = |other: &DaemonSet| {
        vec![
            new_pod("non-matching-owned-0", "node-0", DS_LABELS2, Some(&ds)),
            new_pod("non-matching-orphan-1", "node-1", &[("name", "other")], None),
            new_pod("matching-owned-by-other-0", "node-0", DS_LABELS, Some(other)),
            // The 1.28+ controller (includeDeletedTerminal=false); 1.20-1.25 counted these.
            terminal("matching-owned-succeeded-deleted-pod-0", "node-0", "Succeeded", true),
            terminal("matching-owned-failed-deleted-pod-1", "node-1", "Failed", true),
        ]
    };

    // With a second DaemonSet that selects other pods, the matching orphans are ours.
    let other = new_daemonset("foo2", DS_LABELS2, ineligible.clone());
    let pods = [wanted_owned.clone(), orphans.clone(), ignored(&other)].concat();
    let index = sync(nodes(0, 2, &[]), vec![ds.clone(), other], pods);
    assert_eq!(counted_names(&index, "foo"), names(&[wanted_owned.clone(), orphans.clone()].concat()));
    assert_eq!(status(&index, "foo"), Some((0, 0, 2, 6)));

    // Upstream's own setup: foo2 selects the same pods, and whichever DaemonSet syncs
    // first adopts the orphans. We do not guess: neither counts them until one has.
    let rival = new_daemonset("foo2", DS_LABELS, ineligible);
    let pods = [wanted_owned.clone(), orphans, ignored(&rival)].concat();
    let index = sync(nodes(0, 2, &[]), vec![ds.clone(), rival], pods);
    assert_eq!(counted_names(&index, "foo"), names(&wanted_owned));
    assert_eq!(counted_names(&index, "foo2"), ["matching-owned-by-other-0"]);
    assert_eq!(status(&index, "foo"), Some((0, 0, 2, 4)));
}

/// daemonset_util_test.go `TestGetTargetNodeName` (both versions).
#[test]
fn test_get_target_node_name() {
    let placement = |spec: Value| -> Option<String> {
        let pod: SlimPod = from(json!({"metadata": {"name": "pod", "namespace": "default"}, "spec": spec}));
        target_node_name(pod.spec.as_ref()?).map(str::to_owned)
    };
    let fields = |values: &[&str]| affinity(json!([{"matchFields": [req("metadata.name", "In", values)]}]));
    assert_eq!(placement(json!({"nodeName": "node-1"})), Some("node-1".into()));
    assert_eq!(placement(fields(&["node-1"])), Some("node-1".into()));
    assert_eq!(placement(fields(&["affinity"])), Some("affinity".into()));
    assert_eq!(placement(fields(&["node-1", "node-2"])), None);
    assert_eq!(placement(json!({})), None);
    // The first `metadata.name In` requirement decides, over every term; others are passed.
    let terms = |terms: Value| placement(affinity(terms));
    let first_has_two = json!([{"matchFields": [req("metadata.name", "In", &["a", "b"])]},
                               {"matchFields": [req("metadata.name", "In", &["c"])]}]);
    assert_eq!(terms(first_has_two), None);
    let passed = json!([{"matchExpressions": [req("metadata.name", "In", &["x"])]},
                        {"matchFields": [req("metadata.name", "NotIn", &["y"]), req("other", "In", &["z"])]},
                        {"matchFields": [req("metadata.name", "In", &["c"])]}]);
    assert_eq!(terms(passed), Some("c".into()));
    assert_eq!(terms(json!([{"matchFields": [req("metadata.name", "In", &[])]}])), None);
    assert_eq!(terms(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": null}]}])), None);
    assert_eq!(terms(json!(null)), None);
    assert_eq!(placement(json!({"affinity": null})), None);
    assert_eq!(
        placement(json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": null}}})),
        None
    );
    // nodeName wins over the affinity.
    let mut both = fields(&["node-1"]);
    both["nodeName"] = json!("node-2");
    assert_eq!(placement(both), Some("node-2".into()));
    // A malformed requirement is an error, not a pod without a target.
    let pod = |spec: Value| serde_json::from_value::<SlimPod>(json!({"metadata": {"name": "pod"}, "spec": spec}));
    let wrong = affinity(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", 7]}]}]));
    assert!(pod(wrong).is_err());
    assert!(pod(affinity(json!([{"matchFields": {"key": "metadata.name"}}]))).is_err());
}

/// A node with a name and labels, for the affinity tests.
fn labelled(name: &str, labels: &[(&str, &str)]) -> Node {
    new_node(name, labels)
}

/// nodeaffinity_test.go `TestNodeSelectorMatch`, through the DaemonSet's required affinity.
/// The controller uses the lazy selector: a term with a parse error fails, and the
/// other terms still decide.
#[test]
fn test_node_selector_match() {
    let label_and_field = json!({"matchExpressions": [req("label_1", "In", &["label_1_val"])],
                                 "matchFields": [req("metadata.name", "In", &["host_1"])]});
    let three_terms = affinity(json!([
        {"matchFields": [req("metadata.name", "In", &["host_1", "host_2"])]},
        label_and_field,
        {"matchExpressions": [req("invalid key", "In", &["label_value"])]},
    ]));
    assert_eq!(node_should_run(three_terms.clone(), &labelled("host_1", &[("label_1", "label_1_val")])), RUN);
    assert_eq!(node_should_run(three_terms, &labelled("host_1", &[])), EVICT);
    let one = affinity(json!([label_and_field]));
    assert_eq!(node_should_run(one.clone(), &labelled("host_1", &[])), EVICT, "matches field selector, but not labels");
    assert_eq!(node_should_run(one, &labelled("host_1", &[("label_1", "label_1_val")])), RUN);
    let second = affinity(json!([
        {"matchExpressions": [req("label_1", "In", &["label_1_val"])]},
        {"matchFields": [req("metadata.name", "In", &["host_1"])]},
    ]));
    assert_eq!(node_should_run(second, &labelled("host_1", &[])), RUN, "second term matches");
}

/// nodeaffinity_test.go `TestNodeSelectorRequirementsAsSelector`.
#[test]
fn test_node_selector_requirements_as_selector() {
    let node = labelled("n", &[("foo", "bar"), ("bar", "3")]);
    let one = |r: Value| affinity(json!([{"matchExpressions": [r]}]));
    assert_eq!(node_should_run(affinity(json!([{"matchExpressions": []}])), &node), EVICT, "no requirements: Nothing");
    assert_eq!(node_should_run(one(req("foo", "In", &["bar", "baz"])), &node), RUN);
    assert_eq!(node_should_run(one(req("foo", "Exists", &["bar", "baz"])), &node), EVICT, "Exists with values");
    assert_eq!(node_should_run(one(req("bar", "Gt", &["1"])), &node), RUN);
    assert_eq!(node_should_run(one(req("bar", "Lt", &["7"])), &node), RUN);
}

/// nodeaffinity_test.go `TestPodMatchesNodeSelectorAndAffinityTerms`. Upstream's nodes
/// without a name skip `matchFields`; ours always have one, which only the matchFields
/// cases read.
#[test]
fn test_pod_matches_node_selector_and_affinity_terms() {
    let foo_bar = &[("foo", "bar")][..];
    let terms = |t: Value| affinity(t);
    let expr = |r: Value| terms(json!([{"matchExpressions": [r]}]));
    let with_selector = |mut spec: Value| {
        spec["nodeSelector"] = json!({"foo": "bar"});
        spec
    };
    let cases: Vec<(&str, Value, Node, bool)> = vec![
        ("no selector", json!({}), labelled("n", &[]), true),
        ("missing labels", json!({"nodeSelector": {"foo": "bar"}}), labelled("n", &[]), false),
        ("same labels", json!({"nodeSelector": {"foo": "bar"}}), labelled("n", foo_bar), true),
        (
            "node labels are superset",
            json!({"nodeSelector": {"foo": "bar"}}),
            labelled("n", &[("foo", "bar"), ("baz", "blah")]),
            true,
        ),
        (
            "node labels are subset",
            json!({"nodeSelector": {"foo": "bar", "baz": "blah"}}),
            labelled("n", foo_bar),
            false,
        ),
        ("In matches", expr(req("foo", "In", &["bar", "value2"])), labelled("n", foo_bar), true),
        (
            "Gt matches",
            expr(req("kernel-version", "Gt", &["0204"])),
            labelled("n", &[("kernel-version", "0206")]),
            true,
        ),
        (
            "NotIn matches",
            expr(req("mem-type", "NotIn", &["DDR", "DDR2"])),
            labelled("n", &[("mem-type", "DDR3")]),
            true,
        ),
        (
            "Exists matches",
            expr(json!({"key": "GPU", "operator": "Exists"})),
            labelled("n", &[("GPU", "NVIDIA-GRID-K1")]),
            true,
        ),
        ("affinity does not match", expr(req("foo", "In", &["value1", "value2"])), labelled("n", foo_bar), false),
        (
            "nil terms",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": null}}}}),
            labelled("n", foo_bar),
            false,
        ),
        ("empty terms", terms(json!([])), labelled("n", foo_bar), false),
        ("empty matchExpressions", terms(json!([{"matchExpressions": []}])), labelled("n", foo_bar), false),
        ("no affinity", json!({}), labelled("n", foo_bar), true),
        ("affinity without a node selector", json!({"affinity": {"nodeAffinity": {}}}), labelled("n", foo_bar), true),
        (
            "expressions ANDed, match",
            terms(
                json!([{"matchExpressions": [{"key": "GPU", "operator": "Exists"}, req("GPU", "NotIn", &["AMD", "INTER"])]}]),
            ),
            labelled("n", &[("GPU", "NVIDIA-GRID-K1")]),
            true,
        ),
        (
            "expressions ANDed, no match",
            terms(
                json!([{"matchExpressions": [{"key": "GPU", "operator": "Exists"}, req("GPU", "In", &["AMD", "INTER"])]}]),
            ),
            labelled("n", &[("GPU", "NVIDIA-GRID-K1")]),
            false,
        ),
        (
            "terms ORed",
            terms(
                json!([{"matchExpressions": [req("foo", "In", &["bar", "value2"])]}, {"matchExpressions": [req("diffkey", "In", &["wrong", "value2"])]}]),
            ),
            labelled("n", foo_bar),
            true,
        ),
        (
            "affinity and nodeSelector both satisfied",
            with_selector(expr(json!({"key": "foo", "operator": "Exists"}))),
            labelled("n", foo_bar),
            true,
        ),
        (
            "affinity matches, nodeSelector does not",
            with_selector(expr(json!({"key": "foo", "operator": "Exists"}))),
            labelled("n", &[("foo", "barrrrrr")]),
            false,
        ),
        (
            "invalid value under NotIn",
            expr(req("foo", "NotIn", &["invalid value: ___@#$%^"])),
            labelled("n", foo_bar),
            false,
        ),
        (
            "matchFields In matches",
            terms(json!([{"matchFields": [req("metadata.name", "In", &["node_1"])]}])),
            labelled("node_1", &[]),
            true,
        ),
        (
            "matchFields In does not match",
            terms(json!([{"matchFields": [req("metadata.name", "In", &["node_1"])]}])),
            labelled("node_2", &[]),
            false,
        ),
        (
            "two terms: fields fail, expressions match",
            terms(
                json!([{"matchFields": [req("metadata.name", "In", &["node_1"])]}, {"matchExpressions": [req("foo", "In", &["bar"])]}]),
            ),
            labelled("node_2", foo_bar),
            true,
        ),
        (
            "one term: fields fail, expressions match",
            terms(
                json!([{"matchFields": [req("metadata.name", "In", &["node_1"])], "matchExpressions": [req("foo", "In", &["bar"])]}]),
            ),
            labelled("node_2", foo_bar),
            false,
        ),
        (
            "one term: both match",
            terms(
                json!([{"matchFields": [req("metadata.name", "In", &["node_1"])], "matchExpressions": [req("foo", "In", &["bar"])]}]),
            ),
            labelled("node_1", foo_bar),
            true,
        ),
        (
            "two terms: neither matches",
            terms(
                json!([{"matchFields": [req("metadata.name", "In", &["node_1"])]}, {"matchExpressions": [req("foo", "In", &["not-match-to-bar"])]}]),
            ),
            labelled("node_2", foo_bar),
            false,
        ),
    ];
    for (name, spec, node, want) in cases {
        assert_eq!(node_should_run(spec, &node).0, want, "{name}");
    }
}

/// helpers_test.go `TestMatchNodeSelectorTerms`.
#[test]
fn test_match_node_selector_terms() {
    let label = req("label_1", "In", &["label_1_val"]);
    let field = req("metadata.name", "In", &["host_1"]);
    let cases: Vec<(&str, Value, Node, bool)> = vec![
        ("labels match", json!([{"matchExpressions": [label]}]), labelled("n", &[("label_1", "label_1_val")]), true),
        ("field matches", json!([{"matchFields": [field]}]), labelled("host_1", &[]), true),
        (
            "invalid field requirement",
            json!([{"matchFields": [req("metadata.name", "In", &["host_1", "host_2"])]}]),
            labelled("host_1", &[]),
            false,
        ),
        (
            "field term against labels",
            json!([{"matchFields": [field]}]),
            labelled("not_host_1", &[("metadata.name", "host_1")]),
            false,
        ),
        (
            "label term against fields",
            json!([{"matchExpressions": [req("metadata.name", "In", &["host_1"])]}]),
            labelled("host_1", &[]),
            false,
        ),
        (
            "both set, only fields match",
            json!([{"matchExpressions": [label], "matchFields": [field]}]),
            labelled("host_1", &[]),
            false,
        ),
        (
            "both set, both match",
            json!([{"matchExpressions": [label], "matchFields": [field]}]),
            labelled("host_1", &[("label_1", "label_1_val")]),
            true,
        ),
        (
            "both set, label mismatched",
            json!([{"matchExpressions": [label], "matchFields": [field]}]),
            labelled("host_1", &[("label_1", "label_1_val-failed")]),
            false,
        ),
        (
            "two terms, one mismatched",
            json!([{"matchExpressions": [label]}, {"matchFields": [field]}]),
            labelled("host_1", &[("label_1", "label_1_val-failed")]),
            true,
        ),
    ];
    for (name, terms, node, want) in cases {
        assert_eq!(node_should_run(affinity(terms), &node).0, want, "{name}");
    }
}

/// helpers_test.go `TestFindMatchingUntoleratedTaint`, with the filter the DaemonSet
/// controller uses (NoSchedule and NoExecute) and the 1.35 comparison-operator gate off,
/// as it is by default: `Gt`/`Lt` tolerate nothing.
#[test]
fn test_find_matching_untolerated_taint() {
    let tol = |key: &str, op: &str, value: &str, effect: &str| json!({"key": key, "operator": op, "value": value, "effect": effect});
    let spec = |tolerations: Vec<Value>| json!({"tolerations": tolerations});
    let sla = |value: &str| support::node("n", &[], &[&format!("node.kubernetes.io/sla={value}:NoSchedule")]);
    let cases: Vec<(&str, Value, Node, (bool, bool))> = vec![
        ("empty tolerations, no taints", spec(vec![]), support::node("n", &[], &[]), RUN),
        (
            "tolerations, no taints",
            spec(vec![tol("foo", "Exists", "", "NoSchedule")]),
            support::node("n", &[], &[]),
            RUN,
        ),
        (
            "tolerations match all taints",
            spec(vec![tol("foo", "Exists", "", "NoSchedule")]),
            support::node("n", &[], &["foo:NoSchedule"]),
            RUN,
        ),
        (
            "tolerations do not match",
            spec(vec![tol("foo", "Exists", "", "NoSchedule")]),
            support::node("n", &[], &["bar:NoSchedule"]),
            KEEP,
        ),
        (
            "NoExecute tolerated, NoSchedule not",
            spec(vec![tol("foo", "Exists", "", "NoExecute")]),
            support::node("n", &[], &["foo:NoExecute", "bar:NoSchedule"]),
            KEEP,
        ),
        ("Gt below threshold", spec(vec![tol("node.kubernetes.io/sla", "Gt", "950", "NoSchedule")]), sla("800"), KEEP),
        (
            "Gt above threshold (gate off)",
            spec(vec![tol("node.kubernetes.io/sla", "Gt", "750", "NoSchedule")]),
            sla("950"),
            KEEP,
        ),
        ("Lt above threshold", spec(vec![tol("node.kubernetes.io/sla", "Lt", "800", "NoSchedule")]), sla("950"), KEEP),
        (
            "Gt with a non-numeric taint",
            spec(vec![tol("node.kubernetes.io/sla", "Gt", "950", "NoSchedule")]),
            sla("high"),
            KEEP,
        ),
        (
            "a later toleration matches",
            spec(vec![
                tol("node.kubernetes.io/sla", "Gt", "950", "NoSchedule"),
                tol("node.kubernetes.io/sla", "Exists", "", "NoSchedule"),
            ]),
            sla("high"),
            RUN,
        ),
    ];
    for (name, spec, node, want) in cases {
        assert_eq!(node_should_run(spec, &node), want, "{name}");
    }
}

/// `labels.NewRequirement` validation under every operator: an invalid requirement fails
/// its whole term, even where the operator alone would match a missing label.
#[test]
fn test_invalid_requirements_fail_their_term() {
    let node = labelled("n", &[("zone", "a")]);
    let long = "v".repeat(64);
    let one = |r: Value| affinity(json!([{"matchExpressions": [r]}]));
    for (name, r) in [
        ("invalid key under DoesNotExist", json!({"key": "bad key", "operator": "DoesNotExist"})),
        ("invalid key under NotIn", req("bad key", "NotIn", &["x"])),
        ("value over 63 characters under NotIn", req("rack", "NotIn", &[long.as_str()])),
        ("value with a space under NotIn", req("rack", "NotIn", &["a b"])),
        ("Gt with two values", req("cores", "Gt", &["1", "2"])),
        ("Gt with a non-integer", req("cores", "Gt", &["1.5"])),
        ("Gt with a negative (not a label value)", req("cores", "Gt", &["-1"])),
        ("unknown operator", req("zone", "Near", &["a"])),
    ] {
        assert_eq!(node_should_run(one(r), &node), EVICT, "{name}");
    }
    // The term fails, not the selector: another term still matches.
    let two = affinity(json!([{"matchExpressions": [req("bad key", "NotIn", &["x"])]},
                              {"matchExpressions": [req("zone", "In", &["a"])]}]));
    assert_eq!(node_should_run(two, &node), RUN);
    // A field selector reads a field the node does not have as empty: NotIn holds.
    let other_field = affinity(json!([{"matchFields": [req("spec.unschedulable", "NotIn", &["true"])]}]));
    assert_eq!(node_should_run(other_field, &node), RUN);
}
