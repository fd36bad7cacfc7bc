//! `/metrics` text: cached per index generation, never stale, and well escaped.

mod support;

use std::sync::Arc;

use kube::runtime::watcher::Event;
use misschedule_exporter::k8s::slim::SlimPod;
use misschedule_exporter::report::metrics::Exposition;
use misschedule_exporter::shared::Shared;
use misschedule_exporter::telemetry::Telemetry;
use prometheus_client::registry::Registry;
use serde_json::json;
use support::*;

/// `/metrics` as the exporter serves it: the classification, then the self-metrics.
fn exposition(shared: &Arc<Shared>) -> Exposition {
    let mut self_metrics = Registry::default();
    Telemetry::default().register(&mut self_metrics, shared.clone());
    Exposition::new(shared.clone(), self_metrics)
}

fn pod_info_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("daemonset_misscheduled_pod_info{")).collect()
}

#[test]
fn every_change_shows_on_the_next_render() {
    let ds = daemonset("agent", json!({}));
    let index = cluster(vec![node("n1", &[], &[])], vec![ds.clone()], vec![], vec![daemon_pod(&ds, "n1", "h", true)]);
    let shared = Arc::new(Shared::new(index));
    let exposition = exposition(&shared);

    assert!(pod_info_lines(&exposition.render().unwrap()).is_empty());
    shared.update(|index| apply(index, node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1:NoSchedule"])));
    let text = exposition.render().unwrap();
    assert_eq!(
        pod_info_lines(&text),
        [
            r#"daemonset_misscheduled_pod_info{namespace="ns",daemonset="agent",pod="agent-n1",node="n1",reason="autoscaler_drain",key="ToBeDeletedByClusterAutoscaler",manager=""} 1"#
        ]
    );
    // Unchanged index: the same classification text, and the self-metrics still follow.
    assert_eq!(pod_info_lines(&exposition.render().unwrap()), pod_info_lines(&text));
    assert!(text.trim_end().ends_with("# EOF"));
    assert!(text.contains("misschedule_exporter_cache_synced{resource=\"pods\"} 1"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1);
    // The cause goes away: so does the series, at once.
    shared.update(|index| apply(index, node("n1", &[], &[])));
    assert!(pod_info_lines(&exposition.render().unwrap()).is_empty());
    // A pod status update changes nothing the exporter reports.
    let generation = shared.read().generation();
    let mut running = daemon_pod(&ds, "n1", "h", true);
    running.status = Some(from(json!({"phase": "Running"})));
    shared.update(|index| apply(index, running));
    assert_eq!(shared.read().generation(), generation);
}

/// Before the pod list completes, no count is published: a 0 would be an all-clear the
/// exporter has not checked.
#[test]
fn nothing_is_counted_before_every_list_completes() {
    let ds = daemonset("agent", json!({}));
    let drained = node("n1", &[], &["ToBeDeletedByClusterAutoscaler=1:NoSchedule"]);
    let mut index = misschedule_exporter::index::Index::default();
    index.set_now(NOW);
    list(&mut index, vec![drained, node("n2", &[], &[])]);
    list(&mut index, vec![ds.clone()]);
    list(&mut index, Vec::<k8s_openapi::api::apps::v1::ControllerRevision>::new());
    index.apply(Event::<SlimPod>::Init).unwrap();
    index.apply(Event::InitApply(daemon_pod(&ds, "n1", "h", true).watched())).unwrap();
    let shared = Arc::new(Shared::new(index));
    let exposition = exposition(&shared);
    let text = exposition.render().unwrap();
    assert!(text.contains("misschedule_exporter_cache_synced{resource=\"pods\"} 0"), "{text}");
    assert!(!text.contains("daemonset_misscheduled_nodes{"), "{text}");
    assert!(!text.contains("daemonset_uncovered_nodes{"), "{text}");
    assert!(!text.contains("daemonset_eligible_nodes{"), "{text}");
    // The list completes: the drained node's pod and the uncovered n2 are counted.
    shared.update(|index| index.apply(Event::<SlimPod>::InitDone).unwrap());
    let text = exposition.render().unwrap();
    assert_eq!(pod_info_lines(&text).len(), 1, "{text}");
    let uncovered = text.lines().filter(|l| l.starts_with("daemonset_uncovered_node_info{"));
    assert_eq!(uncovered.filter(|l| l.contains(r#"node="n2""#)).count(), 1, "{text}");
}

#[test]
fn label_values_are_escaped() {
    let ds = daemonset("agent", json!({}));
    let tricky = "a\"b\\c\nd";
    let index = cluster(
        vec![node("n1", &[], &[&format!("{tricky}:NoSchedule")])],
        vec![ds.clone()],
        vec![],
        vec![daemon_pod(&ds, "n1", "h", true)],
    );
    let text = exposition(&Arc::new(Shared::new(index))).render().unwrap();
    let lines = pod_info_lines(&text);
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains(r#"key="a\"b\\c\nd""#), "{}", lines[0]);
}
