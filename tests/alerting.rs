//! The alert rules and the routing example, checked by the tools that consume them:
//! promtool (rule unit tests), amtool (routing), and a real Alertmanager (inhibition).

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

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
fn promtool_checks_and_unit_tests_the_rules() {
    assert_ok(&run("promtool", &["check", "rules", RULES]), "promtool check rules");
    assert_ok(&run("promtool", &["test", "rules", "tests/alerts/rules.test.yaml"]), "promtool test rules");
}

#[test]
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

struct Alertmanager(Child);

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn unexplained_is_inhibited_while_a_pod_alert_explains_the_daemonset() {
    let dir = std::env::temp_dir().join(format!("misschedule-am-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Same configuration, with receivers pointed at loopback so nothing leaves the machine.
    let config = std::fs::read_to_string(Path::new(ROOT).join(ROUTING))
        .unwrap()
        .replace("http://alert-sink.example", "http://127.0.0.1:9");
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
    let _am = Alertmanager(child);
    http::wait_ok(port, "/-/ready", Duration::from_secs(20));

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
    assert_eq!(alerts.len(), 7);
    for rule in alerts {
        let name = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        assert!(url.ends_with(&format!("docs/runbooks.md#{}", name.to_lowercase())), "{name}: {url}");
        assert!(runbooks.contains(&format!("\n## {name}\n")), "docs/runbooks.md has no section for {name}");
        assert!(rule["labels"]["severity"].is_string(), "{name} has no severity");
    }
}
