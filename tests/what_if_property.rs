//! Over random scenes and random `kubectl label`/`kubectl taint` changes: what-if, which
//! applies the change to the live index, equals the difference between two indexes built
//! from scratch, one from the objects before the change and one from the objects after.

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{Index, Touched};
use misschedule_exporter::k8s::slim::{SlimNode, SlimPod};
use misschedule_exporter::model::Str;
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::whatif::edit::{LABEL_MANAGER, LabelEdit, TAINT_MANAGER, TaintEdit};
use misschedule_exporter::whatif::effect::{Effect, Fit, effect};
use misschedule_exporter::whatif::simulate;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::json;
use support::*;

const TAINTS: [&str; 3] =
    ["dedicated=x:NoSchedule", "evict=x:NoExecute", "ToBeDeletedByClusterAutoscaler=1:NoSchedule"];
const CHANGES: [(&str, bool); 10] = [
    ("pool=a", true),
    ("pool=b", true),
    ("pool-", true),
    ("gpu=true", true),
    ("gpu-", true),
    ("dedicated=x:NoSchedule", false),
    ("evict=x:NoExecute", false),
    ("ToBeDeletedByClusterAutoscaler=2:NoSchedule", false),
    ("dedicated-", false),
    ("evict-", false),
];

/// A DaemonSet: nodeSelector kind, affinity kind, tolerations, hostNetwork, and per node
/// none (0), a running pod (1) or a terminating one (2).
type DsSpec = (u8, u8, [bool; 2], bool, Vec<u8>);

#[derive(Clone, Debug)]
struct Scene {
    /// Per node: pool (none, a, b), gpu label, which of `TAINTS`.
    nodes: Vec<(u8, bool, [bool; 3])>,
    daemonsets: Vec<DsSpec>,
    change: usize,
    /// Which nodes the change touches.
    touched: Vec<bool>,
}

fn scene() -> impl Strategy<Value = Scene> {
    (1..5usize, 1..4usize).prop_flat_map(|(nodes, daemonsets)| {
        let node = (0..3u8, any::<bool>(), any::<[bool; 3]>());
        let ds = (0..3u8, 0..4u8, any::<[bool; 2]>(), any::<bool>(), proptest::collection::vec(0..3u8, nodes));
        (
            proptest::collection::vec(node, nodes),
            proptest::collection::vec(ds, daemonsets),
            0..CHANGES.len(),
            proptest::collection::vec(any::<bool>(), nodes),
        )
            .prop_map(|(nodes, daemonsets, change, touched)| Scene { nodes, daemonsets, change, touched })
    })
}

fn make_node(i: usize, (pool, gpu, taints): (u8, bool, [bool; 3])) -> SlimNode {
    let mut labels = vec![];
    match pool {
        1 => labels.push(("pool", "a")),
        2 => labels.push(("pool", "b")),
        _ => {}
    }
    if gpu {
        labels.push(("gpu", "true"));
    }
    let on: Vec<&str> = TAINTS.iter().zip(taints).filter(|(_, on)| *on).map(|(t, _)| *t).collect();
    node(&format!("n{i}"), &labels, &on).into()
}

fn make_ds(j: usize, (selector, affinity, tolerate, host_network): (u8, u8, [bool; 2], bool)) -> DaemonSet {
    let mut spec = json!({"hostNetwork": host_network});
    match selector {
        1 => spec["nodeSelector"] = json!({"pool": "a"}),
        2 => spec["nodeSelector"] = json!({"gpu": "true"}),
        _ => {}
    }
    let expression = match affinity {
        1 => Some(json!({"key": "pool", "operator": "NotIn", "values": ["b"]})),
        2 => Some(json!({"key": "gpu", "operator": "DoesNotExist"})),
        3 => Some(json!({"key": "pool", "operator": "In", "values": ["a", "b"]})),
        _ => None,
    };
    if let Some(expression) = expression {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}});
    }
    let keys: Vec<serde_json::Value> = ["dedicated", "evict"]
        .iter()
        .zip(tolerate)
        .filter(|(_, on)| *on)
        .map(|(key, _)| json!({"key": key, "operator": "Exists"}))
        .collect();
    spec["tolerations"] = json!(keys);
    daemonset(&format!("ds{j}"), spec)
}

