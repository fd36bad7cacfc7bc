//! What-if through the library, on hand-built scenes: one table per effect and per rule
//! (nodeSelector, required affinity with NotIn and DoesNotExist, NoSchedule vs NoExecute,
//! the default tolerations, nodeName, tolerations that shrink), and what it refuses.

mod support;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use misschedule_exporter::index::Index;
use misschedule_exporter::k8s::slim::SlimNode;
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::whatif::edit::{LABEL_MANAGER, LabelEdit, TAINT_MANAGER, TaintEdit};
use misschedule_exporter::whatif::simulate::{self, Outcome};
use serde_json::{Value, json};
use support::*;

const GPU: &str = "feature.node.kubernetes.io/pci-10de.present";

/// A scene: every DaemonSet at revision `h`, with a pod on each listed node.
fn scene(nodes: Vec<Node>, daemonsets: &[(&DaemonSet, &[&str])]) -> Index {
    let revisions = daemonsets.iter().map(|(ds, _)| revision(ds, "h")).collect();
    let pods: Vec<Pod> =
        daemonsets.iter().flat_map(|(ds, on)| on.iter().map(|n| daemon_pod(ds, n, "h", true))).collect();
    cluster(nodes, daemonsets.iter().map(|(ds, _)| (*ds).clone()).collect(), revisions, pods)
}

/// `daemonset node pod effect reason key` per row, then `daemonset before->after` per desired.
fn show(outcome: Outcome) -> (Vec<String>, Vec<String>) {
    let rows = outcome
        .changes
        .iter()
        .map(|r| {
            let pod = if r.pod.is_empty() { "-" } else { &r.pod };
            format!("{} {} {pod} {} {} {}", r.daemonset, r.node, r.effect.as_str(), r.reason, r.key)
                .trim_end()
                .to_owned()
        })
        .collect();
    let desired = outcome.desired.iter().map(|d| format!("{} {}->{}", d.daemonset, d.before, d.after)).collect();
    (rows, desired)
}

