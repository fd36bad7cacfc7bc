//! The publisher's looks at the index when the pod watch runs ahead of the node watch,
//! driven through `Index::apply` with hand-built objects: a NoExecute taint takes the agent
//! off n2, the taint goes, and the controller's new pod reaches the index before the node
//! without the taint does.

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use misschedule_exporter::index::Index;
use misschedule_exporter::publish::look::{Look, Looks};
use misschedule_exporter::publish::notice::Notice;
use misschedule_exporter::publish::settle::SETTLE_MS;
use serde_json::json;
use support::*;

const NOTHING: [&str; 0] = [];

/// What a look tells, one line per Event: kind, node, and for a recovery what recovered.
fn told(look: &Look) -> Vec<String> {
    let line = |n: &Notice| {
        let of = n.of.map(|k| format!(" of {}", k.reason())).unwrap_or_default();
        format!("{} {}{of}", n.kind.reason(), n.node)
    };
    look.recoveries.iter().chain(&look.changed).map(line).collect()
}

/// A look at `at_ms` (the index's clock in ms), with everything it tells announced.
fn look(looks: &mut Looks, index: &Index, at_ms: i64) -> Vec<String> {
    let look = looks.look(index, at_ms);
    for notice in &look.changed {
        looks.transitions.announced(notice, at_ms);
    }
    told(&look)
}

fn n2(tainted: bool) -> Node {
    node("n2", &[], if tainted { &["maintenance=x:NoExecute"] } else { &[] })
}

/// The controller's new pod for `old`'s node, created at `created`, not started yet.
fn replacement(old: &Pod, created: &str) -> Pod {
    let mut pod = old.clone();
    pod.metadata.name = Some(format!("{}-new", old.metadata.name.as_deref().unwrap_or_default()));
    pod.metadata.uid = Some(format!("{}-new", old.metadata.uid.as_deref().unwrap_or_default()));
    pod.metadata.creation_timestamp = Some(from(json!(created)));
    pod.status = None;
    pod
}

/// An agent on n1 and n2; n2 is tainted NoExecute at NOW + 10 and the controller deletes
/// its pod: n2 is lost, and both Events are told.
fn lost_n2() -> (Index, Looks, Pod) {
    let ds = daemonset("agent", json!({}));
    let (p1, p2) = (ready(daemon_pod(&ds, "n1", "h", true)), ready(daemon_pod(&ds, "n2", "h", true)));
    let nodes = vec![node("n1", &[], &[]), n2(false)];
    let mut index = cluster(nodes, vec![ds.clone()], vec![revision(&ds, "h")], vec![p1, p2.clone()]);
    let mut looks = Looks::default();
    assert_eq!(look(&mut looks, &index, NOW * 1000), NOTHING);
    // The taint comes under a pod made long before: it became misscheduled, told at once.
    index.set_now(NOW + 10);
    apply(&mut index, n2(true));
    assert_eq!(look(&mut looks, &index, (NOW + 10) * 1000), ["Misscheduled n2"]);
    assert_eq!(looks.next_look_ms((NOW + 10) * 1000), None);
    delete(&mut index, p2.clone());
    assert_eq!(look(&mut looks, &index, (NOW + 10) * 1000 + 200), ["NodeLost n2"]);
    (index, looks, p2)
}

/// `lost_n2`, then at NOW + 20 the controller's new pod for n2 reaches the index while
/// the index still has n2 tainted: the first look tells nothing. The time of that look (ms).
fn replacement_first() -> (Index, Looks, i64) {
    let (mut index, mut looks, p2) = lost_n2();
    let at = (NOW + 20) * 1000;
    index.set_now(NOW + 20);
    apply(&mut index, replacement(&p2, "2026-06-01T00:00:20Z"));
    assert_eq!(misscheduled(&index).len(), 1, "the index has it misscheduled for now");
    assert_eq!(look(&mut looks, &index, at), NOTHING, "nothing told while the index may be behind");
    assert_eq!(looks.next_look_ms(at), Some(at + SETTLE_MS), "a look is due even if nothing changes");
    (index, looks, at)
}

#[test]
fn a_pod_ahead_of_its_node_is_no_misscheduled_pod_and_the_node_is_told_covered_again() {
    // The taint went at NOW + 20, and the node without it comes a moment after the pod:
    // n2 is covered again, and the pod was never misscheduled.
    let (mut index, mut looks, at) = replacement_first();
    apply(&mut index, n2(false));
    assert_eq!(look(&mut looks, &index, at + 300), ["Recovered n2 of NodeLost"]);
    assert_eq!(look(&mut looks, &index, at + SETTLE_MS + 300), NOTHING);
    assert_eq!(looks.next_look_ms(at + SETTLE_MS + 300), None);
}

#[test]
fn a_pod_that_stays_misscheduled_after_it_came_is_told_a_moment_later() {
    // Made against an eligible node the controller saw, but the node stays tainted (the
    // controller's view was behind, or someone made the pod): it really is misscheduled.
    let (mut index, mut looks, at) = replacement_first();
    assert_eq!(look(&mut looks, &index, at + SETTLE_MS - 1), NOTHING);
    assert_eq!(look(&mut looks, &index, at + SETTLE_MS), ["Misscheduled n2"]);
    assert_eq!(look(&mut looks, &index, at + SETTLE_MS + 200), NOTHING, "told once");
    // The taint goes: recovered, as any pod told misscheduled.
    apply(&mut index, n2(false));
    assert_eq!(look(&mut looks, &index, at + SETTLE_MS + 400), ["Recovered n2 of Misscheduled"]);
}
