//! Reasons, counting and cache semantics, driven through `Index::apply` with
//! objects shaped the way the DaemonSet controller writes them.

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{self, Index};
use misschedule_exporter::k8s::slim::SlimPod;
use misschedule_exporter::rules::reason::{Conventions, DrainTaints};
use serde_json::json;
use support::*;

fn row(pod: &str, node: &str, reason: &str, key: &str) -> (String, String, String, String) {
    (pod.into(), node.into(), reason.into(), key.into())
}

/// One DaemonSet `agent` with `spec`, one bound pod on `n1` created from `pod_spec`
/// (hash `old` with its revision), and node `n1` as given.
fn one_pod(spec: serde_json::Value, pod_spec: serde_json::Value, n1: Node) -> Index {
    let current = daemonset("agent", spec);
    let original = daemonset("agent", pod_spec);
    cluster(vec![n1], vec![current], vec![revision(&original, "old")], vec![daemon_pod(&original, "n1", "old", true)])
}

fn reason_of(index: &Index) -> (String, String) {
    let rows = misscheduled(index);
    assert_eq!(rows.len(), 1, "expected one misscheduled pod: {rows:?}");
    (rows[0].2.clone(), rows[0].3.clone())
}

fn r(reason: &str, key: &str) -> (String, String) {
    (reason.into(), key.into())
}

#[test]
fn taint_reasons() {
    let on = |taints: &[&str]| reason_of(&one_pod(json!({}), json!({}), node("n1", &[], taints)));
    assert_eq!(
        on(&["ToBeDeletedByClusterAutoscaler=1700000000:NoSchedule"]),
        r("autoscaler_drain", "ToBeDeletedByClusterAutoscaler")
    );
    assert_eq!(on(&["karpenter.sh/disrupted:NoSchedule"]), r("autoscaler_drain", "karpenter.sh/disrupted"));
    assert_eq!(
        on(&["karpenter.sh/disruption=disrupting:NoSchedule"]),
        r("autoscaler_drain", "karpenter.sh/disruption")
    );
    assert_eq!(
        on(&["cloud.google.com/impending-node-termination:NoSchedule"]),
        r("autoscaler_drain", "cloud.google.com/impending-node-termination")
    );
    assert_eq!(
        on(&["aws-node-termination-handler/spot-itn=x:NoSchedule"]),
        r("autoscaler_drain", "aws-node-termination-handler/spot-itn")
    );
    assert_eq!(on(&["dedicated=infra:NoSchedule"]), r("taint_added", "dedicated"));
    assert_eq!(on(&["dedicated=infra:NoExecute"]), r("taint_added", "dedicated"));
    assert_eq!(
        on(&["feature.node.kubernetes.io/special=true:NoSchedule"]),
        r("nfd_change", "feature.node.kubernetes.io/special")
    );
}

#[test]
fn nfd_taint_from_annotation() {
    let mut n1 = node("n1", &[], &["example.com/gpu=true:NoSchedule"]);
    n1.metadata.annotations =
        Some([("nfd.node.kubernetes.io/taints".to_owned(), "example.com/gpu=true:NoSchedule".to_owned())].into());
    assert_eq!(reason_of(&one_pod(json!({}), json!({}), n1)), r("nfd_change", "example.com/gpu"));
}

#[test]
fn extra_drain_taint_keys() {
    let mut index = Index::new(index::Config {
        conventions: Conventions {
            drain_taints: DrainTaints::with_extra(["example.com/draining"]),
            ..Conventions::default()
        },
        ..Default::default()
    });
    let ds = daemonset("agent", json!({}));
    list(&mut index, vec![node("n1", &[], &["example.com/draining:NoSchedule"])]);
    list(&mut index, vec![ds.clone()]);
    list(&mut index, Vec::<k8s_openapi::api::apps::v1::ControllerRevision>::new());
    list(&mut index, vec![daemon_pod(&ds, "n1", "h", true)]);
    assert_eq!(reason_of(&index), r("autoscaler_drain", "example.com/draining"));
}