fn label(index: &mut Index, node: &Node, specs: &[&str], overwrite: bool, manager: &str) -> (Vec<String>, Vec<String>) {
    let edit = LabelEdit::parse(&specs.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let current: SlimNode = node.clone().into();
    let (edited, _) = edit.apply(&current, overwrite, manager, NOW + 60).unwrap();
    show(simulate::nodes(index, &Selection::default(), vec![current], vec![edited]).unwrap())
}

fn taint(index: &mut Index, node: &Node, specs: &[&str]) -> (Vec<String>, Vec<String>) {
    let edit = TaintEdit::parse(&specs.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let current: SlimNode = node.clone().into();
    let edited = edit.apply(&current, false, TAINT_MANAGER, NOW + 60).unwrap();
    show(simulate::nodes(index, &Selection::default(), vec![current], vec![edited]).unwrap())
}

fn apply(index: &mut Index, manifests: Vec<DaemonSet>) -> (Vec<String>, Vec<String>) {
    show(simulate::daemonsets(index, manifests.into_iter().map(manifest).collect()).unwrap())
}

/// A DaemonSet as a manifest has it: no uid, no status.
fn manifest(mut ds: DaemonSet) -> DaemonSet {
    ds.metadata.uid = None;
    ds.status = None;
    ds
}

fn rows(rows: &[&str], desired: &[&str]) -> (Vec<String>, Vec<String>) {
    (rows.iter().map(|s| s.to_string()).collect(), desired.iter().map(|s| s.to_string()).collect())
}

#[test]
fn node_selector_a_label_removed_deletes_and_a_label_added_creates() {
    let ds = daemonset("ssd", json!({"nodeSelector": {"disk": "ssd"}}));
    let (n1, n2) = (node("n1", &[("disk", "ssd")], &[]), node("n2", &[], &[]));
    let mut index = scene(vec![n1.clone(), n2.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        label(&mut index, &n1, &["disk-"], false, LABEL_MANAGER),
        rows(&["ssd n1 ssd-n1 delete label_drift disk"], &["ssd 1->0"])
    );
    let mut index = scene(vec![n1.clone(), n2.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        label(&mut index, &n2, &["disk=ssd"], false, LABEL_MANAGER),
        rows(&["ssd n2 - create node_selector disk"], &["ssd 1->2"])
    );
    let mut index = scene(vec![n1.clone(), n2.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        label(&mut index, &n1, &["disk=hdd"], true, LABEL_MANAGER),
        rows(&["ssd n1 ssd-n1 delete label_drift disk"], &["ssd 1->0"])
    );
    // A label no DaemonSet reads changes nothing, and says so.
    let mut index = scene(vec![n1.clone(), n2], &[(&ds, &["n1"])]);
    assert_eq!(label(&mut index, &n1, &["team=a"], false, LABEL_MANAGER), rows(&[], &[]));
}

#[test]
fn who_changes_a_label_decides_nfd_change() {
    let ds = daemonset("gpu", json!({"nodeSelector": {GPU: "true", "accel": "yes"}}));
    let n1 = node("n1", &[(GPU, "true"), ("accel", "yes")], &[]);
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    let nfd_key = format!("{GPU}-");
    assert_eq!(
        label(&mut index, &n1, &[&nfd_key], false, LABEL_MANAGER).0,
        [format!("gpu n1 gpu-n1 delete nfd_change {GPU}")]
    );
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(label(&mut index, &n1, &["accel=no"], true, "nfd-master").0, ["gpu n1 gpu-n1 delete nfd_change accel"]);
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        label(&mut index, &n1, &["accel=no"], true, LABEL_MANAGER).0,
        ["gpu n1 gpu-n1 delete label_drift accel"]
    );
}

#[test]
fn required_affinity_a_removal_can_satisfy_not_in_and_does_not_exist() {
    let term = |expression: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}});
    let not_spot = daemonset("not-spot", term(json!({"key": "pool", "operator": "NotIn", "values": ["spot"]})));
    let (spot, steady) = (node("n1", &[("pool", "spot")], &[]), node("n2", &[("pool", "steady")], &[]));
    let mut index = scene(vec![spot.clone(), steady.clone()], &[(&not_spot, &["n2"])]);
    assert_eq!(
        label(&mut index, &spot, &["pool-"], false, LABEL_MANAGER),
        rows(&["not-spot n1 - create node_affinity pool"], &["not-spot 1->2"])
    );
    let mut index = scene(vec![spot, steady.clone()], &[(&not_spot, &["n2"])]);
    assert_eq!(
        label(&mut index, &steady, &["pool=spot"], true, LABEL_MANAGER),
        rows(&["not-spot n2 not-spot-n2 delete label_drift pool"], &["not-spot 1->0"])
    );

    let no_taint_label = daemonset("plain", term(json!({"key": "legacy", "operator": "DoesNotExist"})));
    let (legacy, fresh) = (node("n1", &[("legacy", "true")], &[]), node("n2", &[], &[]));
    let mut index = scene(vec![legacy.clone(), fresh.clone()], &[(&no_taint_label, &["n2"])]);
    assert_eq!(
        label(&mut index, &legacy, &["legacy-"], false, LABEL_MANAGER),
        rows(&["plain n1 - create node_affinity legacy"], &["plain 1->2"])
    );
    let mut index = scene(vec![legacy, fresh.clone()], &[(&no_taint_label, &["n2"])]);
    assert_eq!(
        label(&mut index, &fresh, &["legacy=true"], false, LABEL_MANAGER),
        rows(&["plain n2 plain-n2 delete label_drift legacy"], &["plain 1->0"])
    );
}

#[test]
fn no_schedule_strands_the_pod_and_no_execute_deletes_it() {
    let ds = daemonset("agent", json!({}));
    let n1 = node("n1", &[], &[]);
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        taint(&mut index, &n1, &["dedicated=db:NoSchedule"]),
        rows(&["agent n1 agent-n1 misschedule taint_added dedicated"], &["agent 1->0"])
    );
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        taint(&mut index, &n1, &["dedicated=db:NoExecute"]),
        rows(&["agent n1 agent-n1 delete taint_added dedicated"], &["agent 1->0"])
    );
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        taint(&mut index, &n1, &["ToBeDeletedByClusterAutoscaler=1780272000:NoSchedule"]),
        rows(&["agent n1 agent-n1 misschedule autoscaler_drain ToBeDeletedByClusterAutoscaler"], &["agent 1->0"])
    );
    // PreferNoSchedule never blocks a daemon pod.
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    assert_eq!(taint(&mut index, &n1, &["soft=x:PreferNoSchedule"]), rows(&[], &[]));
    // The taint goes: the stranded pod counts again; a node without a pod gets one.
    let tainted = node("n1", &[], &["dedicated=db:NoSchedule"]);
    let bare = node("n2", &[], &["dedicated=db:NoSchedule"]);
    let mut index = scene(vec![tainted.clone(), bare.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        taint(&mut index, &tainted, &["dedicated:NoSchedule-"]),
        rows(&["agent n1 agent-n1 recover taint_added dedicated"], &["agent 0->1"])
    );
    let mut index = scene(vec![tainted, bare.clone()], &[(&ds, &["n1"])]);
    assert_eq!(
        taint(&mut index, &bare, &["dedicated-"]),
        rows(&["agent n2 - create taint dedicated"], &["agent 0->1"])
    );
}

