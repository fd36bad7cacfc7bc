//! The binary: snapshot mode, `explain -o json`, and clear errors with
//! documented exit codes (docs/operations.md) instead of panics.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod support;

use support::http;

fn exporter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .expect("run exporter")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn explain_json_on_a_snapshot() {
    let out = exporter(&[
        "explain",
        "--snapshot",
        "examples/cluster-autoscaler-drain.json",
        "-o",
        "json",
        "--daemonset",
        "datadog-agent",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let explanation: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = explanation["misscheduled"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert!(explanation["ineligible"].is_array(), "the ineligible-node reasons ride along");
    for field in ["namespace", "daemonset", "pod", "node", "reason", "key", "since"] {
        assert!(rows[0].get(field).is_some(), "missing {field}");
    }
    assert_eq!(rows[0]["reason"], "autoscaler_drain");
    assert_eq!(rows[0]["node"], "n1");
}

#[test]
fn bad_snapshots_exit_5_naming_the_file() {
    let dir = tempfile::Builder::new().prefix("misschedule-cli-").tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        ("truncated.json", br#"{"kind":"List","items":[{"kind":"Node""#, "not valid JSON"),
        (
            "unknown.yaml",
            b"apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: x}\n",
            "unsupported kind \"Secret\"",
        ),
        ("broken.yaml", b"kind: Node\nmetadata: {name: [\n", "not valid YAML"),
        ("binary.json", b"\xff\xfe\x00garbage", "not UTF-8"),
    ];
    for (name, bytes, message) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = exporter(&["explain", "--snapshot", path.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(5), "{name}: {err}");
        assert!(err.contains(name) && err.contains(message), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let out = exporter(&["explain", "--snapshot", "/nonexistent/snap.json"]);
    assert_eq!(out.status.code(), Some(5));
    assert!(stderr(&out).contains("/nonexistent/snap.json: cannot read"));
}

#[test]
fn configuration_errors_have_their_own_exit_codes() {
    let out = exporter(&["explain", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot read kubeconfig /nonexistent/kubeconfig"));

    // A kubeconfig pointing at a port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let kubeconfig = tempfile::Builder::new().prefix("misschedule-unreachable-").suffix(".yaml").tempfile().unwrap();
    let path = kubeconfig.path();
    std::fs::write(path, format!("apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n")).unwrap();
    let out = exporter(&["--kubeconfig", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot reach the API server"));

    let out = exporter(&["--kubeconfig", path.to_str().unwrap(), "--context", "nope"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = exporter(&["--snapshot", "examples/label-drift.json", "--listen", &addr]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("cannot listen on {addr}")));
}

#[test]
fn serves_a_snapshot_and_shuts_down_on_sigterm() {
    let mut exporter = support::Exporter::snapshot(&["examples/cluster-autoscaler-drain.json"]);
    let (_, headers, metrics) = http::get_with_headers(exporter.port, "/metrics").unwrap();
    // No Accept header, as curl sends it: the 0.0.4 text format (Prometheus asks for OpenMetrics).
    assert!(headers.contains("content-type: text/plain; version=0.0.4"), "{headers}");
    assert!(metrics.contains(
        r#"daemonset_misscheduled_nodes{namespace="monitoring",daemonset="datadog-agent",reason="autoscaler_drain"} 1"#
    ));
    assert!(metrics.contains(
        r#"daemonset_misscheduled_nodes{namespace="monitoring",daemonset="datadog-agent",reason="label_drift"} 0"#
    ));
    assert!(metrics.contains(r#"daemonset_eligible_nodes{namespace="monitoring",daemonset="datadog-agent"} 2"#));
    assert!(metrics.contains("# TYPE misschedule_exporter_watch_events_total counter"), "{metrics}");
    let child = &mut exporter.child;
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "did not exit within 5s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
}