fn from_scratch(nodes: &[SlimNode], daemonsets: &[DaemonSet], pods: &[Pod]) -> Index {
    let mut index = Index::default();
    index.set_now(NOW);
    index.relist(nodes.to_vec()).unwrap();
    index.relist(daemonsets.to_vec()).unwrap();
    index.relist(daemonsets.iter().map(|ds| revision(ds, "h"))).unwrap();
    index.relist(pods.iter().cloned().map(SlimPod::from)).unwrap();
    index
}

type Rows = BTreeSet<(String, String, String, String, String, String)>;

/// The rows the difference between two from-scratch indexes gives, for the `touched` nodes.
fn difference(before: &Index, after: &Index, touched: &[String]) -> (Rows, BTreeSet<(String, usize, usize)>) {
    let mut rows = Rows::new();
    let mut desired = BTreeSet::new();
    for view in after.daemonsets() {
        let name = view.ds.id.name.to_string();
        let Some(was) = before.daemonset(&view.ds.id.namespace, &name) else { continue };
        let verdict = |pods: Vec<misschedule_exporter::index::MisscheduledPod<'_>>, pod: &str| {
            pods.into_iter()
                .find(|p| p.pod.id == *pod)
                .map(|p| (p.classification.reason.as_str().to_owned(), p.classification.key.to_string()))
        };
        let mut moved = false;
        for node in touched {
            let (fit_before, fit_after) = (Fit::of(was.skip(node)), Fit::of(view.skip(node)));
            let pods = view.pods_on(node);
            let skip_of = |skip: Option<&misschedule_exporter::rules::eligibility::Skip>| {
                skip.map_or((String::new(), String::new()), |s| (s.reason().as_str().to_owned(), s.key().to_owned()))
            };
            if pods.is_empty() {
                if let Some(e) = effect(fit_before, fit_after, false) {
                    let (reason, key) = skip_of(was.skip(node));
                    rows.insert((name.clone(), node.clone(), String::new(), e.as_str().into(), reason, key));
                    moved = true;
                }
                continue;
            }
            for pod in pods.iter().filter(|p| p.deletion().is_none()) {
                let Some(e) = effect(fit_before, fit_after, true) else { continue };
                let (reason, key) = match e {
                    Effect::Recover => {
                        verdict(was.misscheduled_pods(), &pod.id.name()).unwrap_or_else(|| skip_of(was.skip(node)))
                    }
                    _ => verdict(view.misscheduled_pods(), &pod.id.name()).unwrap_or_else(|| skip_of(view.skip(node))),
                };
                rows.insert((name.clone(), node.clone(), pod.id.name(), e.as_str().into(), reason, key));
                moved = true;
            }
        }
        if moved || was.eligible_nodes() != view.eligible_nodes() {
            desired.insert((name, was.eligible_nodes(), view.eligible_nodes()));
        }
    }
    (rows, desired)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn what_if_equals_the_difference_of_two_indexes_from_scratch(scene in scene()) {
        let nodes: Vec<SlimNode> = scene.nodes.iter().enumerate().map(|(i, n)| make_node(i, *n)).collect();
        let daemonsets: Vec<DaemonSet> =
            scene.daemonsets.iter().enumerate().map(|(j, (s, a, t, h, _))| make_ds(j, (*s, *a, *t, *h))).collect();
        let mut pods = Vec::new();
        for (ds, (.., on)) in daemonsets.iter().zip(&scene.daemonsets) {
            for (i, state) in on.iter().enumerate() {
                if *state == 0 {
                    continue;
                }
                let mut pod = daemon_pod(ds, &format!("n{i}"), "h", true);
                if *state == 2 {
                    pod.metadata.deletion_timestamp = Some(from(json!("2026-05-31T23:59:30Z")));
                }
                pods.push(pod);
            }
        }
        let (spec, is_label) = CHANGES[scene.change];
        let specs = vec![spec.to_owned()];
        let mut current = Vec::new();
        let mut edited = Vec::new();
        for (node, _) in nodes.iter().zip(&scene.touched).filter(|(_, t)| **t) {
            let result = if is_label {
                LabelEdit::parse(&specs).unwrap().apply(node, true, LABEL_MANAGER, NOW + 60).map(|(n, _)| n)
            } else {
                TaintEdit::parse(&specs).unwrap().apply(node, true, TAINT_MANAGER, NOW + 60)
            };
            // kubectl refuses to remove a taint that is not there: so does what-if, and
            // there is nothing to compare.
            let Ok(after) = result else { return Ok(()) };
            current.push(node.clone());
            edited.push(after);
        }
        let touched: Vec<String> = current.iter().map(|n| n.metadata.name.clone().unwrap()).collect();

        let mut live = from_scratch(&nodes, &daemonsets, &pods);
        let outcome = simulate::nodes(&mut live, &Selection::default(), current, edited.clone()).unwrap();
        let got_rows: Rows = outcome
            .changes
            .iter()
            .map(|r| (r.daemonset.clone(), r.node.clone(), r.pod.clone(), r.effect.as_str().into(), r.reason.clone(), r.key.clone()))
            .collect();
        let got_desired: BTreeSet<(String, usize, usize)> =
            outcome.desired.iter().map(|d| (d.daemonset.clone(), d.before, d.after)).collect();

        let after_nodes: Vec<SlimNode> = nodes
            .iter()
            .map(|n| edited.iter().find(|e| e.metadata.name == n.metadata.name).unwrap_or(n).clone())
            .collect();
        let before = from_scratch(&nodes, &daemonsets, &pods);
        let after = from_scratch(&after_nodes, &daemonsets, &pods);
        let (want_rows, want_desired) = difference(&before, &after, &touched);
        // The guard's way: the change run on a copy of only the touched nodes' part.
        let names: Vec<Str> = touched.iter().map(|n| Str::from(n.as_str())).collect();
        let mut excerpt = before.excerpt(Touched::Nodes(&names));
        let on_copy = simulate::edited_nodes(&mut excerpt, &Selection::default(), edited.clone()).unwrap();
        let copy_rows: Rows = on_copy
            .changes
            .iter()
            .map(|r| (r.daemonset.clone(), r.node.clone(), r.pod.clone(), r.effect.as_str().into(), r.reason.clone(), r.key.clone()))
            .collect();
        prop_assert_eq!(&copy_rows, &want_rows);
        prop_assert_eq!(got_rows.len(), outcome.changes.len(), "a row twice");
        prop_assert_eq!(got_rows, want_rows);
        prop_assert_eq!(got_desired, want_desired);
        // And the live index, changed, is the index of the objects after.
        prop_assert_eq!(misscheduled(&live), misscheduled(&after));
    }
}

