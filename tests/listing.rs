//! How the exporter lists, as the API server's audit log records it: streamed by default
//! (a watch with `sendInitialEvents=true`, no list request at all), and with
//! `--list-mode pages` in pages of `--list-page-size`, or with `--use-apiserver-cache` from
//! the watch cache (`resourceVersion=0`) instead of etcd; with `--apiserver-compression`
//! streamed and gzipped, one gzip member per event. Every way ends with the same answer, and
//! so does each encoding of pods and nodes (`--wire protobuf`, where a JSON answer would be
//! an error, and `--wire json`).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Exporter;
use support::cluster::{Cluster, ControlPlane, NS, READ, agent_scene, grant_exporter};

const NODES: usize = 7;

/// Metadata of every list request, none of anything else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [list, watch]
- level: None
";

/// The request URIs of the exporter's node requests with `verb` in audit log lines `from` onwards.
fn node_requests(audit_log: &Path, from: usize, verb: &str) -> Vec<String> {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    text.lines()
        .skip(from)
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["user"]["username"] == "misschedule-exporter" && e["objectRef"]["resource"] == "nodes")
        .filter(|e| e["verb"] == verb)
        .filter_map(|e| e["requestURI"].as_str().map(str::to_owned))
        .collect()
}

fn node_lists(audit_log: &Path, from: usize) -> Vec<String> {
    node_requests(audit_log, from, "list")
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

async fn until_ready(exporter: &Exporter) {
    let started = Instant::now();
    while !exporter.ready() {
        assert!(started.elapsed() < Duration::from_secs(30), "exporter never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Content-Encoding 1.37 answers a streamed list of nodes with, for a client that asks
/// for gzip and does not inflate it itself.
async fn streamed_list_encoding(kubeconfig: &str) -> Option<String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.unwrap();
    config.disable_compression = true;
    let client = kube::Client::try_from(config).unwrap();
    let uri = "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let request = http::Request::get(uri).header("Accept-Encoding", "gzip").body(kube::client::Body::empty()).unwrap();
    let response = client.send(request).await.unwrap();
    assert!(response.status().is_success(), "{:?}", response.status());
    response.headers().get("content-encoding").map(|v| v.to_str().unwrap_or("?").to_owned())
}

/// Every DaemonSet series the exporter serves, and its cache's object counts: its whole
/// answer, to compare between two ways of reading the same cluster. A `since` series is
/// kept without its value, which may be when this exporter first saw the state.
fn series(exporter: &Exporter) -> Vec<String> {
    let metrics = exporter.metrics();
    let kept = |l: &&str| l.starts_with("daemonset_") || l.starts_with("misschedule_exporter_cache_objects");
    let unvalued = |l: &str| match l.split_once("_since_timestamp_seconds{") {
        Some(_) => l.rsplit_once(' ').map_or(l, |(series, _)| series).to_owned(),
        None => l.to_owned(),
    };
    metrics.lines().filter(kept).map(unvalued).collect()
}

/// What the exporter knows: its eligible-node count and how many nodes it holds.
fn answer(exporter: &Exporter) -> (Option<f64>, Option<f64>) {
    (
        exporter.sample(&format!("daemonset_eligible_nodes{{namespace=\"{NS}\",daemonset=\"agent\"}}")),
        exporter.sample("misschedule_exporter_cache_objects{resource=\"nodes\"}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn lists_are_streamed_or_paged_and_can_come_from_the_watch_cache() {
    let dir = std::env::temp_dir().join(format!("misschedule-listing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("audit-policy.yaml");
    let audit_log = dir.join("audit.log");
    std::fs::write(&policy, AUDIT_POLICY).unwrap();
    let cp = ControlPlane::start_with(
        "listing",
        &format!("--audit-policy-file={} --audit-log-path={}", policy.display(), audit_log.display()),
    );
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    grant_exporter(&admin, &READ).await;
    let nodes: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    agent_scene(&admin, &nodes.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let expected = (Some(NODES as f64), Some(NODES as f64));

    // By default, streamed: a watch asking for its initial events, and no list at all.
    let from = lines(&audit_log);
    let streamed = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &[], &cp.dir.join("streamed.log"));
    until_ready(&streamed).await;
    assert_eq!(answer(&streamed), expected);
    assert_eq!(node_lists(&audit_log, from), Vec::<String>::new());
    let watches = node_requests(&audit_log, from, "watch");
    let initial = |u: &&String| u.contains("sendInitialEvents=true") && u.contains("resourceVersionMatch=NotOlderThan");
    assert_eq!(watches.iter().filter(initial).count(), 1, "{watches:#?}");
    assert_eq!(streamed.sample("misschedule_exporter_lists_total{resource=\"nodes\",mode=\"stream\"}"), Some(1.0));
    drop(streamed);

    // Gzipped, where asked: 1.37 gzips a streamed list (a gzip member per flush, and it
    // flushes whenever its queue of events runs dry: `tests/stream_list.rs` reads many),
    // and the exporter reads it to its end bookmark and watches on.
    assert_eq!(streamed_list_encoding(cp.get("ADMIN_KUBECONFIG")).await.as_deref(), Some("gzip"));
    let gzipped =
        Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &["--apiserver-compression"], &cp.dir.join("gzip.log"));
    until_ready(&gzipped).await;
    assert_eq!(answer(&gzipped), expected);
    assert_eq!(gzipped.sample("misschedule_exporter_lists_total{resource=\"nodes\",mode=\"stream\"}"), Some(1.0));
    // And follows a change after it.
    admin.set_taints("n0", serde_json::json!([{"key": "gzip", "value": "watched", "effect": "NoSchedule"}])).await;
    let started = Instant::now();
    while answer(&gzipped).0 != Some(NODES as f64 - 1.0) {
        assert!(started.elapsed() < Duration::from_secs(20), "the taint never came through: {:?}", answer(&gzipped));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin.set_taints("n0", serde_json::json!(null)).await;
    drop(gzipped);

    // Pages of two: seven nodes take four requests, chained by continue tokens, read from etcd.
    let from = lines(&audit_log);
    let paged = Exporter::start_with(
        cp.get("EXPORTER_KUBECONFIG"),
        &["--list-mode", "pages", "--list-page-size", "2"],
        &cp.dir.join("paged.log"),
    );
    until_ready(&paged).await;
    assert_eq!(answer(&paged), expected);
    let uris = node_lists(&audit_log, from);
    assert_eq!(uris.len(), NODES.div_ceil(2), "{uris:#?}");
    assert!(uris.iter().all(|u| u.contains("limit=2") && !u.contains("resourceVersion=")), "{uris:#?}");
    assert_eq!(uris.iter().filter(|u| u.contains("continue=")).count(), NODES.div_ceil(2) - 1, "{uris:#?}");
    drop(paged);

    // From the watch cache: resourceVersion=0, not older than that; same answer.
    let from = lines(&audit_log);
    let cached = Exporter::start_with(
        cp.get("EXPORTER_KUBECONFIG"),
        &["--list-mode", "pages", "--use-apiserver-cache"],
        &cp.dir.join("cached.log"),
    );
    until_ready(&cached).await;
    assert_eq!(answer(&cached), expected);
    let uris = node_lists(&audit_log, from);
    assert!(!uris.is_empty());
    assert!(
        uris.iter().all(|u| u.contains("resourceVersion=0") && u.contains("resourceVersionMatch=NotOlderThan")),
        "{uris:#?}"
    );
    drop(cached);

    // Each encoding, each list mode: the same whole answer, and a change followed after.
    let as_json = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &["--wire", "json"], &cp.dir.join("json.log"));
    until_ready(&as_json).await;
    let whole = series(&as_json);
    let pods = whole.iter().find_map(|l| l.strip_prefix("misschedule_exporter_cache_objects{resource=\"pods\"} "));
    assert!(pods.is_some_and(|n| n.parse::<f64>().is_ok_and(|n| n > 0.0)), "pods were read: {whole:#?}");
    drop(as_json);
    for (name, args) in [
        ("protobuf streamed", &["--wire", "protobuf"][..]),
        ("protobuf in gzipped pages", &["--wire", "protobuf", "--list-mode", "pages", "--apiserver-compression"]),
    ] {
        let exporter = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), args, &cp.dir.join(format!("{name}.log")));
        until_ready(&exporter).await;
        assert_eq!(series(&exporter), whole, "{name}");
        admin.set_taints("n1", serde_json::json!([{"key": "wire", "effect": "NoSchedule"}])).await;
        let started = Instant::now();
        while answer(&exporter).0 != Some(NODES as f64 - 1.0) {
            assert!(started.elapsed() < Duration::from_secs(20), "{name}: the taint never came through");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        admin.set_taints("n1", serde_json::json!(null)).await;
        while answer(&exporter) != expected {
            assert!(started.elapsed() < Duration::from_secs(40), "{name}: the taint's removal never came through");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
