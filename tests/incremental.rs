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
    SetDaemonSet { ds: usize, worker_only: bool, tolerate_x: bool, selector: Selector, deleting: bool },
    DeleteDaemonSet(usize),
    SetPod { ds: usize, node: usize, bound: bool, matches: bool, owner: Owner, terminal: bool, deleted: bool },
    DeletePod { ds: usize, node: usize },
}

/// Which pods a DaemonSet selects: its own (`app=dsN`), or every agent pod (`tier=agent`),
/// so that two DaemonSets can contest an orphan; or none at all (an empty selector, which
/// the controller refuses to sync).
#[derive(Clone, Copy, Debug)]
enum Selector {
    Own,
    Wide,
    Empty,
}

/// A pod's controller: its DaemonSet, none (an orphan), or a non-controller reference only.
#[derive(Clone, Copy, Debug)]
enum Owner {
    Controller,
    None,
    NotController,
}

fn op() -> impl Strategy<Value = Op> {
    let selector = prop_oneof![4 => Just(Selector::Own), 3 => Just(Selector::Wide), 1 => Just(Selector::Empty)];
    let owner = prop_oneof![3 => Just(Owner::Controller), 2 => Just(Owner::None), 1 => Just(Owner::NotController)];
    prop_oneof![
        3 => (0..3usize, any::<bool>(), any::<[bool; 4]>()).prop_map(|(node, worker, taints)| Op::SetNode { node, worker, taints }),
        1 => (0..3usize).prop_map(Op::DeleteNode),
        2 => (0..2usize, any::<bool>(), any::<bool>(), selector, proptest::bool::weighted(0.2))
            .prop_map(|(ds, worker_only, tolerate_x, selector, deleting)| Op::SetDaemonSet { ds, worker_only, tolerate_x, selector, deleting }),
        1 => (0..2usize).prop_map(Op::DeleteDaemonSet),
        3 => (0..2usize, 0..4usize, any::<bool>(), any::<bool>(), owner, any::<bool>(), proptest::bool::weighted(0.3))
            .prop_map(|(ds, node, bound, matches, owner, terminal, deleted)| Op::SetPod { ds, node, bound, matches, owner, terminal, deleted }),
        1 => (0..2usize, 0..4usize).prop_map(|(ds, node)| Op::DeletePod { ds, node }),
    ]
}

fn make_node(i: usize, worker: bool, taints: [bool; 4]) -> Node {
    let on: Vec<&str> = TAINTS.iter().zip(taints).filter(|(_, on)| *on).map(|(t, _)| *t).collect();
    node(&format!("n{i}"), if worker { &[("role", "worker")] } else { &[] }, &on)
}

fn make_ds(j: usize, worker_only: bool, tolerate_x: bool, selector: Selector, deleting: bool) -> DaemonSet {
    let mut spec = json!({});
    if worker_only {
        spec["nodeSelector"] = json!({"role": "worker"});
    }
    if tolerate_x {
        spec["tolerations"] = json!([{"key": "x", "operator": "Exists"}]);
    }
    let mut ds = daemonset(&format!("ds{j}"), spec);
    match selector {
        Selector::Own => {}
        Selector::Wide => ds.spec.as_mut().unwrap().selector = from(json!({"matchLabels": {"tier": "agent"}})),
        Selector::Empty => ds.spec.as_mut().unwrap().selector = from(json!({})),
    }
    if deleting {
        ds.metadata.deletion_timestamp = Some(from(json!("2026-01-02T00:00:00Z")));
    }
    ds
}

