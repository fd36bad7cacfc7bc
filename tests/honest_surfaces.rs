//! Honest surfaces on the real control plane, through real kubectl with the plugin on PATH:
//! every answer names what it looked at, a filter naming what is not there is an error, a
//! token that may not list fails at once saying what to grant, and an exporter that has not
//! read the cluster never claims an answer. Each failure is one `error:` line, in seconds.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::cluster::*;
use support::plugin::{expose_exporter, kubectl, kubectl_plugin};

/// A failure is this fast: no retry loop, no wait for caches.
const FAST: Duration = Duration::from_secs(5);

/// Run `command`, timed.
fn run(command: &mut Command) -> (Output, Duration) {
    let started = Instant::now();
    let out = command.output().expect("run");
    (out, started.elapsed())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// It failed with `code`, fast, with nothing on stdout and one `error:` line on stderr
/// holding every word; the line is returned.
fn fails(what: &str, (out, took): (Output, Duration), code: i32, words: &[&str]) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
    assert!(took < FAST, "{what}: took {took:?}");
    assert!(out.stdout.is_empty(), "{what}: stdout {}", text(&out.stdout));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line, got {stderr}");
    assert!(lines[0].starts_with("error: "), "{what}: {stderr}");
    assert!(!stderr.contains("Status {") && !stderr.contains("ErrorResponse"), "{what}: a debug dump: {stderr}");
    for word in words {
        assert!(stderr.contains(word), "{what}: no {word:?} in {stderr}");
    }
    println!("{what} ({took:?}): {}", lines[0]);
    lines[0].to_owned()
}

fn exporter_cli(kubeconfig: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"));
    command.env_remove("RUST_LOG").args(["explain", "--kubeconfig", kubeconfig]);
    command
}

