//! The alert rules and the routing example, checked by the tools that consume them:
//! promtool (rule unit tests), amtool (routing), a real Alertmanager (inhibition), and a real
//! Prometheus scraping two exporter replicas the way prometheus-operator does.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const RULES: &str = "alerts/misschedule-exporter.rules.yaml";
const ROUTING: &str = "alerts/alertmanager-example.yaml";

/// Run a tool from the Debian packages scripts/test.sh installs; a missing tool fails loudly.
fn run(tool: &str, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| panic!("{tool} is required (scripts/test.sh installs it): {e}"))
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs promtool: scripts/test.sh runs it"]
fn promtool_checks_and_unit_tests_the_rules() {
    assert_ok(&run("promtool", &["check", "rules", RULES]), "promtool check rules");
    assert_ok(&run("promtool", &["test", "rules", "tests/alerts/rules.test.yaml"]), "promtool test rules");
}

#[test]
#[ignore = "needs amtool: scripts/test.sh runs it"]
fn alertmanager_routes_each_reason() {
    assert_ok(&run("amtool", &["check-config", ROUTING]), "amtool check-config");
    let cases = [
        (vec!["alertname=DaemonSetPodMisscheduled", "reason=label_drift"], "daemonset-owners"),
        (vec!["alertname=DaemonSetPodMisscheduled", "reason=nfd_change"], "daemonset-owners"),
        (vec!["alertname=DaemonSetPodMisscheduled", "reason=daemonset_changed"], "daemonset-owners"),
        (vec!["alertname=DaemonSetPodMisscheduled", "reason=taint_added"], "daemonset-owners"),
        (vec!["alertname=DaemonSetPodMisscheduled", "reason=node_name_mismatch"], "daemonset-owners"),
        (vec!["alertname=DaemonSetDrainStuck", "reason=autoscaler_drain"], "drain-low-urgency"),
        (vec!["alertname=DaemonSetMisscheduledUnexplained", "namespace=m", "daemonset=a"], "daemonset-owners"),
        (vec!["alertname=DaemonSetNodeLost", "reason=nfd_change"], "daemonset-owners"),
        (vec!["alertname=DaemonSetNodeLost", "reason=taint_added"], "daemonset-owners"),
        (vec!["alertname=DaemonSetCoverageFlapping", "namespace=m", "daemonset=a", "key=k"], "daemonset-owners"),
        (vec!["alertname=DaemonSetNodeUncovered", "reason=unschedulable"], "cluster-capacity"),
        (vec!["alertname=DaemonSetNodeUncovered", "reason=create_failed"], "cluster-capacity"),
        (vec!["alertname=DaemonSetNodeUncovered", "reason=image_pull"], "daemonset-owners"),
        (vec!["alertname=DaemonSetNodeUncovered", "reason=crash_loop"], "daemonset-owners"),
        (vec!["alertname=DaemonSetNodeUncovered", "reason=not_ready"], "daemonset-owners"),
        (vec!["alertname=MisscheduleExporterDown"], "platform"),
        (vec!["alertname=MisscheduleExporterCacheNotReady", "resource=pods"], "platform"),
        (vec!["alertname=SomethingElse"], "default"),
    ];
    for (labels, receiver) in cases {
        let config = format!("--config.file={ROUTING}");
        let verify = format!("--verify.receivers={receiver}");
        let mut args = vec!["config", "routes", "test", config.as_str(), verify.as_str()];
        args.extend(labels.iter().copied());
        assert_ok(&run("amtool", &args), &format!("route {labels:?} -> {receiver}"));
    }
    // The check can fail: a wrong expectation is reported as such.
    let wrong = run(
        "amtool",
        &[
            "config",
            "routes",
            "test",
            &format!("--config.file={ROUTING}"),
            "--verify.receivers=platform",
            "reason=label_drift",
        ],
    );
    assert!(!wrong.status.success());
}

