//! Who made the change (`manager`), driven through `Index::apply` with nodes whose
//! managedFields are shaped as the API server writes them (checked on the real control
//! plane: a remover that owns nothing else leaves no entry; the taint list changes hands
//! on every write).

mod support;

use k8s_openapi::api::core::v1::Node;
use misschedule_exporter::index::{self, Index};
use misschedule_exporter::rules::attribution::NfdManagers;
use misschedule_exporter::rules::reason::Conventions;
use serde_json::{Value, json};
use support::*;

/// (manager, time in seconds after 2026-06-01, owned label keys, owns the taint list)
type Owner<'a> = (&'a str, i64, &'a [&'a str], bool);

fn owned(node: Node, owners: &[Owner<'_>]) -> Node {
    let entries: Vec<Value> = owners
        .iter()
        .map(|(manager, t, labels, taints)| {
            let mut fields = serde_json::Map::new();
            if !labels.is_empty() {
                let keys: serde_json::Map<String, Value> =
                    labels.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
                fields.insert("f:metadata".into(), json!({"f:labels": keys}));
            }
            if *taints {
                fields.insert("f:spec".into(), json!({"f:taints": {}}));
            }
            let time = jiff::Timestamp::from_second(NOW + t).unwrap().to_string();
            json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": time,
                   "fieldsType": "FieldsV1", "fieldsV1": fields})
        })
        .collect();
    let mut value = serde_json::to_value(node).unwrap();
    value["metadata"]["managedFields"] = Value::Array(entries);
    from(value)
}

/// DaemonSet `agent` selecting `gpu=yes` (if `select_gpu`) with a pod on n1, on `n1`.
fn start(n1: Node, select_gpu: bool, nfd: NfdManagers) -> Index {
    let spec = if select_gpu { json!({"nodeSelector": {"gpu": "yes"}}) } else { json!({}) };
    let ds = daemonset("agent", spec);
    let mut index = Index::new(index::Config {
        conventions: Conventions { nfd_managers: nfd, ..Conventions::default() },
        ..Default::default()
    });
    index.set_now(NOW);
    list(&mut index, vec![n1]);
    list(&mut index, vec![ds.clone()]);
    list(&mut index, vec![revision(&ds, "h")]);
    list(&mut index, vec![daemon_pod(&ds, "n1", "h", true)]);
    index
}

/// (reason, key, manager) of the one misscheduled pod, or None.
fn verdict(index: &Index) -> Option<(String, String, String)> {
    let views = index.daemonsets();
    let pods: Vec<_> = views.iter().flat_map(|ds| ds.misscheduled_pods()).collect();
    assert!(pods.len() <= 1, "{pods:?}");
    pods.first().map(|p| {
        let c = &p.classification;
        (c.reason.as_str().to_owned(), c.key.to_string(), c.manager.as_deref().unwrap_or_default().to_owned())
    })
}

fn v(reason: &str, key: &str, manager: &str) -> Option<(String, String, String)> {
    Some((reason.into(), key.into(), manager.into()))
}

const GPU: &[(&str, &str)] = &[("gpu", "yes")];

#[test]
fn at_start_a_present_label_or_taint_is_its_owners() {
    let n1 = owned(node("n1", &[("gpu", "no")], &[]), &[("kubectl-label", 0, &["gpu"], false)]);
    assert_eq!(verdict(&start(n1, true, NfdManagers::default())), v("label_drift", "gpu", "kubectl-label"));

    let n1 = owned(node("n1", &[], &["dedicated=x:NoSchedule"]), &[("kubectl-taint", 0, &[], true)]);
    assert_eq!(verdict(&start(n1, false, NfdManagers::default())), v("taint_added", "dedicated", "kubectl-taint"));

    // A label already gone at start: nobody can say who removed it.
    let n1 = owned(node("n1", &[], &[]), &[("kubelet", 0, &["kubernetes.io/hostname"], false)]);
    assert_eq!(verdict(&start(n1, true, NfdManagers::default())), v("label_drift", "gpu", ""));
}

#[test]
fn a_removal_seen_live_names_the_remover() {
    let before = &[("kubelet", 0, &["kubernetes.io/hostname"][..], false), ("labeler", 1, &["gpu"][..], false)];
    let mut index = start(owned(node("n1", GPU, &[]), before), true, NfdManagers::default());
    assert_eq!(verdict(&index), None);
    // The remover owns another label, so its entry has a new time.
    let after = &[("kubelet", 0, &["kubernetes.io/hostname"][..], false), ("ops-tool", 5, &["team"][..], false)];
    apply(&mut index, owned(node("n1", &[("team", "a")], &[]), after));
    assert_eq!(verdict(&index), v("label_drift", "gpu", "ops-tool"));
    // Later writes by others do not change who removed it.
    let later = &[("kubelet", 9, &["kubernetes.io/hostname"][..], false), ("ops-tool", 5, &["team"][..], false)];
    apply(&mut index, owned(node("n1", &[("team", "a")], &[]), later));
    assert_eq!(verdict(&index), v("label_drift", "gpu", "ops-tool"));
    // Put back by `fixer`, then removed by a manager that owns nothing else and so leaves no
    // entry: the label's last owner is the best answer.
    apply(
        &mut index,
        owned(
            node("n1", GPU, &[]),
            &[("kubelet", 9, &["kubernetes.io/hostname"], false), ("fixer", 10, &["gpu"], false)],
        ),
    );
    assert_eq!(verdict(&index), None);
    apply(&mut index, owned(node("n1", &[], &[]), &[("kubelet", 9, &["kubernetes.io/hostname"], false)]));
    assert_eq!(verdict(&index), v("label_drift", "gpu", "fixer"));
}

