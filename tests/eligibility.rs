//! `NodeShouldRunDaemonPod`, table-driven: one row per rule of
//! `docs/controller-semantics.md`.

mod support;

use misschedule_exporter::k8s::convert;
use misschedule_exporter::model::interner::Interner;
use misschedule_exporter::rules::eligibility::should_run;
use serde_json::{Value, json};
use support::{daemonset, node};

/// (shouldRun, shouldContinueRunning, ineligible reason, key)
type Expected = (bool, bool, &'static str, &'static str);
const RUN: Expected = (true, true, "", "");

fn check(name: &str, pod_spec: Value, node: k8s_openapi::api::core::v1::Node, expected: Expected) {
    let mut interner = Interner::default();
    let ds = convert::daemonset(&daemonset("agent", pod_spec), &mut interner).unwrap();
    let node = convert::node(&node.into(), &mut interner).unwrap();
    let got = match should_run(&node, &ds.template) {
        None => RUN,
        Some(skip) => (false, skip.should_continue_running(), skip.reason().as_str(), leak(skip.key())),
    };
    assert_eq!(got, expected, "case: {name}");
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

#[test]
fn node_name() {
    check("no nodeName", json!({}), node("n1", &[], &[]), RUN);
    check("same nodeName", json!({"nodeName": "n1"}), node("n1", &[], &[]), RUN);
    check(
        "other nodeName",
        json!({"nodeName": "n2"}),
        node("n1", &[], &[]),
        (false, false, "node_name", "spec.nodeName"),
    );
}

#[test]
fn node_selector() {
    let n = || node("n1", &[("disk", "ssd"), ("zone", "a")], &[]);
    check("all pairs match", json!({"nodeSelector": {"disk": "ssd", "zone": "a"}}), n(), RUN);
    check("value differs", json!({"nodeSelector": {"disk": "hdd"}}), n(), (false, false, "node_selector", "disk"));
    check("label missing", json!({"nodeSelector": {"gpu": "true"}}), n(), (false, false, "node_selector", "gpu"));
    check(
        "first failing key, in key order",
        json!({"nodeSelector": {"zz": "1", "aa": "1"}}),
        n(),
        (false, false, "node_selector", "aa"),
    );
    check(
        "empty value needs the label",
        json!({"nodeSelector": {"edge": ""}}),
        n(),
        (false, false, "node_selector", "edge"),
    );
}

#[test]
fn node_affinity_operators() {
    let n = || node("n1", &[("zone", "a"), ("cores", "8"), ("bad", "x")], &[]);
    let na = |key: &'static str| (false, false, "node_affinity", key);
    let one = |e: Value| affinity(json!([{"matchExpressions": [e]}]));
    check("In match", one(expr("zone", "In", &["a", "b"])), n(), RUN);
    check("In no match", one(expr("zone", "In", &["b"])), n(), na("zone"));
    check("In absent label", one(expr("rack", "In", &["1"])), n(), na("rack"));
    check("NotIn match", one(expr("zone", "NotIn", &["b"])), n(), RUN);
    check("NotIn no match", one(expr("zone", "NotIn", &["a"])), n(), na("zone"));
    check("NotIn matches absent label", one(expr("rack", "NotIn", &["1"])), n(), RUN);
    check("Exists", one(expr("zone", "Exists", &[])), n(), RUN);
    check("Exists absent", one(expr("rack", "Exists", &[])), n(), na("rack"));
    check("DoesNotExist absent", one(expr("rack", "DoesNotExist", &[])), n(), RUN);
    check("DoesNotExist present", one(expr("zone", "DoesNotExist", &[])), n(), na("zone"));
    check("Gt", one(expr("cores", "Gt", &["4"])), n(), RUN);
    check("Gt equal is false", one(expr("cores", "Gt", &["8"])), n(), na("cores"));
    check("Lt", one(expr("cores", "Lt", &["16"])), n(), RUN);
    check("Lt false", one(expr("cores", "Lt", &["8"])), n(), na("cores"));
    check("Gt label not an integer", one(expr("bad", "Gt", &["1"])), n(), na("bad"));
    check("Gt absent label", one(expr("rack", "Gt", &["1"])), n(), na("rack"));
    check("Gt value not an integer", one(expr("cores", "Gt", &["x"])), n(), na("cores"));
    check("In without values is invalid", one(expr("zone", "In", &[])), n(), na("zone"));
    check("unknown operator", one(expr("zone", "Near", &["a"])), n(), na("zone"));
}

#[test]
fn node_affinity_terms() {
    let n = || node("n1", &[("zone", "a"), ("disk", "ssd")], &[]);
    let na = |key: &'static str| (false, false, "node_affinity", key);
    let t = |exprs: Vec<Value>| json!({"matchExpressions": exprs});
    check(
        "expressions are ANDed",
        affinity(json!([t(vec![expr("zone", "In", &["a"]), expr("disk", "In", &["hdd"])])])),
        n(),
        na("disk"),
    );
    check(
        "terms are ORed",
        affinity(json!([t(vec![expr("zone", "In", &["b"])]), t(vec![expr("disk", "In", &["ssd"])])])),
        n(),
        RUN,
    );
    check(
        "all terms fail: first term's key",
        affinity(json!([t(vec![expr("zone", "In", &["b"])]), t(vec![expr("disk", "In", &["nvme"])])])),
        n(),
        na("zone"),
    );
    check("empty term matches nothing", affinity(json!([{}])), n(), na(""));
    check("empty term ORed with a matching one", affinity(json!([{}, t(vec![expr("zone", "Exists", &[])])])), n(), RUN);
    check("no terms matches nothing", affinity(json!([])), n(), na(""));
    check("required absent", json!({"affinity": {"nodeAffinity": {}}}), n(), RUN);
    check(
        "preferred only is ignored",
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [expr("zone", "In", &["z"])]}}]}}}),
        n(),
        RUN,
    );
    let field = |op: &str, v: &str| json!({"matchFields": [{"key": "metadata.name", "operator": op, "values": [v]}]});
    check("matchFields In own name", affinity(json!([field("In", "n1")])), n(), RUN);
    check("matchFields In other name", affinity(json!([field("In", "n2")])), n(), na("metadata.name"));
    check("matchFields NotIn", affinity(json!([field("NotIn", "n2")])), n(), RUN);
    check(
        "matchFields on another field",
        affinity(json!([{"matchFields": [{"key": "spec.unschedulable", "operator": "In", "values": ["n1"]}]}])),
        n(),
        na("spec.unschedulable"),
    );
    check(
        "expressions and fields ANDed",
        affinity(
            json!([{"matchExpressions": [expr("zone", "In", &["a"])], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]),
        ),
        n(),
        na("metadata.name"),
    );
    check(
        "nodeSelector checked before affinity",
        json!({"nodeSelector": {"disk": "hdd"}, "affinity": affinity(json!([t(vec![expr("zone", "In", &["b"])])]))["affinity"]}),
        n(),
        (false, false, "node_selector", "disk"),
    );
}

