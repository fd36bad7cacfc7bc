//! What the front ends add on the synced index: the admission guard's answer to a review,
//! and `kubectl misschedule what-if`.

use std::time::{Duration, Instant};

use misschedule_exporter::guard::review;
use misschedule_exporter::guard::{self, Change, Policy, Verdict};
use misschedule_exporter::index::Index;
use misschedule_exporter::k8s::slim::SlimNode;
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::whatif::edit::{LABEL_MANAGER, LabelEdit, TAINT_MANAGER, TaintEdit};
use misschedule_exporter::whatif::{Effect, simulate};

use crate::events::decoded;
use crate::report::{Row, ms};
use crate::synth::Shape;

/// The admission guard's answer to a review, from decoding to the answer: one node tainted
/// NoExecute (a copy of that node's part of the index), and one DaemonSet narrowed to no
/// node (a copy of every node). The API server waits 3 s at most.
pub(crate) fn guard(index: &Index, shape: &Shape, rows: &mut Vec<Row>) {
    let review = |resource: (&str, &str), object: serde_json::Value| {
        let body = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "bench", "resource": {"group": resource.0, "version": "v1", "resource": resource.1},
            "operation": "UPDATE", "userInfo": {"username": "bench"}, "object": object}});
        serde_json::to_vec(&body).unwrap()
    };
    let answered = |body: &[u8]| {
        let started = Instant::now();
        let request = review::decode(body).unwrap();
        let change = Change::of(&request).unwrap();
        let excerpt = index.excerpt(change.touched().unwrap());
        let (verdict, response) = guard::answer(excerpt, change, &request, &Policy::default());
        (started.elapsed(), verdict, response)
    };
    // The API server waits timeoutSeconds (at most 3 s) for each answer: the p99 of repeats.
    let p99 = |body: Vec<u8>, repeats: usize| {
        let mut took: Vec<Duration> = (0..repeats)
            .map(|_| {
                let (took, verdict, response) = answered(&body);
                assert_eq!(verdict, Verdict::Warned, "{response:?}");
                took
            })
            .collect();
        took.sort();
        took[(repeats * 99 / 100).min(repeats - 1)]
    };
    let mut tainted = serde_json::to_value(shape.node(0)).unwrap();
    tainted["spec"]["taints"] =
        serde_json::json!([{"key": "bench.example/evict", "value": "x", "effect": "NoExecute"}]);
    let node = p99(review(("", "nodes"), tainted), 200);
    rows.push(Row::new("guard: a review of one node's taint, p99", ms(node), format!("{:.2} ms", ms(node))));
    // Every label of one node removed: each DaemonSet that selects by one loses it.
    let mut unlabelled = serde_json::to_value(shape.node(0)).unwrap();
    unlabelled["metadata"]["labels"] = serde_json::json!({});
    let label = p99(review(("", "nodes"), unlabelled), 200);
    rows.push(
        Row::new("guard: a review of one node's labels, p99", ms(label), format!("{:.2} ms", ms(label)))
            .target("≤ 50 ms", ms(label) <= 50.0),
    );

    let mut narrowed = shape.daemonset(0);
    narrowed.status = None;
    let template = narrowed.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    template.node_selector.get_or_insert_default().insert("bench.example/pool".into(), "none".into());
    let ds = p99(review(("apps", "daemonsets"), serde_json::to_value(narrowed).unwrap()), 10);
    let shown = format!("{:.0} ms (every node copied)", ms(ds));
    rows.push(
        Row::new("guard: a review of one DaemonSet's placement, p99 of 10", ms(ds), shown)
            .target("≤ 1 s", ds <= Duration::from_secs(1)),
    );
}

/// `kubectl misschedule what-if` on the synced index, after the cluster was listed (what
/// the plugin adds to a plain answer): one node tainted NoExecute; every node relabelled
/// with a key no DaemonSet reads, the most nodes a change can touch; and one DaemonSet's
/// selector narrowed so that none of its nodes fits, every node compared.
pub(crate) fn what_if(index: &mut Index, shape: &Shape, rows: &mut Vec<Row>) {
    let selection = Selection::default();
    let node = |i: usize| decoded::<SlimNode>(&shape.node(i));
    let taint = TaintEdit::parse(&["bench.example/evict=x:NoExecute".to_owned()]).unwrap();
    let current = vec![node(0)];
    let edited = vec![taint.apply(&current[0], false, TAINT_MANAGER, 1_780_000_100).unwrap()];
    let started = Instant::now();
    let outcome = simulate::nodes(index, &selection, current, edited).unwrap();
    let one = started.elapsed();
    // Every agent on the node is deleted, but those that tolerate every taint.
    let deletes = outcome.changes.iter().filter(|r| r.effect == Effect::Delete).count();
    assert!(deletes > 0 && deletes == outcome.changes.len(), "{:?}", outcome.changes);
    rows.push(Row::new("what-if: taint one node NoExecute", ms(one), format!("{:.1} ms", ms(one))));

    let label = LabelEdit::parse(&["bench.example/what-if=yes".to_owned()]).unwrap();
    let current: Vec<SlimNode> = (1..shape.nodes).map(node).collect();
    let edited = current.iter().map(|n| label.apply(n, false, LABEL_MANAGER, 1_780_000_100).unwrap().0).collect();
    let started = Instant::now();
    let outcome = simulate::nodes(index, &selection, current, edited).unwrap();
    let all = started.elapsed();
    assert!(outcome.changes.is_empty(), "a label no DaemonSet reads changes nothing");
    let shown = format!("{:.2} s ({} nodes × {} DaemonSets)", all.as_secs_f64(), shape.nodes - 1, shape.daemonsets);
    rows.push(Row::new("what-if: label every node (-l or --all)", all.as_secs_f64(), shown));

    let mut narrowed = shape.daemonset(0);
    narrowed.metadata.uid = None;
    narrowed.status = None;
    let template = narrowed.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    template.node_selector.get_or_insert_default().insert("bench.example/pool".into(), "none".into());
    let started = Instant::now();
    let outcome = simulate::daemonsets(index, vec![narrowed]).unwrap();
    let apply = started.elapsed();
    assert!(outcome.changes.len() >= shape.nodes - 1 - shape.nodes / 100, "{} rows", outcome.changes.len());
    let shown = format!("{:.2} s ({} rows)", apply.as_secs_f64(), outcome.changes.len());
    rows.push(Row::new("what-if: apply -f one DaemonSet that leaves every node", apply.as_secs_f64(), shown));
}
