//! Label values that need escaping (quotes, backslashes, newlines, non-ASCII) come out
//! as valid exposition text: a real Prometheus scrapes them and returns them unchanged.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use support::http;
use support::prometheus::Prometheus;

/// Hostile but within the API server's length limits; snapshots are not validated
/// beyond length, so these reach the labels as they are.
const NODES: [&str; 3] = ["n\"quoted\"", "back\\slash\\", "two\nlines-ünïcode"];
const TAINT_KEY: &str = "example.com/\"odd\\key";

fn snapshot(path: &Path) {
    let ds = support::daemonset("agent", json!({"containers": []}));
    let mut items: Vec<Value> =
        vec![serde_json::to_value(&ds).unwrap(), serde_json::to_value(support::revision(&ds, "h1")).unwrap()];
    for name in NODES {
        let taint = format!("{TAINT_KEY}=x:NoSchedule");
        items.push(serde_json::to_value(support::node(name, &[], &[&taint])).unwrap());
        items.push(serde_json::to_value(support::daemon_pod(&ds, name, "h1", true)).unwrap());
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
}

#[test]
#[ignore = "needs Prometheus: scripts/test.sh runs it"]
fn prometheus_reads_escaped_label_values_back_unchanged() {
    let dir = tempfile::Builder::new().prefix("misschedule-exposition-").tempdir().unwrap();
    let path = dir.path().join("hostile.json");
    snapshot(&path);
    let exporter = support::Exporter::snapshot(&[path.to_str().unwrap()]);
    let port = exporter.port;
    let (_, text) = http::get(port, "/metrics").unwrap();
    assert!(text.contains(r#"node="n\"quoted\"""#), "quotes are escaped:\n{text}");
    assert!(text.contains(r#"node="two\nlines"#), "newlines are escaped");

    let prometheus = Prometheus::scraping("exposition", port, 2);
    let (health, error) = prometheus.target_health();
    assert_eq!(health, "up", "Prometheus could not parse the scrape: {error}");
    let series = prometheus.query(r#"daemonset_misscheduled_pod_info{job="misschedule-exporter"}"#);
    let label = |s: &Value, name: &str| s["metric"][name].as_str().unwrap_or_default().to_owned();
    let nodes: BTreeSet<String> = series.iter().map(|s| label(s, "node")).collect();
    assert_eq!(nodes, NODES.iter().map(|n| n.to_string()).collect(), "{series:#?}");
    for s in &series {
        assert_eq!(label(s, "key"), TAINT_KEY);
        assert_eq!(label(s, "reason"), "taint_added");
        assert_eq!(label(s, "pod"), format!("agent-{}", label(s, "node")));
    }
    let total = prometheus.query(r#"daemonset_misscheduled_nodes{reason="taint_added"}"#);
    assert_eq!(total.first().map(|s| s["value"][1].as_str().unwrap_or_default()), Some("3"));
}