#[test]
fn taints() {
    let no_sched = (false, true, "taint", "dedicated");
    let no_exec = (false, false, "taint", "dedicated");
    check("PreferNoSchedule never blocks", json!({}), node("n1", &[], &["dedicated=x:PreferNoSchedule"]), RUN);
    check("NoSchedule keeps the pod", json!({}), node("n1", &[], &["dedicated=x:NoSchedule"]), no_sched);
    check("NoExecute deletes the pod", json!({}), node("n1", &[], &["dedicated=x:NoExecute"]), no_exec);
    check(
        "any NoExecute makes it (false,false)",
        json!({}),
        node("n1", &[], &["dedicated=x:NoSchedule", "other:NoExecute"]),
        no_exec,
    );
    check("unknown effect ignored", json!({}), node("n1", &[], &["dedicated=x:Sometimes"]), RUN);
    let tol = |t: Value| json!({"tolerations": [t]});
    let n = || node("n1", &[], &["dedicated=x:NoSchedule"]);
    check(
        "Equal same value",
        tol(json!({"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"})),
        n(),
        RUN,
    );
    check("empty operator is Equal", tol(json!({"key": "dedicated", "value": "x"})), n(), RUN);
    check("Equal other value", tol(json!({"key": "dedicated", "operator": "Equal", "value": "y"})), n(), no_sched);
    check("Exists ignores value", tol(json!({"key": "dedicated", "operator": "Exists"})), n(), RUN);
    check(
        "empty effect matches all effects",
        tol(json!({"key": "dedicated", "operator": "Exists"})),
        node("n1", &[], &["dedicated:NoExecute"]),
        RUN,
    );
    check(
        "effect must agree",
        tol(json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})),
        n(),
        no_sched,
    );
    check(
        "empty key with Exists tolerates everything",
        tol(json!({"operator": "Exists"})),
        node("n1", &[], &["a:NoSchedule", "b:NoExecute"]),
        RUN,
    );
    check("other key", tol(json!({"key": "other", "operator": "Exists"})), n(), no_sched);
    check(
        "alpha Gt operator tolerates nothing",
        tol(json!({"key": "dedicated", "operator": "Gt", "value": "1"})),
        n(),
        no_sched,
    );
    check(
        "tolerationSeconds plays no part",
        tol(json!({"key": "dedicated", "operator": "Exists", "tolerationSeconds": 0})),
        n(),
        RUN,
    );
    check("placement before taints", json!({"nodeSelector": {"a": "b"}}), n(), (false, false, "node_selector", "a"));
}

#[test]
fn default_tolerations() {
    for taint in [
        "node.kubernetes.io/not-ready:NoExecute",
        "node.kubernetes.io/unreachable:NoExecute",
        "node.kubernetes.io/disk-pressure:NoSchedule",
        "node.kubernetes.io/memory-pressure:NoSchedule",
        "node.kubernetes.io/pid-pressure:NoSchedule",
        "node.kubernetes.io/unschedulable:NoSchedule",
    ] {
        check(taint, json!({}), node("n1", &[], &[taint]), RUN);
    }
    // Only with the listed effect: not-ready as NoSchedule is not tolerated by default.
    check(
        "not-ready NoSchedule",
        json!({}),
        node("n1", &[], &["node.kubernetes.io/not-ready:NoSchedule"]),
        (false, true, "taint", "node.kubernetes.io/not-ready"),
    );
    check(
        "unreachable NoSchedule",
        json!({}),
        node("n1", &[], &["node.kubernetes.io/unreachable:NoSchedule"]),
        (false, true, "taint", "node.kubernetes.io/unreachable"),
    );
    check(
        "unschedulable NoExecute",
        json!({}),
        node("n1", &[], &["node.kubernetes.io/unschedulable:NoExecute"]),
        (false, false, "taint", "node.kubernetes.io/unschedulable"),
    );
    let net = "node.kubernetes.io/network-unavailable:NoSchedule";
    check(
        "network-unavailable without hostNetwork",
        json!({}),
        node("n1", &[], &[net]),
        (false, true, "taint", "node.kubernetes.io/network-unavailable"),
    );
    check("network-unavailable with hostNetwork", json!({"hostNetwork": true}), node("n1", &[], &[net]), RUN);
}

#[test]
fn cordon_never_misschedules() {
    // `kubectl cordon` sets spec.unschedulable and the unschedulable taint.
    check("cordoned", json!({}), node("n1", &[], &["node.kubernetes.io/unschedulable:NoSchedule"]), RUN);
}