fn make_pod(
    ds: &DaemonSet,
    node: usize,
    bound: bool,
    matches: bool,
    owner: Owner,
    terminal: bool,
    deleted: bool,
) -> Pod {
    let mut pod = daemon_pod(ds, &format!("n{node}"), "h", bound);
    let labels = pod.metadata.labels.as_mut().unwrap();
    labels.insert("tier".into(), "agent".into());
    if !matches {
        labels.insert("app".into(), "released".into());
    }
    match owner {
        Owner::Controller => {}
        Owner::None => pod.metadata.owner_references = None,
        Owner::NotController => pod.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false),
    }
    // A bound pod that runs is Ready: the node is covered; any other is not.
    let ready = if bound && !terminal { "True" } else { "False" };
    pod.status = Some(from(json!({"phase": if terminal { "Failed" } else { "Running" },
        "conditions": [{"type": "Ready", "status": ready}]})));
    if deleted {
        pod.metadata.deletion_timestamp = Some(from(json!("2026-01-02T00:00:00Z")));
    }
    pod
}

/// Everything the metrics are made of, except timestamps.
fn observable(index: &Index) -> Vec<String> {
    let mut out = misscheduled(index).into_iter().map(|r| format!("{r:?}")).collect::<Vec<_>>();
    for view in index.daemonsets() {
        out.push(format!(
            "{} eligible={} scheduled={} misscheduled={} by_reason={:?} ineligible={:?}",
            view.ds.id.name,
            view.eligible_nodes(),
            view.scheduled_nodes(),
            view.misscheduled_node_count(),
            view.misscheduled_nodes_by_reason(),
            view.ineligible_nodes()
        ));
        for u in view.uncovered_nodes() {
            let pod = u.pod.map(|p| p.id.name());
            out.push(format!("{} uncovered {} {pod:?} {} {:?}", view.ds.id.name, u.node, u.reason, u.detail));
        }
    }
    out
}

/// (DaemonSet, node) → (reason, key).
type Pairs = BTreeMap<(String, String), (String, String)>;

/// Each misscheduled node and its reason (its oldest pod's).
fn misscheduled_nodes(index: &Index) -> Pairs {
    let mut out = Pairs::new();
    for view in index.daemonsets() {
        for p in view.misscheduled_pods().into_iter().filter(|p| p.counts_node) {
            let c = &p.classification;
            out.insert((view.ds.id.name.to_string(), p.node.to_string()), (c.reason.to_string(), c.key.to_string()));
        }
    }
    out
}

fn lost_nodes(index: &Index) -> Pairs {
    let mut out = Pairs::new();
    for view in index.daemonsets() {
        for lost in view.lost_nodes() {
            let v = lost.verdict;
            out.insert((view.ds.id.name.to_string(), lost.node.to_string()), (v.reason.to_string(), v.key.to_string()));
        }
    }
    out
}

fn loss_counts(index: &Index) -> BTreeMap<String, u64> {
    let counts = index.daemonsets().into_iter().map(|view| (view.ds.id.name.to_string(), view.losses()));
    counts.map(|(ds, rows)| (ds, rows.iter().map(|(_, _, n)| n).sum())).filter(|(_, n)| *n > 0).collect()
}

/// The loss rule, told independently of the index and judged on an index built from
/// scratch at each step: a pair is lost when a pod change leaves a pair that was
/// misscheduled on a node that still exists and is skipped, with no pod; or when a pair
/// whose last pod went while it was eligible turns out skipped, still without a pod (the
/// node's stream was behind the pods'), with the verdict that pod has there now. It stays
/// lost until a pod counts there again or the node goes; a DaemonSet that goes, or is no
/// longer synced by the controller, has none.
#[derive(Default)]
struct LossModel {
    lost: Pairs,
    counts: BTreeMap<String, u64>,
    /// Eligible pairs whose last pod went, and that pod.
    departed: BTreeMap<(String, String), Pod>,
}

/// What the index holds before and after one op, built from scratch.
struct Change<'a> {
    before: &'a Index,
    misscheduled_before: &'a Pairs,
    /// For a pod op: the pod's node, and the pod as it was before, if there was one.
    pod_op: Option<(String, Option<Pod>)>,
    now: &'a Index,
    nodes: &'a [String],
}