#[test]
fn removed_toleration_is_a_daemonset_change() {
    let tolerant = json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]});
    let index = one_pod(json!({}), tolerant, node("n1", &[], &["dedicated=x:NoSchedule"]));
    assert_eq!(reason_of(&index), r("daemonset_changed", "dedicated"));
}

#[test]
fn taint_precedence() {
    let tolerant = json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]});
    // Drain wins over everything, wherever it is in the list.
    let n =
        node("n1", &[], &["custom:NoSchedule", "dedicated:NoSchedule", "ToBeDeletedByClusterAutoscaler=1:NoSchedule"]);
    assert_eq!(
        reason_of(&one_pod(json!({}), tolerant.clone(), n)),
        r("autoscaler_drain", "ToBeDeletedByClusterAutoscaler")
    );
    // Then daemonset_changed, then nfd_change, then taint_added.
    let n = node("n1", &[], &["custom:NoSchedule", "feature.node.kubernetes.io/x:NoSchedule", "dedicated:NoSchedule"]);
    assert_eq!(reason_of(&one_pod(json!({}), tolerant, n)), r("daemonset_changed", "dedicated"));
    let n = node("n1", &[], &["custom:NoSchedule", "feature.node.kubernetes.io/x:NoSchedule"]);
    assert_eq!(reason_of(&one_pod(json!({}), json!({}), n)), r("nfd_change", "feature.node.kubernetes.io/x"));
    let n = node("n1", &[], &["custom:NoSchedule", "other:NoExecute"]);
    assert_eq!(reason_of(&one_pod(json!({}), json!({}), n)), r("taint_added", "custom"));
}

#[test]
fn placement_reasons() {
    let sel = |k: &str, v: &str| json!({"nodeSelector": {k: v}});
    // The node lost the label the selector wants.
    assert_eq!(
        reason_of(&one_pod(sel("disk", "ssd"), sel("disk", "ssd"), node("n1", &[("disk", "hdd")], &[]))),
        r("label_drift", "disk")
    );
    // NFD-owned keys: the prefixes, and keys NFD lists in its annotation.
    let nfd = "feature.node.kubernetes.io/cpu-cpuid.AVX512F";
    assert_eq!(reason_of(&one_pod(sel(nfd, "true"), sel(nfd, "true"), node("n1", &[], &[]))), r("nfd_change", nfd));
    let profile = "profile.node.kubernetes.io/tuned";
    assert_eq!(
        reason_of(&one_pod(sel(profile, "true"), sel(profile, "true"), node("n1", &[], &[]))),
        r("nfd_change", profile)
    );
    let sub = "vendor.feature.node.kubernetes.io/fpga";
    assert_eq!(reason_of(&one_pod(sel(sub, "true"), sel(sub, "true"), node("n1", &[], &[]))), r("nfd_change", sub));
    let mut listed = node("n1", &[], &[]);
    listed.metadata.annotations = Some(
        [("nfd.node.kubernetes.io/feature-labels".to_owned(), "example.com/accel,cpu-model.id".to_owned())].into(),
    );
    assert_eq!(
        reason_of(&one_pod(sel("example.com/accel", "x"), sel("example.com/accel", "x"), listed.clone())),
        r("nfd_change", "example.com/accel")
    );
    let unprefixed = "feature.node.kubernetes.io/cpu-model.id";
    assert_eq!(reason_of(&one_pod(sel(unprefixed, "1"), sel(unprefixed, "1"), listed)), r("nfd_change", unprefixed));
    // The DaemonSet's selector changed; the pod's own selector still accepts the node.
    assert_eq!(
        reason_of(&one_pod(sel("disk", "nvme"), sel("disk", "ssd"), node("n1", &[("disk", "ssd")], &[]))),
        r("daemonset_changed", "disk")
    );
    // daemonset_changed comes before nfd_change.
    assert_eq!(
        reason_of(&one_pod(sel(nfd, "false"), sel(nfd, "true"), node("n1", &[(nfd, "true")], &[]))),
        r("daemonset_changed", nfd)
    );
    // The template pins another node.
    assert_eq!(
        reason_of(&one_pod(json!({"nodeName": "n9"}), json!({}), node("n1", &[], &[]))),
        r("node_name_mismatch", "spec.nodeName")
    );
    // Placement is judged before taints.
    assert_eq!(
        reason_of(&one_pod(
            sel("disk", "ssd"),
            sel("disk", "ssd"),
            node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1:NoSchedule"])
        )),
        r("label_drift", "disk")
    );
}

