//! The guard's HTTPS edge, with the exporter binary against the fake API server: a review
//! answered from the index, bodies that are no review refused with a 400 that says why
//! (never a panic: the exporter stays ready), and, before the caches are synced, every
//! change let through with a warning that it was not checked. Each counted by verdict.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::cluster::samples;
use support::fakeapi::{FakeApi, Fault};
use support::{Exporter, daemon_pod, daemonset, http, node, revision};

/// n1 in pool a, n2 in pool b, and DaemonSet `agent` for pool a with a pod on each.
fn cluster() -> Vec<Value> {
    let ds = daemonset("agent", json!({"nodeSelector": {"pool": "a"}, "containers": [{"name": "a", "image": "a"}]}));
    let mut objects: Vec<Value> = [("n1", "a"), ("n2", "b")]
        .iter()
        .map(|(n, p)| serde_json::to_value(node(n, &[("pool", p)], &[])).unwrap())
        .collect();
    objects.push(serde_json::to_value(revision(&ds, "h1")).unwrap());
    objects.extend(["n1", "n2"].iter().map(|n| serde_json::to_value(daemon_pod(&ds, n, "h1", true)).unwrap()));
    objects.push(serde_json::to_value(ds).unwrap());
    objects
}

struct Guarded {
    _fake: FakeApi,
    exporter: Exporter,
    port: u16,
    ca: PathBuf,
    /// Removed when the test ends, after the processes above (fields drop in order).
    dir: tempfile::TempDir,
}

async fn start(name: &str, fault: Option<Fault>, extra: &[&str]) -> Guarded {
    let dir = tempfile::Builder::new().prefix(&format!("misschedule-guard-http-{name}-")).tempdir().unwrap();
    let fake = FakeApi::start(cluster(), Duration::from_secs(1)).await;
    if let Some(fault) = fault {
        fake.fault(Some("pods"), fault);
    }
    let kubeconfig = fake.kubeconfig(&dir.path().join("kubeconfig"));
    let (cert, key) = http::self_signed(dir.path(), "webhook");
    let port = http::free_port();
    let listen = format!("127.0.0.1:{port}");
    let args = ["--kubeconfig", &kubeconfig, "--webhook-listen", &listen];
    let tls = ["--webhook-tls-cert-file", cert.to_str().unwrap(), "--webhook-tls-key-file", key.to_str().unwrap()];
    let args: Vec<&str> = args.into_iter().chain(tls).chain(extra.iter().copied()).collect();
    let exporter = Exporter::spawn(&args, Stdio::inherit());
    http::wait_ok(exporter.port, "/healthz", Duration::from_secs(10));
    Guarded { _fake: fake, exporter, port, ca: cert, dir }
}

/// POST `body` to /validate over HTTPS, trusting only `ca`: (status, body).
fn post(port: u16, ca: &Path, body: &[u8]) -> (u16, String) {
    let mut child = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "-H", "Content-Type: application/json"])
        .args(["--data-binary", "@-", "--cacert"])
        .arg(ca)
        .arg(format!("https://127.0.0.1:{port}/validate"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), body).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.parse().unwrap_or(0), body.to_owned())
}

/// An AdmissionReview of `kubectl label node n1 pool-`, as the API server sends it.
fn label_removed_review() -> Vec<u8> {
    let mut object = serde_json::to_value(node("n1", &[], &[])).unwrap();
    object["metadata"]["uid"] = json!("node-uid");
    let old = serde_json::to_value(node("n1", &[("pool", "a")], &[])).unwrap();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "7f0c1e2d", "kind": {"group": "", "version": "v1", "kind": "Node"},
            "resource": {"group": "", "version": "v1", "resource": "nodes"},
            "requestKind": {"group": "", "version": "v1", "kind": "Node"},
            "name": "n1", "operation": "UPDATE", "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "PatchOptions", "fieldManager": "kubectl-label"}
        }
    }))
    .unwrap()
}