impl LossModel {
    fn forget(&mut self, ds: &str) {
        self.lost.retain(|(d, _), _| d != ds);
        self.departed.retain(|(d, _), _| d != ds);
        self.counts.remove(ds);
    }

    /// A new selector decides afresh which pods count.
    fn forget_departed(&mut self, ds: &str) {
        self.departed.retain(|(d, _), _| d != ds);
    }

    fn start(&mut self, pair: (String, String), verdict: (String, String)) {
        *self.counts.entry(pair.0.clone()).or_default() += 1;
        self.lost.insert(pair, verdict);
    }

    fn step(&mut self, change: Change<'_>, rebuild_with: impl Fn(&Pod, &str) -> Index) {
        let views = change.now.daemonsets();
        let view = |ds: &str| views.iter().find(|v| *v.ds.id.name == *ds);
        let before_views = change.before.daemonsets();
        let had_pod = |ds: &str, node: &str| before_views.iter().any(|v| *v.ds.id.name == *ds && v.has_pod(node));
        let node_exists = |node: &str| change.nodes.iter().any(|n| n == node);
        let stays = |(ds, node): &(String, String)| view(ds).is_some_and(|v| node_exists(node) && !v.has_pod(node));
        self.lost.retain(|pair, _| stays(pair));
        self.departed.retain(|pair, _| stays(pair));
        if let Some((node, Some(old))) = &change.pod_op {
            // The one pair that op can have taken its last pod from, whichever DaemonSet
            // owned or adopted it.
            for v in &views {
                let pair = (v.ds.id.name.to_string(), node.clone());
                if had_pod(&pair.0, node)
                    && stays(&pair)
                    && !change.misscheduled_before.contains_key(&pair)
                    && !self.lost.contains_key(&pair)
                {
                    self.departed.insert(pair, old.clone());
                }
            }
        }
        for (pair, verdict) in change.misscheduled_before {
            let Some(v) = view(&pair.0) else { continue };
            if change.pod_op.is_some()
                && node_exists(&pair.1)
                && v.skips(&pair.1)
                && !v.has_pod(&pair.1)
                && !self.lost.contains_key(pair)
            {
                self.start(pair.clone(), verdict.clone());
            }
        }
        let turned_skipped: Vec<_> =
            self.departed.keys().filter(|(ds, node)| view(ds).is_some_and(|v| v.skips(node))).cloned().collect();
        for pair in turned_skipped {
            let Some(pod) = self.departed.remove(&pair) else { continue };
            // The verdict that pod would have there now.
            let verdict = misscheduled_nodes(&rebuild_with(&pod, &pair.0)).get(&pair).cloned();
            self.start(pair, verdict.unwrap_or_default());
        }
    }