#[test]
fn labels_owned_or_removed_by_nfd_are_nfd_changes_whatever_their_name() {
    // nfd-master removes a label it owns, keeping others: its entry has a new time.
    let before = &[("nfd-master", 0, &["gpu", "cpu-model"][..], false)];
    let mut index =
        start(owned(node("n1", &[("gpu", "yes"), ("cpu-model", "x")], &[]), before), true, NfdManagers::default());
    apply(&mut index, owned(node("n1", &[("cpu-model", "x")], &[]), &[("nfd-master", 3, &["cpu-model"], false)]));
    assert_eq!(verdict(&index), v("nfd_change", "gpu", "nfd-master"));

    // A label NFD owns with another value.
    let n1 = owned(node("n1", &[("gpu", "no")], &[]), &[("nfd-worker", 0, &["gpu"], false)]);
    assert_eq!(verdict(&start(n1.clone(), true, NfdManagers::default())), v("nfd_change", "gpu", "nfd-worker"));
    // --nfd-managers replaces the list.
    assert_eq!(verdict(&start(n1.clone(), true, NfdManagers::new(["my-nfd"]))), v("label_drift", "gpu", "nfd-worker"));
    let n1 = owned(node("n1", &[("gpu", "no")], &[]), &[("my-nfd", 0, &["gpu"], false)]);
    assert_eq!(verdict(&start(n1, true, NfdManagers::new(["my-nfd"]))), v("nfd_change", "gpu", "my-nfd"));

    // A taint NFD wrote.
    let n1 = owned(node("n1", &[], &["example.com/gpu=true:NoSchedule"]), &[("nfd-master", 0, &[], true)]);
    assert_eq!(verdict(&start(n1, false, NfdManagers::default())), v("nfd_change", "example.com/gpu", "nfd-master"));
}

#[test]
fn a_taint_keeps_its_author_when_another_manager_rewrites_the_list() {
    let mut index = start(owned(node("n1", &[], &[]), &[]), false, NfdManagers::default());
    apply(&mut index, owned(node("n1", &[], &["a=b:NoSchedule"]), &[("kubectl-taint", 1, &[], true)]));
    assert_eq!(verdict(&index), v("taint_added", "a", "kubectl-taint"));
    // A second manager adds a taint: the list is now its, but `a` is still kubectl's.
    apply(&mut index, owned(node("n1", &[], &["a=b:NoSchedule", "c=d:NoSchedule"]), &[("tainter2", 2, &[], true)]));
    let views = index.daemonsets();
    let pods = views[0].misscheduled_pods();
    assert_eq!(pods[0].classification.key.as_ref(), "a", "the first untolerated taint decides");
    assert_eq!(pods[0].classification.manager.as_deref(), Some("kubectl-taint"));
    drop(views);
    // `a` removed by a third: `c` was tainter2's.
    apply(&mut index, owned(node("n1", &[], &["c=d:NoSchedule"]), &[("tainter3", 3, &[], true)]));
    assert_eq!(verdict(&index), v("taint_added", "c", "tainter2"));

    // A taint present at start is the list owner's, and stays so when the list changes hands.
    let n1 = owned(node("n1", &[], &["x=y:NoSchedule"]), &[("kubectl-taint", 0, &[], true)]);
    let mut index = start(n1, false, NfdManagers::default());
    apply(&mut index, owned(node("n1", &[], &["x=y:NoSchedule", "z:NoSchedule"]), &[("other", 4, &[], true)]));
    let views = index.daemonsets();
    assert_eq!(views[0].misscheduled_pods()[0].classification.manager.as_deref(), Some("kubectl-taint"));
}

#[test]
fn drains_name_the_autoscaler_and_daemonset_changes_name_nobody() {
    let n1 = owned(
        node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1780272000:NoSchedule"]),
        &[("cluster-autoscaler", 0, &[], true)],
    );
    assert_eq!(
        verdict(&start(n1, false, NfdManagers::default())),
        v("autoscaler_drain", "ToBeDeletedByClusterAutoscaler", "cluster-autoscaler")
    );

    // The DaemonSet changed, not the node: the node's label owner did nothing.
    let n1 = owned(node("n1", &[("gpu", "no")], &[]), &[("kubectl-label", 0, &["gpu"], false)]);
    let current = daemonset("agent", json!({"nodeSelector": {"gpu": "yes"}}));
    let original = daemonset("agent", json!({}));
    let index = cluster(
        vec![n1],
        vec![current],
        vec![revision(&original, "old")],
        vec![daemon_pod(&original, "n1", "old", true)],
    );
    assert_eq!(verdict(&index), v("daemonset_changed", "gpu", ""));
}

#[test]
fn only_removals_of_selected_labels_are_remembered() {
    let before = &[("labeler", 0, &["gpu", "team"][..], false)];
    let mut index =
        start(owned(node("n1", &[("gpu", "yes"), ("team", "a")], &[]), before), true, NfdManagers::default());
    // `team` is selected by nothing: its removal is forgotten; `gpu`'s is kept.
    apply(&mut index, owned(node("n1", &[], &[]), &[("other", 5, &["zone"], false)]));
    assert_eq!(verdict(&index), v("label_drift", "gpu", "other"));
    // A DaemonSet that starts selecting `team` afterwards cannot know who removed it.
    let by_team = daemonset("by-team", json!({"nodeSelector": {"team": "a"}}));
    apply(&mut index, by_team.clone());
    apply(&mut index, revision(&by_team, "t"));
    apply(&mut index, daemon_pod(&by_team, "n1", "t", true));
    let views = index.daemonsets();
    let team = views.iter().find(|d| &*d.ds.id.name == "by-team").unwrap();
    let pods = team.misscheduled_pods();
    assert_eq!((pods[0].classification.key.as_ref(), pods[0].classification.manager.as_deref()), ("team", None));
}