#[test]
fn the_generator_reaches_every_effect() {
    // Not a property: a check that the random scenes above are not all quiet.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = BTreeSet::new();
    for _ in 0..2000 {
        let scene = scene().new_tree(&mut runner).unwrap().current();
        let nodes: Vec<SlimNode> = scene.nodes.iter().enumerate().map(|(i, n)| make_node(i, *n)).collect();
        let daemonsets: Vec<DaemonSet> =
            scene.daemonsets.iter().enumerate().map(|(j, (s, a, t, h, _))| make_ds(j, (*s, *a, *t, *h))).collect();
        let pods: Vec<Pod> = daemonsets
            .iter()
            .zip(&scene.daemonsets)
            .flat_map(|(ds, (.., on))| {
                on.iter()
                    .enumerate()
                    .filter(|(_, s)| **s == 1)
                    .map(|(i, _)| daemon_pod(ds, &format!("n{i}"), "h", true))
                    .collect::<Vec<_>>()
            })
            .collect();
        let (spec, is_label) = CHANGES[scene.change];
        let mut index = from_scratch(&nodes, &daemonsets, &pods);
        let target = nodes[0].clone();
        let edited = if is_label {
            LabelEdit::parse(&[spec.to_owned()]).unwrap().apply(&target, true, LABEL_MANAGER, NOW).map(|(n, _)| n)
        } else {
            TaintEdit::parse(&[spec.to_owned()]).unwrap().apply(&target, true, TAINT_MANAGER, NOW)
        };
        let Ok(edited) = edited else { continue };
        let _ = index.apply(Event::Apply(target.clone()));
        let outcome = simulate::nodes(&mut index, &Selection::default(), vec![target], vec![edited]).unwrap();
        seen.extend(outcome.changes.iter().map(|r| r.effect));
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
}