#[test]
fn the_default_tolerations_hold_and_network_unavailable_is_for_host_network_only() {
    let ds = daemonset("agent", json!({}));
    let host = daemonset("cni", json!({"hostNetwork": true}));
    let n1 = node("n1", &[], &[]);
    for default in [
        "node.kubernetes.io/unschedulable:NoSchedule",
        "node.kubernetes.io/not-ready:NoExecute",
        "node.kubernetes.io/unreachable:NoExecute",
        "node.kubernetes.io/disk-pressure:NoSchedule",
    ] {
        let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"]), (&host, &["n1"])]);
        assert_eq!(taint(&mut index, &n1, &[default]), rows(&[], &[]), "{default}");
    }
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"]), (&host, &["n1"])]);
    assert_eq!(
        taint(&mut index, &n1, &["node.kubernetes.io/network-unavailable:NoSchedule"]),
        rows(&["agent n1 agent-n1 misschedule taint_added node.kubernetes.io/network-unavailable"], &["agent 1->0"])
    );
}

#[test]
fn node_name_moves_the_pod() {
    let ds = daemonset("pinned", json!({"nodeName": "n1"}));
    let mut index = scene(vec![node("n1", &[], &[]), node("n2", &[], &[])], &[(&ds, &["n1"])]);
    let moved = daemonset("pinned", json!({"nodeName": "n2"}));
    assert_eq!(
        apply(&mut index, vec![moved]),
        rows(
            &[
                "pinned n1 pinned-n1 delete node_name_mismatch spec.nodeName",
                "pinned n2 - create node_name spec.nodeName"
            ],
            &["pinned 1->1"]
        )
    );
}

#[test]
fn tolerations_that_shrink_strand_or_delete_as_the_taint_says() {
    let tolerant = daemonset(
        "agent",
        json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}, {"key": "evict", "operator": "Exists"}]}),
    );
    let nodes = vec![
        node("n1", &[], &["dedicated=db:NoSchedule"]),
        node("n2", &[], &["evict=now:NoExecute"]),
        node("n3", &[], &[]),
    ];
    let mut index = scene(nodes.clone(), &[(&tolerant, &["n1", "n2", "n3"])]);
    let strict = daemonset("agent", json!({}));
    assert_eq!(
        apply(&mut index, vec![strict]),
        rows(
            &[
                "agent n1 agent-n1 misschedule daemonset_changed dedicated",
                "agent n2 agent-n2 delete daemonset_changed evict"
            ],
            &["agent 3->1"]
        )
    );
    // Growing them back recovers the stranded pod and creates the deleted one.
    let strict = daemonset("agent", json!({}));
    let mut index = scene(nodes, &[(&strict, &["n1", "n3"])]);
    assert_eq!(
        apply(&mut index, vec![tolerant]),
        rows(&["agent n1 agent-n1 recover taint_added dedicated", "agent n2 - create taint evict"], &["agent 1->3"])
    );
}