const GRANT: &str = "grant get, list and watch on nodes, pods, daemonsets.apps and controllerrevisions.apps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn answers_name_their_scope_and_failures_are_one_line() {
    let cp = ControlPlane::start("honest");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let kubeconfig = cp.get("ADMIN_KUBECONFIG").to_owned();
    // The exporter's token, never granted anything here.
    let nobody = cp.get("EXPORTER_KUBECONFIG").to_owned();
    let server = cp.get("KUBE_SERVER").trim_end_matches('/').to_owned();
    agent_scene(&admin, &["n1", "n2"]).await;
    // The agent runs on both nodes before n2 is tainted, or the controller would skip n2.
    admin.wait_bound("agent", 2).await;
    kubectl(&kubeconfig, &["taint", "node", "n2", "dedicated=db:NoSchedule"]);
    // Until the controller counts the stranded pod in the DaemonSet's status (nudged: a
    // NoSchedule taint alone does not resync it since 1.33).
    let started = Instant::now();
    let mut nudged = started;
    let want = [("agent".to_owned(), 1)].into();
    while admin.fresh_status_totals(&want, &mut nudged).await.and_then(|t| t.get("agent").copied()) != Some(1) {
        assert!(started.elapsed() < STEP_TIMEOUT, "the agent on n2 never counted as misscheduled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The context's namespace (default) has no DaemonSet: said so, with the one elsewhere.
    let (out, _) = run(kubectl_plugin(&kubeconfig).arg("--exit-code"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "No DaemonSets in namespace default (cluster {server}). 1 is misscheduled in other namespaces: use -A.\n"
        )
    );
    let (out, _) = run(exporter_cli(&kubeconfig).arg("-n").arg("default"));
    assert!(text(&out.stdout).starts_with("No DaemonSets in namespace default ("), "{}", text(&out.stdout));
    // Where the row is, --exit-code says so; explain, like kubectl, takes -A.
    let (out, _) = run(kubectl_plugin(&kubeconfig).args(["-n", NS, "--exit-code"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("taint_added  dedicated  kubectl-taint"), "{}", text(&out.stdout));
    let (out, _) = run(exporter_cli(&kubeconfig).args(["-A", "-o", "json"]));
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["looked_at"]["source"], format!("cluster {server}"));
    assert_eq!((all["looked_at"]["daemonsets"].as_u64(), all["looked_at"]["nodes"].as_u64()), (Some(1), Some(2)));
    assert_eq!(all["misscheduled"].as_array().unwrap().len(), 1);

    // A filter naming nothing is an error with the name in it, from every tool.
    fails("-n nope", run(kubectl_plugin(&kubeconfig).args(["-n", "nope-ns", "--exit-code"])), 3, &["\"nope-ns\""]);
    fails("explain -n nope", run(exporter_cli(&kubeconfig).args(["-n", "nope-ns"])), 3, &["\"nope-ns\""]);
    let line = fails(
        "--daemonset nope",
        run(kubectl_plugin(&kubeconfig).args(["-n", NS, "--daemonset", "nope"])),
        3,
        &["daemonsets.apps \"nope\" not found in namespace monitoring"],
    );
    assert!(line.contains(&server), "it names where it looked: {line}");
    fails(
        "explain --daemonset nope",
        run(exporter_cli(&kubeconfig).args(["-A", "--daemonset", "nope"])),
        3,
        &["not found in any namespace"],
    );
    fails(
        "what-if --daemonset nope",
        run(kubectl_plugin(&kubeconfig).args(["what-if", "--daemonset", "nope", "label", "n1", "a=b"])),
        3,
        &["\"nope\" not found"],
    );

    // A token that may not list: at once, naming the resource and what to grant.
    let forbidden = ["forbidden", "cannot list resource \"nodes\"", GRANT];
    fails("plugin, no RBAC", run(&mut kubectl_plugin(&nobody)), 4, &forbidden);
    fails("explain, no RBAC", run(exporter_cli(&nobody).arg("-A")), 4, &forbidden);
    let line = fails("a missing kubeconfig", run(&mut exporter_cli("./missing")), 3, &["./missing", "No such file"]);
    assert_eq!(line.matches("missing").count(), 1, "the cause once: {line}");

    // The exporter on that token: no answer claimed, and the page says why.
    let exporter = Exporter::spawn_on("0.0.0.0", &["--kubeconfig", &nobody], Stdio::null());
    support::http::wait_ok(exporter.port, "/healthz", Duration::from_secs(10));
    // Until every watch's first list has been refused, some say "not listed yet": never an answer.
    let started = Instant::now();
    loop {
        let (status, readyz) = exporter.get("/readyz").unwrap();
        assert_eq!(status, 503, "{readyz}");
        if readyz.lines().filter(|l| l.contains(": cannot list: ")).count() == 4 {
            break;
        }
        assert!(started.elapsed() < FAST, "the refusals are not named: {readyz}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = exporter.get("/explain").unwrap();
    assert_eq!(status, 503, "{body}");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    let message = refusal["message"].as_str().unwrap();
    assert!(message.starts_with("no answer yet") && message.contains("nodes is forbidden"), "{message}");
    let (status, page) = exporter.get("/").unwrap();
    assert_eq!(status, 503);
    assert!(page.contains("No answer yet") && page.contains("nodes is forbidden") && page.contains(GRANT), "{page}");
    assert!(!page.contains("No misscheduled"), "never a green line: {page}");
    let (status, readyz) = exporter.get("/readyz").unwrap();
    assert_eq!(status, 503);
    assert!(readyz.contains("nodes: cannot list: nodes is forbidden"), "{readyz}");
    // Read through the API server's service proxy, as an operator would.
    expose_exporter(&admin, exporter.port, "n1").await;
    let from_exporter = ["--from-exporter", &format!("{NS}/misschedule-exporter")];
    fails(
        "--from-exporter, exporter not synced",
        run(kubectl_plugin(&kubeconfig).args(from_exporter)),
        4,
        &["no answer yet", "nodes is forbidden"],
    );

    // A Service with no ready endpoint: the endpoints controller writes an empty Endpoints.
    let pp = PostParams::default();
    let service = json!({"metadata": {"name": "idle"}, "spec": {"ports": [{"name": "http-metrics", "port": 18493}]}});
    Api::namespaced(admin.client.clone(), NS)
        .create(&pp, &serde_json::from_value::<k8s_openapi::api::core::v1::Service>(service).unwrap())
        .await
        .unwrap();
    let endpoints = json!({"metadata": {"name": "idle"}, "subsets": []});
    Api::namespaced(admin.client.clone(), NS)
        .create(&pp, &serde_json::from_value::<k8s_openapi::api::core::v1::Endpoints>(endpoints).unwrap())
        .await
        .unwrap();
    fails(
        "--from-exporter, no endpoints",
        run(kubectl_plugin(&kubeconfig).args(["--from-exporter", &format!("{NS}/idle")])),
        4,
        &["service monitoring/idle has no ready endpoint", "get pods,endpoints"],
    );
    fails(
        "--from-exporter, a wrong port",
        run(kubectl_plugin(&kubeconfig).args(["--from-exporter", &format!("{NS}/misschedule-exporter:9999")])),
        3,
        &["monitoring/misschedule-exporter:9999", "no service port 9999", "http-metrics"],
    );
    fails(
        "--from-exporter, no such service",
        run(kubectl_plugin(&kubeconfig).args(["--from-exporter", &format!("{NS}/nope")])),
        3,
        &["services \"nope\" not found"],
    );

    // Snapshots: the same rules offline.
    let snapshot = cp.dir.join("snapshot.json");
    let dump = Command::new("kubectl")
        .args(["--kubeconfig", &kubeconfig, "get", "nodes,daemonsets,controllerrevisions,pods", "-A", "-o", "json"])
        .arg("--show-managed-fields")
        .output()
        .unwrap();
    std::fs::write(&snapshot, &dump.stdout).unwrap();
    let snapshot = snapshot.to_str().unwrap();
    let (out, _) = run(kubectl_plugin(&kubeconfig).args(["--snapshot", snapshot, "--exit-code"]));
    assert_eq!(out.status.code(), Some(1), "the snapshot's row: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("kubectl-taint"),
        "--show-managed-fields keeps the manager: {}",
        text(&out.stdout)
    );
    fails(
        "snapshot -n nope",
        run(kubectl_plugin(&kubeconfig).args(["--snapshot", snapshot, "-n", "nope-ns"])),
        5,
        &["namespaces \"nope-ns\" not found in snapshot", "it holds monitoring"],
    );
    fails(
        "snapshot --daemonset nope",
        run(kubectl_plugin(&kubeconfig).args(["--snapshot", snapshot, "--daemonset", "nope"])),
        3,
        &["daemonsets.apps \"nope\" not found in any namespace (snapshot"],
    );
    let empty = cp.dir.join("empty.json");
    std::fs::write(&empty, r#"{"apiVersion": "v1", "kind": "List", "items": []}"#).unwrap();
    fails(
        "an empty snapshot",
        run(kubectl_plugin(&kubeconfig).args(["--snapshot", empty.to_str().unwrap(), "--exit-code"])),
        5,
        &["no Nodes, DaemonSets, ControllerRevisions or Pods", "--show-managed-fields"],
    );
}