#[test]
fn affinity_change_needs_the_revision() {
    let aff = |zone: &str| {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]}}}})
    };
    let n1 = || node("n1", &[("zone", "a")], &[]);
    // With the pod's revision, the old affinity is known to accept the node.
    assert_eq!(reason_of(&one_pod(aff("b"), aff("a"), n1())), r("daemonset_changed", "zone"));
    // Without it, the pod's own affinity is only the controller's matchFields term: not evidence.
    let (current, original) = (daemonset("agent", aff("b")), daemonset("agent", aff("a")));
    let index = cluster(vec![n1()], vec![current], vec![], vec![daemon_pod(&original, "n1", "old", true)]);
    assert_eq!(reason_of(&index), r("label_drift", "zone"));
}

#[test]
fn counting_follows_the_controller() {
    let ds = daemonset("agent", json!({"nodeSelector": {"role": "worker"}}));
    let bad = || node("bad", &[], &[]);
    let misscheduled_nodes = |index: &Index| index.daemonsets()[0].misscheduled_node_count();

    // Two pods on one node count once.
    let mut second = daemon_pod(&ds, "bad", "h", true);
    second.metadata.name = Some("agent-bad-2".into());
    second.metadata.uid = Some("second".into());
    let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![daemon_pod(&ds, "bad", "h", true), second]);
    assert_eq!((misscheduled_nodes(&index), misscheduled(&index).len()), (1, 2));

    // A pending pod targeted only through matchFields counts; so do terminating ones that
    // still run, and finished ones not yet deleted.
    let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![daemon_pod(&ds, "bad", "h", false)]);
    assert_eq!(misscheduled_nodes(&index), 1);
    let with = |phase: &str, deleted: bool| {
        let mut pod = daemon_pod(&ds, "bad", "h", true);
        if deleted {
            pod.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:10:30Z")));
            pod.metadata.deletion_grace_period_seconds = Some(30);
        }
        pod.status = Some(from(json!({ "phase": phase })));
        cluster(vec![bad()], vec![ds.clone()], vec![], vec![pod])
    };
    let index = with("Running", true);
    assert_eq!(misscheduled_nodes(&index), 1);
    // Its delete request (deletionTimestamp - grace) is the evidence of when.
    let since = index.daemonsets()[0].misscheduled_pods()[0].since;
    assert_eq!(since, jiff_secs("2026-01-01T00:10:00Z"));
    assert_eq!(misscheduled_nodes(&with("Failed", false)), 1);
    assert_eq!(misscheduled_nodes(&with("Succeeded", false)), 1);
    // Since 1.28 a pod that is both terminal and deleted no longer counts (1.20 counted it).
    assert_eq!(misscheduled_nodes(&with("Failed", true)), 0);
    assert_eq!(misscheduled_nodes(&with("Succeeded", true)), 0);

    // A pod whose node is gone does not count; nor do released pods or other owners' pods.
    let index = cluster(vec![], vec![ds.clone()], vec![], vec![daemon_pod(&ds, "bad", "h", true)]);
    assert_eq!(misscheduled_nodes(&index), 0);
    let mut released = daemon_pod(&ds, "bad", "h", true);
    released.metadata.labels.as_mut().unwrap().insert("app".into(), "other".into());
    let mut other_owner = daemon_pod(&ds, "bad", "h", true);
    other_owner.metadata.owner_references.as_mut().unwrap()[0].uid = "uid-someone-else".into();
    for pod in [released, other_owner] {
        let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![pod]);
        assert_eq!(misscheduled_nodes(&index), 0);
    }
    // Orphans that the selector matches are adopted in the same sync, and count: no
    // ownerReference, or one that is not a controller reference.
    let mut orphan = daemon_pod(&ds, "bad", "h", true);
    orphan.metadata.owner_references = None;
    let mut not_controller = daemon_pod(&ds, "bad", "h", true);
    not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
    for pod in [orphan.clone(), not_controller] {
        let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![pod]);
        assert_eq!(misscheduled_nodes(&index), 1);
    }
    // A terminating orphan is never adopted.
    orphan.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:10:30Z")));
    let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![orphan]);
    assert_eq!(misscheduled_nodes(&index), 0);
    // A pod with neither nodeName nor a matchFields term is ignored.
    let mut untargeted = daemon_pod(&ds, "bad", "h", false);
    untargeted.spec.as_mut().unwrap().affinity = None;
    let index = cluster(vec![bad()], vec![ds.clone()], vec![], vec![untargeted]);
    assert_eq!(misscheduled_nodes(&index), 0);
}