fn reviews(exporter: &Exporter, verdict: &str) -> f64 {
    let metrics = exporter.metrics();
    let counted = samples(&metrics, "misschedule_exporter_admission_reviews_total");
    counted
        .iter()
        .filter(|(labels, _)| labels["resource"] == "nodes" && labels["verdict"] == verdict)
        .map(|(_, v)| v)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_is_answered_from_the_index_and_bad_bodies_get_a_400() {
    let guarded = start("answers", None, &[]).await;
    http::wait_ok(guarded.exporter.port, "/readyz", Duration::from_secs(20));
    let (status, body) = post(guarded.port, &guarded.ca, &label_removed_review());
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": "7f0c1e2d", "allowed": true,
            "warnings": ["misschedule: this change deletes 1 daemon pod: ns/agent on n1 (label_drift pool)"]
        }})
    );
    assert_eq!(reviews(&guarded.exporter, "warned"), 1.0);

    let huge = vec![b' '; 8 * 1024 * 1024];
    let bad: [(&[u8], u16, &str); 6] = [
        (b"", 400, "not an AdmissionReview"),
        (b"{\"apiVersion\":", 400, "not an AdmissionReview"),
        (b"[1,2,3]", 400, "not an AdmissionReview"),
        (
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
            400,
            "only admission.k8s.io/v1",
        ),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#, 400, "has no request"),
        (&huge, 413, ""),
    ];
    for (body, expected, said) in bad {
        let (status, text) = post(guarded.port, &guarded.ca, body);
        assert_eq!(status, expected, "{text}");
        assert!(text.contains(said), "{text}");
    }
    // A review of an object that is no node is let through, saying it was not checked.
    let mut review: Value = serde_json::from_slice(&label_removed_review()).unwrap();
    review["request"]["object"]["spec"] = json!({"taints": "none"});
    let (status, body) = post(guarded.port, &guarded.ca, &serde_json::to_vec(&review).unwrap());
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"]["warnings"][0].as_str().unwrap().contains("not checked"), "{body}");
    assert!(guarded.exporter.ready(), "the exporter outlives every bad body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_caches_sync_every_change_goes_through_unchecked() {
    let guarded = start("unsynced", Some(Fault::StallList), &[]).await;
    assert!(!guarded.exporter.ready());
    let (status, body) = post(guarded.port, &guarded.ca, &label_removed_review());
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    let warning = answer["response"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("misschedule: not checked: the exporter has not synced its caches yet (pods)"),
        "{warning}"
    );
    assert_eq!(reviews(&guarded.exporter, "unsynced"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_webhook_certificate_is_served_without_a_restart() {
    let guarded = start("renewed", None, &["--credentials-reload-seconds", "1"]).await;
    http::wait_ok(guarded.exporter.port, "/readyz", Duration::from_secs(20));
    assert_eq!(post(guarded.port, &guarded.ca, &label_removed_review()).0, 200);
    // cert-manager renews: a new key pair in the same files.
    let old = guarded.dir.path().join("old.crt");
    std::fs::copy(&guarded.ca, &old).unwrap();
    let next = guarded.dir.path().join("next");
    std::fs::create_dir_all(&next).unwrap();
    let (cert, key) = http::self_signed(&next, "webhook");
    std::fs::copy(&key, guarded.dir.path().join("webhook.key")).unwrap();
    std::fs::copy(&cert, guarded.dir.path().join("webhook.crt")).unwrap();
    let started = std::time::Instant::now();
    while post(guarded.port, &cert, &label_removed_review()).0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(10), "the renewed certificate was not served within 10 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(post(guarded.port, &old, &label_removed_review()).0, 0, "the old certificate is gone");
    let metrics = guarded.exporter.metrics();
    let reloaded = samples(&metrics, "misschedule_exporter_credential_reloads_total");
    let webhook = reloaded.iter().find(|(l, _)| l["file"] == "webhook_tls" && l["result"] == "success");
    assert_eq!(webhook.map(|(_, v)| *v), Some(1.0), "{metrics}");
}