    /// Counters survive a DaemonSet hidden for a while; only the visible ones are read.
    fn visible_counts(&self, now: &Index) -> BTreeMap<String, u64> {
        let visible: Vec<String> = now.daemonsets().iter().map(|v| v.ds.id.name.to_string()).collect();
        self.counts.iter().filter(|(ds, _)| visible.contains(ds)).map(|(ds, n)| (ds.clone(), *n)).collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn incremental_equals_from_scratch(ops in proptest::collection::vec(op(), 1..40)) {
        let mut live = cluster(vec![], vec![], vec![], vec![]);
        let mut nodes = BTreeMap::new();
        let mut daemonsets = BTreeMap::new();
        let mut pods = BTreeMap::new();
        let mut losses = LossModel::default();
        let mut before = cluster(vec![], vec![], vec![], vec![]);
        for op in ops {
            let misscheduled_before = misscheduled_nodes(&live);
            // Only a pod on its way out departs: deleted, or terminal and deleted.
            let pod_op = match op {
                Op::SetPod { ds, node, terminal, deleted, .. } => {
                    Some((format!("n{node}"), pods.get(&(ds, node)).cloned().filter(|_| terminal && deleted)))
                }
                Op::DeletePod { ds, node } => Some((format!("n{node}"), pods.get(&(ds, node)).cloned())),
                _ => None,
            };
            if let Op::DeleteDaemonSet(ds) = op {
                losses.forget(&format!("ds{ds}"));
            }
            if let Op::SetDaemonSet { ds, worker_only, tolerate_x, selector, deleting } = op {
                let selector_of = |d: &DaemonSet| d.spec.as_ref().map(|s| s.selector.clone());
                let new = make_ds(ds, worker_only, tolerate_x, selector, deleting);
                if daemonsets.get(&ds).map(selector_of) != Some(selector_of(&new)) {
                    losses.forget_departed(&format!("ds{ds}"));
                }
            }
            match op {
                Op::SetNode { node, worker, taints } => {
                    let n = make_node(node, worker, taints);
                    apply(&mut live, n.clone());
                    nodes.insert(node, n);
                }
                Op::DeleteNode(node) => {
                    if let Some(n) = nodes.remove(&node) { delete(&mut live, n); }
                }
                Op::SetDaemonSet { ds, worker_only, tolerate_x, selector, deleting } => {
                    let d = make_ds(ds, worker_only, tolerate_x, selector, deleting);
                    apply(&mut live, d.clone());
                    daemonsets.insert(ds, d);
                }
                Op::DeleteDaemonSet(ds) => {
                    if let Some(d) = daemonsets.remove(&ds) { delete(&mut live, d); }
                }
                Op::SetPod { ds, node, bound, matches, owner, terminal, deleted } => {
                    // Pods reference their DaemonSet by UID, which does not need to exist.
                    let p = make_pod(&make_ds(ds, false, false, Selector::Own, false), node, bound, matches, owner, terminal, deleted);
                    apply(&mut live, p.clone());
                    pods.insert((ds, node), p);
                }
                Op::DeletePod { ds, node } => {
                    if let Some(p) = pods.remove(&(ds, node)) { delete(&mut live, p); }
                }
            }
            let now = cluster(
                nodes.values().cloned().collect(),
                daemonsets.values().cloned().collect(),
                Vec::<ControllerRevision>::new(),
                pods.values().cloned().collect(),
            );
            let node_names: Vec<String> = nodes.keys().map(|i| format!("n{i}")).collect();
            // The pair's DaemonSet alone, so that an orphan it had adopted is not contested.
            let rebuild_with = |gone: &Pod, ds: &str| cluster(
                nodes.values().cloned().collect(),
                daemonsets.values().filter(|d| d.metadata.name.as_deref() == Some(ds)).cloned().collect(),
                Vec::<ControllerRevision>::new(),
                pods.values().filter(|p| p.metadata.uid != gone.metadata.uid).cloned().chain([gone.clone()]).collect(),
            );
            let change = Change { before: &before, misscheduled_before: &misscheduled_before, pod_op, now: &now, nodes: &node_names };
            losses.step(change, rebuild_with);
            prop_assert_eq!(lost_nodes(&live), losses.lost.clone());
            prop_assert_eq!(loss_counts(&live), losses.visible_counts(&now));
            before = now;
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

/// Ready and PodScheduled as the kubelet and the scheduler write them: what a pod's health
/// is read from.
fn pod_conditions(i: usize) -> serde_json::Value {
    let at = |t: &str| format!("2026-01-01T00:0{t}:00Z");
    match i {
        0 => json!(null),
        1 => json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": at("1")},
                    {"type": "Ready", "status": "True", "lastTransitionTime": at("2")}]),
        2 => json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": at("1")},
                    {"type": "Ready", "status": "True", "lastTransitionTime": at("3")}]),
        3 => {
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": at("1"),
                     "message": "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."}])
        }
        _ => json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": at("1")},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": at("4")}]),
    }
}