fn jiff_secs(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_second()
}

#[test]
fn eligible_and_ineligible_counts() {
    let ds = daemonset("agent", json!({"nodeSelector": {"role": "worker"}}));
    let nodes = vec![
        node("w1", &[("role", "worker")], &[]),
        node("w2", &[("role", "worker")], &["dedicated:NoSchedule"]),
        node("w3", &[("role", "worker")], &["node.kubernetes.io/unschedulable:NoSchedule"]),
        node("m1", &[("role", "master")], &[]),
        node("m2", &[], &[]),
    ];
    let index = cluster(nodes, vec![ds], vec![], vec![]);
    let view = index.daemonsets()[0];
    assert_eq!(view.eligible_nodes(), 2);
    let ineligible: Vec<_> =
        view.ineligible_nodes().into_iter().map(|(r, k, n)| (r.as_str(), k.to_string(), n)).collect();
    assert_eq!(ineligible, vec![("node_selector", "role".to_string(), 2), ("taint", "dedicated".to_string(), 1)]);
}

#[test]
fn updates_move_pods_in_and_out() {
    let ds = daemonset("agent", json!({}));
    let mut index =
        cluster(vec![node("n1", &[], &[])], vec![ds.clone()], vec![], vec![daemon_pod(&ds, "n1", "h", true)]);
    index.set_now(1_000);
    assert!(misscheduled(&index).is_empty());
    // A taint arrives: misscheduled, and the exporter saw it happen at `now`.
    apply(&mut index, node("n1", &[], &["ToBeDeletedByClusterAutoscaler=5:NoSchedule"]));
    assert_eq!(misscheduled(&index), vec![row("agent-n1", "n1", "autoscaler_drain", "ToBeDeletedByClusterAutoscaler")]);
    assert_eq!(index.daemonsets()[0].misscheduled_pods()[0].since, 1_000);
    // An unrelated pod update keeps the original moment.
    index.set_now(2_000);
    let mut updated = daemon_pod(&ds, "n1", "h", true);
    updated.status = Some(from(json!({"phase": "Running"})));
    apply(&mut index, updated.clone());
    assert_eq!(index.daemonsets()[0].misscheduled_pods()[0].since, 1_000);
    // The DaemonSet learns to tolerate it: the series goes away.
    let tolerant =
        daemonset("agent", json!({"tolerations": [{"key": "ToBeDeletedByClusterAutoscaler", "operator": "Exists"}]}));
    apply(&mut index, tolerant);
    assert!(misscheduled(&index).is_empty());
    apply(&mut index, ds.clone());
    assert_eq!(misscheduled(&index).len(), 1);
    // The pod is deleted, then the node: nothing left behind.
    delete(&mut index, updated);
    assert!(misscheduled(&index).is_empty());
    apply(&mut index, daemon_pod(&ds, "n1", "h", true));
    assert_eq!(misscheduled(&index).len(), 1);
    delete(&mut index, node("n1", &[], &[]));
    assert!(misscheduled(&index).is_empty());
    assert_eq!(index.daemonsets()[0].eligible_nodes(), 0);
    // A DaemonSet deletion drops all of its series.
    apply(&mut index, node("n1", &[], &["x:NoSchedule"]));
    assert_eq!(misscheduled(&index).len(), 1);
    delete(&mut index, ds);
    assert!(index.daemonsets().is_empty());
}