#[test]
fn a_new_template_alone_is_a_rollout_not_a_change_of_placement() {
    let ds =
        daemonset("agent", json!({"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "a", "image": "agent:1"}]}));
    let mut index = scene(vec![node("n1", &[("disk", "ssd")], &[])], &[(&ds, &["n1"])]);
    let rolled =
        daemonset("agent", json!({"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "a", "image": "agent:2"}]}));
    assert_eq!(apply(&mut index, vec![rolled]), rows(&[], &["agent 1->1"]));
}

#[test]
fn a_new_daemonset_creates_a_pod_on_each_node_it_fits() {
    let mut index = scene(vec![node("n1", &[("disk", "ssd")], &[]), node("n2", &[], &[])], &[]);
    let fresh = daemonset("fresh", json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(apply(&mut index, vec![fresh]), rows(&["fresh n1 - create daemonset_created"], &["fresh 0->1"]));
}

#[test]
fn a_terminating_pod_is_no_change_but_is_named() {
    let ds = daemonset("ssd", json!({"nodeSelector": {"disk": "ssd"}}));
    let n1 = node("n1", &[("disk", "ssd")], &[]);
    let mut going = daemon_pod(&ds, "n1", "h", true);
    going.metadata.deletion_timestamp = Some(from(json!("2026-05-31T23:59:30Z")));
    let mut index = cluster(vec![n1.clone()], vec![ds.clone()], vec![revision(&ds, "h")], vec![going]);
    let edit = LabelEdit::parse(&["disk-".to_owned()]).unwrap();
    let current: SlimNode = n1.into();
    let (edited, _) = edit.apply(&current, false, LABEL_MANAGER, NOW).unwrap();
    let outcome = simulate::nodes(&mut index, &Selection::default(), vec![current], vec![edited]).unwrap();
    assert!(outcome.changes.is_empty(), "{:?}", outcome.changes);
    let named: Vec<(&str, &str)> = outcome.terminating.iter().map(|t| (t.node.as_str(), t.pod.as_str())).collect();
    assert_eq!(named, [("n1", "ssd-n1")]);
}

#[test]
fn the_selection_limits_what_is_looked_at() {
    let ds = daemonset("agent", json!({}));
    let n1 = node("n1", &[], &[]);
    let mut index = scene(vec![n1.clone()], &[(&ds, &["n1"])]);
    let edit = TaintEdit::parse(&["x:NoExecute".to_owned()]).unwrap();
    let current: SlimNode = n1.into();
    let edited = edit.apply(&current, false, TAINT_MANAGER, NOW).unwrap();
    let elsewhere = Selection { namespace: Some("other".into()), daemonset: None };
    let outcome = simulate::nodes(&mut index, &elsewhere, vec![current], vec![edited]).unwrap();
    assert_eq!((outcome.daemonsets, outcome.nodes, outcome.changes.len()), (0, 1, 0));
}

#[test]
fn what_the_api_server_would_refuse_is_refused() {
    let ds = daemonset("agent", json!({}));
    let mut index = scene(vec![node("n1", &[], &[])], &[(&ds, &["n1"])]);
    let mut reselected = manifest(daemonset("agent", json!({})));
    reselected.spec.as_mut().unwrap().selector = from(json!({"matchLabels": {"app": "agent", "tier": "x"}}));
    reselected
        .spec
        .as_mut()
        .unwrap()
        .template
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert("tier".into(), "x".into());
    let error = simulate::daemonsets(&mut index, vec![reselected]).unwrap_err().to_string();
    assert!(error.contains("spec.selector differs from the DaemonSet's, and it is immutable"), "{error}");
    let mut mismatched = manifest(daemonset("other", json!({})));
    mismatched.spec.as_mut().unwrap().selector = from(json!({"matchLabels": {"app": "nope"}}));
    let error = simulate::daemonsets(&mut index, vec![mismatched]).unwrap_err().to_string();
    assert!(error.contains("does not match spec.template.metadata.labels"), "{error}");
    let twice = vec![manifest(daemonset("agent", json!({}))), manifest(daemonset("agent", json!({})))];
    assert!(simulate::daemonsets(&mut index, twice).unwrap_err().to_string().contains("is given twice"));
}

#[test]
fn kubectl_syntax_and_checks() {
    use misschedule_exporter::whatif::edit::split_args;
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let targets =
        split_args(&args(&["node", "n1", "node/n2", "n1", "a=b", "c-"]), LabelEdit::is_change, "label").unwrap();
    assert_eq!((targets.nodes, targets.changes), (args(&["n1", "n2"]), args(&["a=b", "c-"])));
    let error = split_args(&args(&["n1", "a=b", "n2"]), LabelEdit::is_change, "label").unwrap_err();
    assert_eq!(error.to_string(), "all resources must be specified before label changes: n2");
    assert!(split_args(&args(&["pod/p1", "a=b"]), LabelEdit::is_change, "label").is_err());
    // `key:Effect` is a taint change, not a node.
    let targets = split_args(&args(&["n1", "k:NoSchedule"]), TaintEdit::is_change, "taint").unwrap();
    assert_eq!(targets.changes, args(&["k:NoSchedule"]));

    let label_error = |specs: &[&str]| LabelEdit::parse(&args(specs)).unwrap_err().to_string();
    assert_eq!(label_error(&["a=b", "a-"]), "can not both modify and remove a label in the same command");
    assert_eq!(label_error(&["a=b=c"]), "invalid label spec: a=b=c");
    assert!(label_error(&["a=-x"]).starts_with("invalid label value: \"a=-x\""));
    let taint_error = |specs: &[&str]| TaintEdit::parse(&args(specs)).unwrap_err().to_string();
    assert_eq!(
        taint_error(&["k=v:NoSchedule", "k:NoSchedule-"]),
        "can not both modify and remove the following taint(s) in the same command: k=v:NoSchedule"
    );
    assert!(taint_error(&["k=v"]).starts_with("invalid taint spec: k=v, a key is"));
    assert_eq!(taint_error(&["k:Nope"]), "invalid taint effect: Nope, unsupported taint effect");
    assert_eq!(taint_error(&["a:b:NoSchedule"]), "invalid taint spec: a:b:NoSchedule");

    // Applied to a node: kubectl's order (new taints first), its overwrite rule, and the
    // field ownership the API server would record.
    let n1: SlimNode = node("n1", &[("zone", "a")], &["old=x:NoSchedule", "k=v:NoExecute"]).into();
    let edit = TaintEdit::parse(&args(&["k=w:NoExecute", "new:NoSchedule"])).unwrap();
    assert_eq!(
        edit.apply(&n1, false, TAINT_MANAGER, NOW).unwrap_err().to_string(),
        "node n1 already has [k] taint(s) with same effect(s) and --overwrite is false"
    );
    let edited = edit.apply(&n1, true, TAINT_MANAGER, NOW).unwrap();
    let taints: Vec<String> = edited
        .taints()
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value.as_deref().unwrap_or(""), t.effect))
        .collect();
    assert_eq!(taints, ["k=w:NoExecute", "new=:NoSchedule", "old=x:NoSchedule"]);
    let owners: Vec<_> = edited.owners.iter().map(|o| (o.manager.as_str(), o.update, o.taints)).collect();
    assert_eq!(owners, [(TAINT_MANAGER, true, true)]);
    let removal = TaintEdit::parse(&args(&["k-"])).unwrap().apply(&n1, false, TAINT_MANAGER, NOW).unwrap();
    assert_eq!(removal.taints().len(), 1, "every effect of k goes");
    let (relabelled, warnings) =
        LabelEdit::parse(&args(&["zone=b", "gone-"])).unwrap().apply(&n1, true, LABEL_MANAGER, NOW).unwrap();
    assert_eq!(relabelled.labels.get("zone"), Some("b"));
    assert_eq!(warnings, ["node n1: label \"gone\" not found."]);

    // A label's new writer owns it and its old ones no longer do; an entry left owning
    // nothing is no owner.
    let mut owned = node("n1", &[("pool", "p"), ("zone", "a")], &[]);
    owned.metadata.managed_fields = serde_json::from_value(json!([
        {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:pool": {}, "f:zone": {}}}}},
        {"manager": "nfd-master", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:zone": {}}}}}
    ]))
    .unwrap();
    let edit = LabelEdit::parse(&args(&["zone=b"])).unwrap();
    let (relabelled, _) = edit.apply(&owned.into(), true, LABEL_MANAGER, NOW).unwrap();
    let owners: Vec<_> =
        relabelled.owners.iter().map(|o| (o.manager.as_str(), o.labels.iter().collect::<Vec<_>>(), o.time)).collect();
    assert_eq!(owners, [("kubelet", vec!["pool"], 0), (LABEL_MANAGER, vec!["zone"], NOW)]);
}