fn container_statuses(i: usize) -> serde_json::Value {
    let waiting = |reason: &str| json!({"waiting": {"reason": reason, "message": "m"}});
    match i {
        0 => json!(null),
        1 => json!([{"name": "c", "image": "x:1", "ready": true, "state": {"running": {}}}]),
        2 => json!([{"name": "c", "image": "x:1", "ready": false, "state": waiting("ImagePullBackOff")}]),
        3 => json!([{"name": "c", "image": "x:1", "ready": false, "state": waiting("CrashLoopBackOff"),
                     "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
        _ => json!([{"name": "c", "image": "x:1", "ready": false, "state": waiting("ContainerCreating")}]),
    }
}

/// A daemon pod drawn from a small vocabulary, so that two draws often differ in just
/// one field the conversion reads (or in none).
fn daemon_pod_json() -> impl Strategy<Value = serde_json::Value> {
    (
        (0..4usize, 0..2usize, 0..2usize, 0..6usize),
        (0..4usize, 0..4usize, 0..6usize),
        (proptest::collection::vec((0..5usize, 0..5usize, 0..2usize, 0..4usize), 0..3), any::<bool>()),
        (0..3usize, 0..3usize, 0..3usize, 0..5usize),
        (0..5usize, 0..5usize),
    )
        .prop_map(|((uid, name, ns, owner), (labels, node_name, affinity), (tolerations, host_network), (selector, created, deletion, phase), (conditions, containers))| {
            let uid = [json!(null), json!(""), json!("u1"), json!("u2")][uid].clone();
            let owner_refs = match owner {
                0 => json!(null),
                1 => json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "ds-1", "controller": true}]),
                2 => json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "ds-2", "controller": true}]),
                3 => json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "ds-1", "controller": false}]),
                4 => json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "ds-1", "controller": true}]),
                _ => json!([{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n-1", "controller": false},
                            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "rs-1", "controller": true}]),
            };
            let labels = [json!(null), json!({"app": "a"}), json!({"app": "a", "controller-revision-hash": "h1"}), json!({"app": "b", "controller-revision-hash": "h1"})][labels].clone();
            let node_name = [json!(null), json!(""), json!("n1"), json!("n2")][node_name].clone();
            let affinity = match affinity {
                0 => json!(null),
                1 => json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}),
                2 => json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}),
                3 => json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}]}}}),
                4 => json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}, {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}),
                _ => json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}}}),
            };
            let tolerations: Vec<serde_json::Value> = tolerations
                .into_iter()
                .map(|(key, operator, value, effect)| {
                    json!({
                        // A key the decoder reads as a static string, and one JSON must escape.
                        "key": (["x", "y", "", "node.kubernetes.io/not-ready", "a\\b\"c"][key]),
                        "operator": ([json!(null), json!(""), json!("Equal"), json!("Exists"), json!("Bogus")][operator].clone()),
                        "value": (["", "v"][value]),
                        "effect": ([json!(null), json!(""), json!("NoSchedule"), json!("Other")][effect].clone()),
                    })
                })
                .collect();
            let selector = [json!(null), json!({"pool": "a"}), json!({"pool": "a", "zone": "z"})][selector].clone();
            let created = [json!(null), json!("2026-01-01T00:00:00Z"), json!("2026-01-01T00:00:01Z")][created].clone();
            let (deleted, grace) = [(json!(null), json!(null)), (json!("2026-01-02T00:00:00Z"), json!(null)), (json!("2026-01-02T00:00:00Z"), json!(30))][deletion].clone();
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"uid": uid, "name": (["p1", "p2"][name]), "namespace": (["a", "b"][ns]),
                             "ownerReferences": owner_refs, "labels": labels, "creationTimestamp": created,
                             "deletionTimestamp": deleted, "deletionGracePeriodSeconds": grace},
                "spec": {"nodeName": node_name, "affinity": affinity, "tolerations": tolerations,
                         "nodeSelector": selector, "hostNetwork": host_network},
                "status": {"phase": ([json!(null), json!("Running"), json!("Failed"), json!("Succeeded"), json!("Pending")][phase].clone()),
                           "conditions": pod_conditions(conditions), "containerStatuses": container_statuses(containers)}
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// The allocation-free "nothing changed" check must say yes exactly when converting
    /// the new pod would give the cached one, for any update the API server accepts.
    #[test]
    fn unchanged_pod_check_agrees_with_conversion(cached in daemon_pod_json(), other in daemon_pod_json(), change in 0..FIELDS.len() + 2) {
        use misschedule_exporter::k8s::convert;
        use misschedule_exporter::model::interner::Interner;
        use misschedule_exporter::k8s::slim::SlimPod;
        // The new pod is the cached one with one field taken from another draw (as most
        // updates are), or the cached one unchanged, or a different pod altogether.
        let mut decoded = match FIELDS.get(change) {
            Some(field) => {
                let mut decoded = cached.clone();
                *decoded.pointer_mut(field).unwrap() = other.pointer(field).unwrap().clone();
                decoded
            }
            None if change == FIELDS.len() => cached.clone(),
            None => other,
        };
        // The API server refuses an update that changes the name, namespace or creation
        // time of the object under a UID (`ValidateObjectMetaUpdate`): no watch sends one.
        // Nor one that moves a bound pod: the binding refuses a pod with a nodeName, and an
        // update may not change it (`ValidatePodUpdate`).
        if decoded["metadata"]["uid"] == cached["metadata"]["uid"] {
            for field in ["name", "namespace", "creationTimestamp"] {
                decoded["metadata"][field] = cached["metadata"][field].clone();
            }
            let bound = |pod: &serde_json::Value| pod["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty());
            if bound(&cached) && bound(&decoded) {
                decoded["spec"]["nodeName"] = cached["spec"]["nodeName"].clone();
            }
        }
        let cached: SlimPod = serde_json::from_value(cached).unwrap();
        let decoded: SlimPod = serde_json::from_value(decoded).unwrap();
        let mut interner = Interner::default();
        let Ok(compact) = convert::pod(&cached, &mut interner) else { return Ok(()) };
        let converted = convert::pod(&decoded, &mut interner);
        prop_assert_eq!(convert::pod_unchanged(&decoded, &compact), converted.as_ref() == Ok(&compact));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The slim shape the watcher decodes pods into (static strings, enums read
    /// straight from the JSON, affinity cut to `matchFields`) must convert exactly as
    /// the full k8s-openapi Pod does, from bytes (the watcher) and from a JSON value
    /// (snapshots).
    #[test]
    fn slim_pod_decodes_like_the_full_pod(pod in daemon_pod_json()) {
        use k8s_openapi::api::core::v1::Pod;
        use misschedule_exporter::k8s::convert;
        use misschedule_exporter::model::interner::Interner;
        use misschedule_exporter::k8s::slim::SlimPod;
        let bytes = serde_json::to_vec(&pod).unwrap();
        let full: Pod = serde_json::from_slice(&bytes).unwrap();
        let from_bytes: SlimPod = serde_json::from_slice(&bytes).unwrap();
        let from_value: SlimPod = serde_json::from_value(pod).unwrap();
        let mut interner = Interner::default();
        let expected = convert::pod(&SlimPod::from(full), &mut interner);
        prop_assert_eq!(&convert::pod(&from_bytes, &mut interner), &expected);
        prop_assert_eq!(&convert::pod(&from_value, &mut interner), &expected);
        if let Ok(expected) = &expected {
            prop_assert!(convert::pod_unchanged(&from_bytes, expected));
        }
    }
}

/// A node drawn from a small vocabulary (see `daemon_pod_json`), NFD annotations and
/// the managedFields entries that own labels and taints included.
fn node_json() -> impl Strategy<Value = serde_json::Value> {
    (
        (0..3usize, 0..4usize),
        proptest::collection::vec((0..3usize, 0..2usize, 0..4usize, 0..3usize), 0..3),
        (0..6usize, 0..4usize, 0..2usize),
        proptest::collection::vec((0..3usize, 0..2usize, 0..4usize, 0..2usize, 0..3usize), 0..3),
    )
        .prop_map(|((name, labels), taints, (nfd_labels, nfd_taints, heartbeat), entries)| {
            let name = [json!(null), json!("n1"), json!("n2")][name].clone();
            let labels = [json!(null), json!({"pool": "a"}), json!({"pool": "b"}), json!({"pool": "a", "feature.node.kubernetes.io/x": "true"})][labels].clone();
            let taints: Vec<serde_json::Value> = taints
                .into_iter()
                .map(|(key, value, effect, added)| {
                    json!({
                        "key": (["k", "ToBeDeletedByClusterAutoscaler", "nfd/t"][key]),
                        "value": ([json!(null), json!("1")][value].clone()),
                        "effect": (["NoSchedule", "NoExecute", "PreferNoSchedule", "Other"][effect]),
                        "timeAdded": ([json!(null), json!("2026-01-01T00:00:00Z"), json!("2026-01-01T00:00:01Z")][added].clone()),
                    })
                })
                .collect();
            let mut annotations = serde_json::Map::new();
            if let Some(v) = [None, Some("x"), Some("x, cpu-cpuid.AVX512F"), Some("vendor.io/x,,x"), Some("feature.node.kubernetes.io/x"), Some("vendor.io/x")][nfd_labels] {
                annotations.insert("nfd.node.kubernetes.io/feature-labels".into(), json!(v));
            }
            if let Some(v) = [None, Some("nfd/t=1:NoSchedule"), Some("nfd/t:NoExecute, other"), Some("")][nfd_taints] {
                annotations.insert("nfd.node.kubernetes.io/taints".into(), json!(v));
            }
            let managed_fields: Vec<serde_json::Value> = entries
                .into_iter()
                .map(|(manager, time, labels, taints, subresource)| {
                    let mut fields = serde_json::Map::new();
                    let labels = [json!(null), json!({"f:pool": {}}), json!({".": {}, "f:pool": {}, "f:zone": {}}), json!({"f:zone": {}})][labels].clone();
                    if !labels.is_null() {
                        fields.insert("f:metadata".into(), json!({"f:labels": labels}));
                    }
                    if taints == 1 {
                        fields.insert("f:spec".into(), json!({"f:taints": {}}));
                    }
                    json!({
                        "manager": (["kubelet", "nfd-master", "kubectl-taint"][manager]),
                        "operation": "Update",
                        "subresource": ([json!(null), json!(""), json!("status")][subresource].clone()),
                        "time": (["2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"][time]),
                        "fieldsType": "FieldsV1",
                        "fieldsV1": fields,
                    })
                })
                .collect();
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": annotations, "managedFields": managed_fields},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": (["2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"][heartbeat])}]}
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// As for pods: the allocation-free node check must say yes exactly when
    /// converting the new node would give the cached one.
    #[test]
    fn unchanged_node_check_agrees_with_conversion(cached in node_json(), other in node_json(), change in 0..NODE_FIELDS.len() + 2) {
        use misschedule_exporter::k8s::convert;
        use misschedule_exporter::model::interner::Interner;
        use misschedule_exporter::k8s::slim::SlimNode;
        let decoded = match NODE_FIELDS.get(change) {
            Some(field) => {
                let mut decoded = cached.clone();
                *decoded.pointer_mut(field).unwrap() = other.pointer(field).unwrap().clone();
                decoded
            }
            None if change == NODE_FIELDS.len() => cached.clone(),
            None => other,
        };
        let cached: SlimNode = serde_json::from_value(cached).unwrap();
        let decoded: SlimNode = serde_json::from_value(decoded).unwrap();
        let mut interner = Interner::default();
        let Ok(compact) = convert::node(&cached, &mut interner) else { return Ok(()) };
        let converted = convert::node(&decoded, &mut interner);
        prop_assert_eq!(convert::node_unchanged(&decoded, &compact), converted.as_ref() == Ok(&compact));
    }
}

/// Every field `node_json` sets.
const NODE_FIELDS: [&str; 6] = [
    "/metadata/name",
    "/metadata/labels",
    "/metadata/annotations",
    "/metadata/managedFields",
    "/spec/taints",
    "/status/conditions",
];

/// Every field `daemon_pod_json` sets.
const FIELDS: [&str; 16] = [
    "/metadata/uid",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/ownerReferences",
    "/metadata/labels",
    "/metadata/creationTimestamp",
    "/metadata/deletionTimestamp",
    "/metadata/deletionGracePeriodSeconds",
    "/spec/nodeName",
    "/spec/affinity",
    "/spec/tolerations",
    "/spec/nodeSelector",
    "/spec/hostNetwork",
    "/status/phase",
    "/status/conditions",
    "/status/containerStatuses",
];

/// An autoscaler's nodes come and go under new names, each with its daemon pod for a while.
/// The index numbers the nodes pods are claimed on (columns by node) and must forget the
/// numbers of names gone: its claims stay the size of the live nodes, and what it says
/// equals an index built from the objects that are left.
#[test]
fn nodes_that_come_and_go_under_new_names_are_forgotten() {
    let ds = make_ds(0, false, false, Selector::Own, false);
    let stable: Vec<Node> = (0..5).map(|i| make_node(i, true, [false; 4])).collect();
    let stable_pods: Vec<Pod> = (0..5).map(|i| make_pod(&ds, i, true, true, Owner::Controller, false, false)).collect();
    let mut index = cluster(stable.clone(), vec![ds.clone()], vec![revision(&ds, "h")], stable_pods.clone());
    let part_bytes = |index: &Index, name: &str| {
        let part = index.footprint().into_iter().find(|part| part.name.contains(name));
        part.unwrap_or_else(|| panic!("no footprint part named {name}")).bytes
    };
    let claims_bytes = |index: &Index| part_bytes(index, "claims");
    let skipped_bytes = |index: &Index| part_bytes(index, "skipped nodes");
    let uncovered_bytes = |index: &Index| part_bytes(index, "uncovered nodes");
    let came_and_went = 5_000;
    for i in 0..came_and_went {
        let name = format!("scaled-{i}");
        let scaled = node(&name, &[], &[]);
        let pod = daemon_pod(&ds, &name, "h", true);
        apply(&mut index, scaled.clone());
        apply(&mut index, pod.clone());
        // A drain taints the node, the pod goes, then the node.
        apply(&mut index, node(&name, &[], &["ToBeDeletedByClusterAutoscaler=1:NoSchedule"]));
        if i == 0 {
            assert!(skipped_bytes(&index) > 0, "a misscheduled node is counted in the footprint");
        }
        delete(&mut index, pod);
        delete(&mut index, scaled);
    }
    let fresh = cluster(stable, vec![ds.clone()], vec![revision(&ds, "h")], stable_pods);
    assert_eq!(observable(&index), observable(&fresh));
    // Were no number reused, the claims column would hold a 4-byte slot for each of the
    // 5,000 names, the flags column a byte for each, and the skipped and uncovered tables
    // an entry for each. Reused, the numbers stay under the sweep's slack of about a
    // thousand (`node_ids`), so the flags under 2,048 B.
    let slot = std::mem::size_of::<u32>();
    assert!(
        claims_bytes(&index) < came_and_went * slot / 2,
        "claims of {} B after {came_and_went} nodes came and went: the numbers of gone names are not reused",
        claims_bytes(&index)
    );
    assert!(
        skipped_bytes(&index) < came_and_went / 2,
        "skipped and misscheduled nodes of {} B after {came_and_went} nodes came and went",
        skipped_bytes(&index)
    );
    assert!(
        uncovered_bytes(&index) < came_and_went / 8 * 2,
        "uncovered nodes of {} B after {came_and_went} nodes came and went",
        uncovered_bytes(&index)
    );
}