#[test]
fn evidence_when_the_transition_was_not_seen() {
    let ds = daemonset("agent", json!({}));
    let mut tainted = node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1767225700:NoSchedule"]);
    let mut index = Index::default();
    index.set_now(1_767_300_000);
    list(&mut index, vec![tainted.clone()]);
    list(&mut index, vec![ds.clone()]);
    list(&mut index, Vec::<k8s_openapi::api::apps::v1::ControllerRevision>::new());
    list(&mut index, vec![daemon_pod(&ds, "n1", "h", true)]);
    // The autoscaler's taint value, not the time the exporter started.
    assert_eq!(index.daemonsets()[0].misscheduled_pods()[0].since, 1_767_225_700);
    // timeAdded for other taints; never before the pod existed (2026-01-01T00:00:00Z = 1767225600).
    tainted.spec.as_mut().unwrap().taints =
        Some(vec![from(json!({"key": "x", "effect": "NoSchedule", "timeAdded": "2025-01-01T00:00:00Z"}))]);
    let mut index2 = Index::default();
    index2.set_now(1_767_300_000);
    list(&mut index2, vec![tainted]);
    list(&mut index2, vec![ds.clone()]);
    list(&mut index2, Vec::<k8s_openapi::api::apps::v1::ControllerRevision>::new());
    list(&mut index2, vec![daemon_pod(&ds, "n1", "h", true)]);
    assert_eq!(index2.daemonsets()[0].misscheduled_pods()[0].since, 1_767_225_600);
}

#[test]
fn oldest_pod_decides_the_node_reason() {
    let sel = json!({"nodeSelector": {"disk": "nvme"}});
    let old = daemonset("agent", json!({"nodeSelector": {"disk": "ssd"}}));
    let current = daemonset("agent", sel.clone());
    let mut newer = daemon_pod(&current, "n1", "new", true);
    newer.metadata.name = Some("agent-newer".into());
    newer.metadata.uid = Some("newer".into());
    newer.metadata.creation_timestamp = Some(from(json!("2026-02-01T00:00:00Z")));
    let index = cluster(
        vec![node("n1", &[("disk", "ssd")], &[])],
        vec![current],
        vec![],
        vec![newer, daemon_pod(&old, "n1", "old", true)],
    );
    let by_reason = index.daemonsets()[0].misscheduled_nodes_by_reason();
    assert_eq!(by_reason.iter().sum::<u32>(), 1);
    assert_eq!(by_reason[misschedule_exporter::rules::reason::Reason::DaemonSetChanged.index()], 1);
}

#[test]
fn relist_replaces_only_on_init_done() {
    let ds = daemonset("agent", json!({}));
    let mut index = cluster(
        vec![node("n1", &[], &["x:NoSchedule"]), node("n2", &[], &["x:NoSchedule"])],
        vec![ds.clone()],
        vec![],
        vec![daemon_pod(&ds, "n1", "h", true), daemon_pod(&ds, "n2", "h", true)],
    );
    assert_eq!(misscheduled(&index).len(), 2);
    // A relist in which the n2 pod no longer exists: until InitDone nothing changes.
    index.apply(Event::<SlimPod>::Init).unwrap();
    index.apply(Event::InitApply(daemon_pod(&ds, "n1", "h", true).watched())).unwrap();
    assert_eq!(misscheduled(&index).len(), 2);
    index.apply(Event::<SlimPod>::InitDone).unwrap();
    assert_eq!(misscheduled(&index), vec![row("agent-n1", "n1", "taint_added", "x")]);
}