/// A real Alertmanager on loopback with `config`, its state in `dir`; ready when returned.
struct Alertmanager {
    child: Child,
    port: u16,
}

impl Alertmanager {
    fn start(dir: &Path, config: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("alertmanager.yaml"), config).unwrap();
        let port = http::free_port();
        let child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", dir.join("alertmanager.yaml").display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-alertmanager is required (scripts/test.sh installs it)");
        let alertmanager = Self { child, port };
        http::wait_ok(port, "/-/ready", Duration::from_secs(20));
        alertmanager
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs Alertmanager: scripts/test.sh runs it"]
fn unexplained_is_inhibited_while_a_pod_alert_explains_the_daemonset() {
    let dir = tempfile::Builder::new().prefix("misschedule-am-").tempdir().unwrap();
    // Same configuration, with receivers pointed at loopback so nothing leaves the machine.
    let config = std::fs::read_to_string(Path::new(ROOT).join(ROUTING))
        .unwrap()
        .replace("http://alert-sink.example", "http://127.0.0.1:9");
    let am = Alertmanager::start(dir.path(), &config);
    let port = am.port;

    let alert = |name: &str, ds: &str| json!({"labels": {"alertname": name, "namespace": "monitoring", "daemonset": ds, "severity": "warning"}});
    let alerts = json!([
        alert("DaemonSetPodMisscheduled", "explained"),
        alert("DaemonSetMisscheduledUnexplained", "explained"),
        alert("DaemonSetMisscheduledUnexplained", "other"),
    ]);
    let (status, body) = http::request(port, "POST", "/api/v2/alerts", Some(&alerts.to_string())).unwrap();
    assert_eq!(status, 200, "{body}");

    let inhibited = |ds: &str| -> bool {
        let (_, body) = http::get(port, "/api/v2/alerts").unwrap();
        let alerts: Vec<Value> = serde_json::from_str(&body).unwrap();
        let alert = alerts
            .iter()
            .find(|a| a["labels"]["alertname"] == "DaemonSetMisscheduledUnexplained" && a["labels"]["daemonset"] == ds)
            .unwrap_or_else(|| panic!("alert for {ds} not found in {body}"));
        !alert["status"]["inhibitedBy"].as_array().unwrap().is_empty()
    };
    // Inhibition is computed as alerts arrive; give it a moment.
    let started = std::time::Instant::now();
    while !inhibited("explained") {
        assert!(started.elapsed() < Duration::from_secs(10), "Unexplained was never inhibited");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!inhibited("other"), "only the DaemonSet the pod alert explains is inhibited");
}

#[test]
fn every_alert_links_to_its_runbook_section() {
    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(Path::new(ROOT).join(RULES)).unwrap()).unwrap();
    let runbooks = std::fs::read_to_string(Path::new(ROOT).join("docs/runbooks.md")).unwrap();
    let alerts = rules["groups"][0]["rules"].as_array().unwrap();
    assert_eq!(alerts.len(), 11);
    for rule in alerts {
        let name = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        assert!(url.ends_with(&format!("docs/runbooks.md#{}", name.to_lowercase())), "{name}: {url}");
        assert!(runbooks.contains(&format!("\n## {name}\n")), "docs/runbooks.md has no section for {name}");
        assert!(rule["labels"]["severity"].is_string(), "{name} has no severity");
    }
}

