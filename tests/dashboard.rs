//! The Grafana dashboard against what the exporter really emits: a real
//! Prometheus (Debian's) scrapes the exporter in snapshot mode, and every panel
//! query, with its variables substituted, must return data.

mod support;

use serde_json::Value;
use support::http;
use support::prometheus::Prometheus;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{ROOT}/dashboards/misschedule-exporter.json")).unwrap())
        .unwrap()
}

/// Every (panel title, expr) in the dashboard.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap().to_owned();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap().to_owned()))
        })
        .collect()
}

/// What Grafana would send: the hidden cluster variable is empty (single cluster),
/// the namespace and daemonset variables are "All", and the rate interval is four scrapes.
fn substitute(expr: &str) -> String {
    expr.replace("$cluster", "")
        .replace("$namespace", ".*")
        .replace("$daemonset", ".*")
        .replace("$__rate_interval", "4s")
}

#[test]
fn dashboard_follows_mixin_conventions() {
    let d = dashboard();
    assert_eq!(d["uid"], "misschedule-exporter");
    let vars = d["templating"]["list"].as_array().unwrap();
    let var = |name: &str| vars.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no ${name} variable"));
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    assert_eq!(var("cluster")["hide"], 2, "the cluster variable is hidden (showMultiCluster: false)");
    // kubernetes-mixin's dashboards dropdown, and its tag so that dropdown lists this dashboard too.
    assert_eq!(d["links"][0]["type"], "dashboards");
    assert_eq!(d["links"][0]["tags"], serde_json::json!(["kubernetes-mixin"]));
    assert_eq!(d["links"][0]["asDropdown"], true);
    assert!(d["tags"].as_array().unwrap().iter().any(|t| t == "kubernetes-mixin"));
    // Pod and node cells link to kubernetes-mixin's pod and node dashboards (uid = md5 of the file name).
    let pods = d["panels"].as_array().unwrap().iter().find(|p| p["title"] == "Misscheduled pods").unwrap();
    let link = |column: &str| -> String {
        let overrides = pods["fieldConfig"]["overrides"].as_array().unwrap();
        let o =
            overrides.iter().find(|o| o["matcher"]["options"] == column).unwrap_or_else(|| panic!("no {column} link"));
        o["properties"][0]["value"][0]["url"].as_str().unwrap().to_owned()
    };
    assert!(link("pod").starts_with("/d/6581e46e4e5c7ba40a07646395ef7b23/"), "{}", link("pod"));
    assert!(link("pod").contains("var-namespace=${__data.fields.namespace}&var-pod=${__value.raw}"));
    assert!(link("node").starts_with("/d/200ac8fdbfbb74b39aff88118e4d1c2c/"), "{}", link("node"));
    assert!(link("node").contains("var-node=${__value.raw}"));
    // kube-state-metrics' count beside ours.
    assert!(
        queries(&d)
            .iter()
            .any(|(_, e)| e.starts_with("max by (namespace, daemonset) (kube_daemonset_status_number_misscheduled{"))
    );
    for panel in d["panels"].as_array().unwrap() {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            assert!(expr.contains("cluster=\"$cluster\""), "{}: {expr} ignores $cluster", panel["title"]);
            if expr.contains("rate(") {
                assert!(expr.contains("[$__rate_interval]"), "{}: {expr}", panel["title"]);
            }
        }
    }
}

#[test]
#[ignore = "needs Prometheus: scripts/test.sh runs it"]
fn every_panel_query_returns_data_from_a_real_prometheus() {
    // label-drift has a misscheduled pod and an ineligible node: every panel has something to show.
    let exporter = support::Exporter::snapshot(&["examples/label-drift.json"]);
    let exporter_port = exporter.port;
    // kube-state-metrics' series for the panel that sets its count beside ours.
    let ksm = http::Stub::serve(
        "kube_daemonset_status_number_misscheduled{namespace=\"monitoring\",daemonset=\"ssd-agent\"} 1\n",
    );
    // A snapshot has no history, so no lost node: a second replica that watched one go serves
    // those series, shaped as tests/lost_coverage.rs sees the exporter write them.
    let watching_replica = http::Stub::serve(concat!(
        "daemonset_lost_node_info{namespace=\"monitoring\",daemonset=\"ssd-agent\",node=\"n3\",reason=\"nfd_change\",key=\"feature.node.kubernetes.io/x\",manager=\"nfd-master\"} 1\n",
        "daemonset_lost_node_since_timestamp_seconds{namespace=\"monitoring\",daemonset=\"ssd-agent\",node=\"n3\",reason=\"nfd_change\"} 1780000000\n",
        "# TYPE daemonset_node_losses_total counter\n",
        "daemonset_node_losses_total{namespace=\"monitoring\",daemonset=\"ssd-agent\",reason=\"nfd_change\",key=\"feature.node.kubernetes.io/x\"} 2\n",
        // And a node without an available pod, as tests/uncovered_lab.rs sees it written.
        "daemonset_uncovered_node_info{namespace=\"monitoring\",daemonset=\"ssd-agent\",node=\"n4\",pod=\"ssd-agent-x\",reason=\"image_pull\",detail=\"ImagePullBackOff: image registry.example/ssd-agent:2\"} 1\n",
        "daemonset_uncovered_node_since_timestamp_seconds{namespace=\"monitoring\",daemonset=\"ssd-agent\",node=\"n4\",reason=\"image_pull\"} 1780000000\n",
        "daemonset_uncovered_nodes{namespace=\"monitoring\",daemonset=\"ssd-agent\",reason=\"image_pull\"} 1\n",
    ));
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n\
         - {{job_name: misschedule-exporter, honor_labels: true, static_configs: [{{targets: ['127.0.0.1:{exporter_port}', '127.0.0.1:{}']}}]}}\n\
         - {{job_name: kube-state-metrics, honor_labels: true, static_configs: [{{targets: ['127.0.0.1:{}']}}]}}\n",
        watching_replica.port, ksm.port
    );
    let prometheus = Prometheus::start(Prometheus::dir("dashboard"), &config);
    // Enough scrapes for rate() over the substituted $__rate_interval.
    prometheus.wait_for(r#"count_over_time(up{job="misschedule-exporter"}[1m]) >= 6"#);
    prometheus.wait_for(r#"up{job="kube-state-metrics"} == 1"#);
    let query = |expr: &str| prometheus.query(expr);

    let d = dashboard();
    let mut empty = Vec::new();
    for (panel, expr) in queries(&d) {
        let expr = substitute(&expr);
        if query(&expr).is_empty() {
            empty.push(format!("{panel}: {expr}"));
        }
    }
    // The variables' own queries must find values too (all but the hidden, single-cluster one).
    for var in
        d["templating"]["list"].as_array().unwrap().iter().filter(|v| v["type"] == "query" && v["name"] != "cluster")
    {
        let definition = var["definition"].as_str().unwrap();
        let (label, selector) = definition
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|inner| inner.rsplit_once(", "))
            .map(|(sel, label)| (label.to_owned(), substitute(sel)))
            .unwrap();
        let result = query(&format!("count by ({label}) ({selector})"));
        if result.is_empty() {
            empty.push(format!("variable {}: {definition}", var["name"]));
        }
    }
    assert!(empty.is_empty(), "queries that returned nothing:\n{}", empty.join("\n"));
    assert!(queries(&d).len() >= 12);
}