#[test]
fn namespace_scoped_relists_leave_other_namespaces_alone() {
    let ds = daemonset("agent", json!({}));
    let mut other = daemonset("other", json!({}));
    other.metadata.namespace = Some("ns2".into());
    let mut index = Index::new(index::Config { namespace_scopes: 2, ..Default::default() });
    list(&mut index, vec![node("n1", &[], &[])]);
    index.apply_scoped(Some("ns"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::Init).unwrap();
    index.apply_scoped(Some("ns"), Event::InitApply(ds)).unwrap();
    index.apply_scoped(Some("ns"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::InitDone).unwrap();
    assert!(!index.is_synced(misschedule_exporter::index::Resource::DaemonSets), "one of two namespaces listed");
    index.apply_scoped(Some("ns2"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::Init).unwrap();
    index.apply_scoped(Some("ns2"), Event::InitApply(other)).unwrap();
    index.apply_scoped(Some("ns2"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::InitDone).unwrap();
    assert!(index.is_synced(misschedule_exporter::index::Resource::DaemonSets));
    assert_eq!(index.daemonsets().len(), 2);
    // ns relists empty: only ns's DaemonSet goes.
    index.apply_scoped(Some("ns"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::Init).unwrap();
    index.apply_scoped(Some("ns"), Event::<k8s_openapi::api::apps::v1::DaemonSet>::InitDone).unwrap();
    let left: Vec<_> = index.daemonsets().iter().map(|v| v.ds.id.name.to_string()).collect();
    assert_eq!(left, vec!["other"]);
}

#[test]
fn malformed_objects_are_rejected_and_change_nothing() {
    let ds = daemonset("agent", json!({}));
    let mut index = cluster(
        vec![node("n1", &[], &["x:NoSchedule"])],
        vec![ds.clone()],
        vec![],
        vec![daemon_pod(&ds, "n1", "h", true)],
    );
    let mut no_uid = daemon_pod(&ds, "n1", "h", true);
    no_uid.metadata.uid = None;
    let err = index.apply(Event::Apply(no_uid.watched())).unwrap_err();
    assert_eq!(err.to_string(), "Pod ns/agent-n1: missing metadata.uid");
    assert_eq!(misscheduled(&index).len(), 1);
}

#[test]
fn deletes_need_only_the_key() {
    let ds = daemonset("agent", json!({}));
    let mut index = cluster(
        vec![node("n1", &[], &["x:NoSchedule"])],
        vec![ds.clone()],
        vec![],
        vec![daemon_pod(&ds, "n1", "h", true)],
    );
    // A delete carrying only metadata (as a tombstone may) still removes the pod.
    let mut bare: k8s_openapi::api::core::v1::Pod =
        from(json!({"metadata": {"name": "agent-n1", "namespace": "ns", "uid": "pod-agent-n1-h"}}));
    index.apply(Event::Delete(bare.clone().watched())).unwrap();
    assert!(misscheduled(&index).is_empty());
    // Without its key, a delete is refused by name, and nothing else changes.
    bare.metadata.uid = None;
    let err = index.apply(Event::Delete(bare.watched())).unwrap_err();
    assert_eq!(err.to_string(), "Pod ns/agent-n1: missing metadata.uid");
    assert_eq!(index.daemonsets()[0].eligible_nodes(), 0);
}

/// The benchmark's synthetic cluster (the shared test kit) classifies as it is designed to:
/// the bench checks the same before it measures anything.
#[test]
fn synthetic_cluster_misschedules_exactly_the_draining_nodes_pods() {
    use support::synth::Shape;
    let shape = Shape { nodes: 200, daemonsets: 6, draining_percent: 5 };
    let index = cluster(
        (0..shape.nodes).map(|i| shape.node(i)).collect(),
        (0..shape.daemonsets).map(|j| shape.daemonset(j)).collect(),
        (0..shape.daemonsets).flat_map(|j| [shape.revision(j, 1), shape.revision(j, 2)]).collect(),
        shape.pod_slots().map(|(j, i)| shape.pod(j, i, 0)).collect(),
    );
    let views = index.daemonsets();
    let pods: Vec<_> = views.iter().flat_map(|d| d.misscheduled_pods()).collect();
    assert!(!pods.is_empty());
    assert_eq!(pods.len(), shape.expected_misscheduled_pods());
    let uncovered: Vec<_> = views.iter().flat_map(|d| d.uncovered_nodes()).collect();
    assert!(!uncovered.is_empty());
    assert_eq!(uncovered.len(), shape.expected_uncovered_nodes());
    assert!(uncovered.iter().all(|u| u.reason.as_str() == "image_pull"), "{:?}", uncovered[0]);
    // Its managedFields name who tainted the nodes.
    assert!(pods.iter().all(|p| p.classification.manager.as_deref() == Some("cluster-autoscaler")), "{:?}", pods[0]);
    assert_eq!(index.daemonsets().len(), shape.daemonsets);
}
