//! End to end in snapshot mode, on `tests/fixtures/controller-1.28.yaml`: deleted terminal
//! pods, running terminating pods, matching, non-matching and contested orphans, an
//! invalid affinity value and a DaemonSet being deleted. `explain -o json` and `/metrics`
//! must give exactly the counts the 1.28+ controller computes, which the fixture holds as
//! each DaemonSet's status.

use std::collections::BTreeSet;
use std::process::Command;

mod support;

use support::http;

const FIXTURE: &str = "tests/fixtures/controller-1.28.yaml";

/// (daemonset, numberMisscheduled, desiredNumberScheduled) as the controller computes them.
const STATUS: [(&str, u32, u32); 4] = [("agent", 2, 1), ("invalid-affinity", 1, 0), ("web-a", 1, 1), ("web-b", 1, 1)];

#[test]
fn explain_gives_the_controllers_rows() {
    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .args(["explain", "--snapshot", FIXTURE, "-o", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let explanation: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = explanation["misscheduled"].as_array().unwrap();
    let got: BTreeSet<(String, String, String, String, String)> = rows
        .iter()
        .map(|r| {
            let field = |name: &str| r[name].as_str().unwrap().to_owned();
            (field("daemonset"), field("pod"), field("node"), field("reason"), field("key"))
        })
        .collect();
    let row = |ds: &str, pod: &str, node: &str, reason: &str, key: &str| {
        (ds.to_owned(), pod.to_owned(), node.to_owned(), reason.to_owned(), key.to_owned())
    };
    let drain = "ToBeDeletedByClusterAutoscaler";
    let expected = BTreeSet::from([
        // Adopted in the controller's next sync, so counted now.
        row("agent", "agent-orphan-n2", "n2", "label_drift", "pool"),
        // Terminating but still running: counted.
        row("agent", "agent-n3", "n3", "autoscaler_drain", drain),
        row("invalid-affinity", "invalid-affinity-n1", "n1", "label_drift", "zone"),
        row("web-a", "web-a-n3", "n3", "autoscaler_drain", drain),
        row("web-b", "web-b-n3", "n3", "autoscaler_drain", drain),
    ]);
    assert_eq!(got, expected);
    let orphan = rows.iter().find(|r| r["pod"] == "agent-orphan-n2").unwrap();
    assert!(orphan["fix"].as_str().unwrap().contains("will adopt it"), "{orphan}");
    let owned = rows.iter().find(|r| r["pod"] == "agent-n3").unwrap();
    assert!(!owned["fix"].as_str().unwrap().contains("adopt"), "{owned}");
    // Every status in the fixture agrees with us, so no disagreement is logged; the
    // contested orphan is logged once.
    assert!(!stderr.contains("disagrees"), "{stderr}");
    assert_eq!(stderr.matches("orphan pod selected by more than one DaemonSet").count(), 1, "{stderr}");
    assert!(stderr.contains("web-orphan-n2"), "{stderr}");
}

#[test]
fn metrics_give_the_controllers_counts() {
    let exporter = support::Exporter::snapshot(&[FIXTURE]);
    let (status, metrics) = http::request(exporter.port, "GET", "/metrics", None).unwrap();
    drop(exporter);
    assert_eq!(status, 200);
    let sample = |line: &str| line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok());
    for (ds, misscheduled, desired) in STATUS {
        let selector = format!("daemonset=\"{ds}\"");
        let by_reason: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("daemonset_misscheduled_nodes{") && l.contains(&selector))
            .filter_map(sample)
            .sum();
        assert_eq!(by_reason, f64::from(misscheduled), "{ds} numberMisscheduled");
        let eligible = format!("daemonset_eligible_nodes{{namespace=\"agents\",{selector}}} {desired}");
        assert!(metrics.lines().any(|l| l == eligible), "{eligible}\n{metrics}");
    }
    // Exactly the five misscheduled pods, and nothing at all for the DaemonSet being deleted.
    assert_eq!(metrics.lines().filter(|l| l.starts_with("daemonset_misscheduled_pod_info{")).count(), 5);
    assert!(!metrics.contains("daemonset=\"leaving\""), "{metrics}");
    for pod in ["agent-n2-failed", "stranger-n2", "web-orphan-n2", "leaving-n1", "leaving-orphan-n2"] {
        assert!(!metrics.contains(&format!("pod=\"{pod}\"")), "{pod} is not counted:\n{metrics}");
    }
}