/// The kube-prometheus-stack path end to end: two exporter replicas scraped the way
/// prometheus-operator scrapes the chart's ServiceMonitor (its relabelling reproduced from the
/// rendered object, job from jobLabel although the release is renamed), kube-state-metrics'
/// count beside them, the shipped rules evaluated by a real Prometheus, and its alerts routed
/// by a real Alertmanager to loopback webhooks.
#[test]
#[ignore = "needs Prometheus, Alertmanager and helm-python-sdk: scripts/test.sh runs it"]
fn operator_labelled_replicas_raise_each_alert_once_and_alertmanager_routes_by_reason() {
    use support::prometheus::{Endpoint, Prometheus, service_monitor_scrape_config};

    // The ServiceMonitor adds the cluster label, as users with one Prometheus per cluster and a
    // central ruler do.
    // nameOverride moves the job (jobLabel is app.kubernetes.io/name): the chart's own rules
    // must follow it, or the pod alerts never fire and MisscheduleExporterDown always does.
    let rendered = support::chart::render(&json!({
        "fullnameOverride": "renamed",
        "nameOverride": "mse",
        "serviceMonitor": {"enabled": true, "relabelings": [{"targetLabel": "cluster", "replacement": "eu-1"}]},
        "prometheusRule": {"enabled": true},
    }));
    let (monitor, service) = (&rendered["servicemonitor.yaml"], &rendered["service.yaml"]);
    let replicas = [(); 2].map(|_| support::Exporter::snapshot(&["tests/fixtures/alerting.yaml"]));
    // kube-state-metrics: agent's status says one node more than the exporter explains (2); web
    // says 1 where the exporter sees none. Summed over both replicas the exporter would say 4.
    let ksm = http::Stub::serve(
        "kube_daemonset_status_number_misscheduled{namespace=\"agents\",daemonset=\"agent\"} 3\n\
         kube_daemonset_status_number_misscheduled{namespace=\"agents\",daemonset=\"web\"} 1\n",
    );
    let webhooks = http::Stub::serve("");

    // Alertmanager with the example routing, receivers pointed at the loopback webhook.
    let am_dir = tempfile::Builder::new().prefix("misschedule-am-e2e-").tempdir().unwrap();
    let mut routing: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(Path::new(ROOT).join(ROUTING)).unwrap()).unwrap();
    routing["route"]["group_wait"] = json!("1s");
    routing["route"]["group_interval"] = json!("1s");
    for receiver in routing["receivers"].as_array_mut().unwrap() {
        for hook in receiver["webhook_configs"].as_array_mut().into_iter().flatten() {
            let path = hook["url"].as_str().unwrap().rsplit('/').next().unwrap().to_owned();
            hook["url"] = json!(format!("http://127.0.0.1:{}/{path}", webhooks.port));
        }
    }
    let am = Alertmanager::start(am_dir.path(), &routing.to_string());
    let am_port = am.port;

    let dir = Prometheus::dir("alerting-e2e");
    // The rules as the chart renders them into its PrometheusRule.
    let shipped = serde_json::to_string(&rendered["prometheusrule.yaml"]["spec"]).unwrap();
    assert!(shipped.contains("job=\\\"mse\\\""), "{shipped}");
    std::fs::write(dir.join("rules.yaml"), &shipped).unwrap();
    let endpoints: Vec<Endpoint> = replicas
        .iter()
        .zip(["renamed-5d4f8-a", "renamed-5d4f8-b"])
        .map(|(replica, pod)| Endpoint {
            address: format!("127.0.0.1:{}", replica.port),
            namespace: "monitoring",
            pod,
            container: "exporter",
            port_name: "http-metrics",
        })
        .collect();
    let config = json!({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [dir.join("rules.yaml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [format!("127.0.0.1:{am_port}")]}]}]},
        "scrape_configs": [
            service_monitor_scrape_config(monitor, service, &endpoints, "1s"),
            {"job_name": "kube-state-metrics", "honor_labels": true,
             "static_configs": [{"targets": [format!("127.0.0.1:{}", ksm.port)], "labels": {"cluster": "eu-1"}}]},
        ],
    });
    let prometheus = Prometheus::start(dir.clone(), &config.to_string());
    // Both replicas carry job="mse" (from jobLabel), not the Service's name.
    prometheus.wait_for(r#"count(up{job="mse", service="renamed", endpoint="http-metrics"} == 1) == 2"#);
    assert_eq!(prometheus.query(r#"count(daemonset_misscheduled_nodes{pod=~"renamed-5d4f8-.*"})"#).len(), 1);

    let expected: BTreeSet<String> = [
        r#"DaemonSetDrainStuck {"cluster":"eu-1","daemonset":"agent","namespace":"agents","node":"n1","pod":"agent-n1","reason":"autoscaler_drain"}"#,
        r#"DaemonSetMisscheduledUnexplained {"cluster":"eu-1","daemonset":"agent","namespace":"agents"}"#,
        r#"DaemonSetMisscheduledUnexplained {"cluster":"eu-1","daemonset":"web","namespace":"agents"}"#,
        r#"DaemonSetNodeUncovered {"cluster":"eu-1","daemonset":"web","namespace":"agents","node":"n3","reason":"image_pull"}"#,
        r#"DaemonSetPodMisscheduled {"cluster":"eu-1","daemonset":"agent","key":"pool","namespace":"agents","node":"n2","pod":"agent-n2","reason":"label_drift"}"#,
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // Each alert exactly once, with only the labels that identify it: no replica's target labels.
    let alerts_in = |state: &str| -> Vec<String> {
        let mut alerts: Vec<String> = prometheus
            .alerts()
            .iter()
            // Active: pending, or firing already for a rule without `for` (DaemonSetNodeUncovered
            // measures its 15 minutes from the since series).
            .filter(|a| a["state"] == state || (state == "active" && a["state"] != "inactive"))
            .map(|a| {
                let mut labels = a["labels"].as_object().unwrap().clone();
                let name = labels.remove("alertname").unwrap();
                assert_eq!(labels.remove("severity"), Some(json!("warning")));
                format!("{} {}", name.as_str().unwrap(), Value::Object(labels))
            })
            .collect();
        alerts.sort();
        alerts
    };
    let settle = |state: &str| -> Vec<String> {
        let started = Instant::now();
        while alerts_in(state).len() < expected.len() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(250));
        }
        std::thread::sleep(Duration::from_secs(3)); // a few more evaluations: nothing else appears
        alerts_in(state)
    };
    let active = settle("active");
    assert_eq!(active, expected.iter().cloned().collect::<Vec<_>>(), "the shipped rules, pending or firing");

    // The same expressions with `for: 0s`, so that they fire now and reach Alertmanager.
    let mut firing_now: Value = serde_saphyr::from_str(&shipped).unwrap();
    for group in firing_now["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            rule["for"] = json!("0s");
        }
    }
    std::fs::write(dir.join("rules.yaml"), firing_now.to_string()).unwrap();
    prometheus.reload();
    let firing = settle("firing");
    assert_eq!(firing, expected.iter().cloned().collect::<Vec<_>>(), "the same alerts, firing");
    for alert in prometheus.alerts() {
        let description = alert["annotations"]["description"].as_str().unwrap();
        assert!(description.contains(" in cluster eu-1"), "{description}");
    }

    // Routing on reason, and the inhibition: agent's pod alert explains agent, so only web's
    // Unexplained reaches the DaemonSet owners. Nothing for the platform team.
    let delivered = || -> BTreeSet<String> {
        webhooks
            .received()
            .iter()
            .flat_map(|(path, body)| {
                let message: Value = serde_json::from_str(body).unwrap();
                message["alerts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| {
                        format!(
                            "{path} {} {}",
                            a["labels"]["alertname"].as_str().unwrap(),
                            a["labels"]["daemonset"].as_str().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let want: BTreeSet<String> = [
        "/daemonset-owners DaemonSetMisscheduledUnexplained web",
        "/daemonset-owners DaemonSetNodeUncovered web",
        "/daemonset-owners DaemonSetPodMisscheduled agent",
        "/low-urgency DaemonSetDrainStuck agent",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let started = Instant::now();
    while delivered() != want && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(2));
    let held_by_alertmanager = http::get(am_port, "/api/v2/alerts").map(|(_, body)| body).unwrap_or_default();
    assert_eq!(delivered(), want, "Alertmanager holds: {held_by_alertmanager}");
}
