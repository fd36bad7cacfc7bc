//! The HTTP edge of the real binary: TLS with certificate rotation, authentication,
//! request limits, slow clients, and scrapes that finish across a SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::http;

/// An exporter on a snapshot, killed on drop.
struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(snapshot: &Path, extra: &[&str]) -> Self {
        let port = http::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
            .arg("--snapshot")
            .arg(snapshot)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start exporter");
        let mut exporter = Self { child, port };
        // The port opens once the snapshot is loaded; TCP, because the server may speak TLS.
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = exporter.child.try_wait().unwrap() {
                panic!("exporter exited with {status}");
            }
            assert!(started.elapsed() < Duration::from_secs(60), "exporter never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        exporter
    }

    fn terminate(&self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster-autoscaler-drain.json")
}

/// A directory of its own for the test `name`, removed when the value drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("misschedule-server-{name}-")).tempdir().unwrap()
}

/// Send raw bytes, read until the server closes (or 10 s pass); the response text.
fn raw_exchange(port: u16, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

fn status_of(response: &str) -> Option<u16> {
    response.split(' ').nth(1)?.parse().ok()
}

fn get_with(port: u16, path: &str, authorization: Option<&str>) -> String {
    let header = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    raw_exchange(port, format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{header}\r\n").as_bytes())
}

/// HTTPS GET with curl, trusting only `ca`: (status, body), or None if TLS failed.
fn https_get(port: u16, path: &str, ca: &Path) -> Option<(u16, String)> {
    let out = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}", "--max-time", "5", "--cacert"])
        .arg(ca)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n')?;
    out.status.success().then(|| Some((status.parse().ok()?, body.to_owned()))).flatten()
}

fn curl(port: u16, path: &str, ca: &Path) -> Option<u16> {
    https_get(port, path, ca).map(|(status, _)| status)
}

/// Point `dir/..data` at `dir/version` the way kubelet updates a Secret volume: one
/// atomic rename of a symlink, so cert and key always change together.
fn publish_secret(dir: &Path, version: &str) {
    let staged = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&staged);
    std::os::unix::fs::symlink(version, &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
}

fn counter(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

fn scrape_https(port: u16, ca: &Path) -> String {
    let (status, body) = https_get(port, "/metrics", ca).expect("HTTPS scrape");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn tls_serves_https_and_picks_up_a_rotated_certificate() {
    let temp = temp_dir("tls");
    let dir = temp.path();
    for version in ["v1", "v2", "v3"] {
        let versioned = dir.join(version);
        std::fs::create_dir_all(&versioned).unwrap();
        let (cert, key) = http::self_signed(&versioned, version);
        std::fs::rename(cert, versioned.join("tls.crt")).unwrap();
        std::fs::rename(key, versioned.join("tls.key")).unwrap();
    }
    std::fs::write(dir.join("v3/tls.crt"), "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    publish_secret(dir, "v1");
    for file in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
    }
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let exporter = Exporter::start(
        &example(),
        &[
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
            "--credentials-reload-seconds",
            "1",
        ],
    );
    let port = exporter.port;
    let (v1, v2) = (dir.join("v1/tls.crt"), dir.join("v2/tls.crt"));

    assert_eq!(curl(port, "/metrics", &v1), Some(200));
    assert_eq!(curl(port, "/readyz", &v1), Some(200));
    assert_eq!(curl(port, "/metrics", &v2), None, "a certificate nobody issued must not verify");
    assert_eq!(http::get(port, "/metrics"), None, "plain HTTP gets no answer on a TLS port");

    publish_secret(dir, "v2");
    let started = Instant::now();
    while curl(port, "/metrics", &v2) != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(10), "rotated certificate not served within 10s");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(curl(port, "/metrics", &v1), None, "the old certificate is gone");
    let metrics = scrape_https(port, &v2);
    assert_eq!(
        counter(&metrics, r#"misschedule_exporter_credential_reloads_total{file="tls",result="success"}"#),
        Some(1.0)
    );
    assert_eq!(
        counter(&metrics, r#"misschedule_exporter_credential_reloads_total{file="tls",result="failure"}"#),
        Some(0.0)
    );

    // A broken rotation is refused and counted; the working certificate stays.
    publish_secret(dir, "v3");
    let started = Instant::now();
    loop {
        let metrics = scrape_https(port, &v2);
        let failures = r#"misschedule_exporter_credential_reloads_total{file="tls",result="failure"}"#;
        if counter(&metrics, failures) == Some(1.0) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "broken certificate not noticed within 10s");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(curl(port, "/metrics", &v2), Some(200));
    let metrics = scrape_https(port, &v2);
    assert_eq!(counter(&metrics, r#"misschedule_exporter_credential_reload_failing{file="tls"}"#), Some(1.0));

    // Fixed again: the certificate is picked up and the gauge clears.
    publish_secret(dir, "v1");
    let started = Instant::now();
    while curl(port, "/metrics", &v1) != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(10), "the fixed certificate was not picked up within 10s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let metrics = scrape_https(port, &v1);
    assert_eq!(counter(&metrics, r#"misschedule_exporter_credential_reload_failing{file="tls"}"#), Some(0.0));
}

#[test]
fn unusable_tls_files_are_configuration_errors() {
    let temp = temp_dir("tls-bad");
    let dir = temp.path();
    let (cert_a, _) = http::self_signed(dir, "a");
    let (_, key_b) = http::self_signed(dir, "b");
    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .arg("--snapshot")
        .arg(example())
        .arg("--tls-cert-file")
        .arg(&cert_a)
        .arg("--tls-key-file")
        .arg(&key_b)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("a.crt") && stderr.contains("b.key") && stderr.contains("not a usable key pair"),
        "{stderr}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .arg("--snapshot")
        .arg(example())
        .arg("--tls-cert-file")
        .arg(&cert_a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a certificate without a key is a usage error");
}

#[test]
fn authentication_guards_metrics_and_explain_but_not_the_probes() {
    let temp = temp_dir("auth");
    let dir = temp.path();
    let token = dir.join("token");
    let password = dir.join("password");
    std::fs::write(&token, "t0ken\n").unwrap();
    std::fs::write(&password, "hunter2").unwrap();
    let exporter = Exporter::start(
        &example(),
        &[
            "--auth-bearer-token-file",
            token.to_str().unwrap(),
            "--auth-basic-user",
            "prometheus",
            "--auth-basic-password-file",
            password.to_str().unwrap(),
            "--credentials-reload-seconds",
            "1",
        ],
    );
    let port = exporter.port;

    let refused = get_with(port, "/metrics", None);
    assert_eq!(status_of(&refused), Some(401), "{refused}");
    let lower = refused.to_ascii_lowercase();
    assert!(lower.contains("www-authenticate: bearer") && lower.contains("www-authenticate: basic"), "{refused}");
    assert!(!refused.contains("daemonset_"), "a refused request leaks no metrics");
    assert_eq!(status_of(&get_with(port, "/metrics", Some("Bearer wrong"))), Some(401));
    assert_eq!(status_of(&get_with(port, "/metrics", Some("Bearer t0ken"))), Some(200));
    // "prometheus:hunter2"
    assert_eq!(status_of(&get_with(port, "/metrics", Some("Basic cHJvbWV0aGV1czpodW50ZXIy"))), Some(200));
    assert_eq!(status_of(&get_with(port, "/metrics", Some("Basic cHJvbWV0aGV1czp3cm9uZw=="))), Some(401));
    assert_eq!(status_of(&get_with(port, "/healthz", None)), Some(200));
    assert_eq!(status_of(&get_with(port, "/readyz", None)), Some(200));
    // The explanation reveals what /metrics does, so it is guarded the same way.
    for path in ["/explain", "/", "/?namespace=kube-system"] {
        let refused = get_with(port, path, None);
        assert_eq!(status_of(&refused), Some(401), "{path}: {refused}");
        assert!(!refused.contains("datadog"), "{path} leaks nothing when refused");
        assert_eq!(status_of(&get_with(port, path, Some("Bearer t0ken"))), Some(200), "{path}");
    }

    // Rotating the token file takes effect without a restart.
    std::fs::write(&token, "n3w").unwrap();
    let started = Instant::now();
    while status_of(&get_with(port, "/metrics", Some("Bearer n3w"))) != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(10), "rotated token not accepted within 10s");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status_of(&get_with(port, "/metrics", Some("Bearer t0ken"))), Some(401));
}

#[test]
fn requests_are_bounded_in_size_and_time() {
    let exporter = Exporter::start(&example(), &[]);
    let port = exporter.port;

    let big_body = raw_exchange(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n");
    assert_eq!(status_of(&big_body), Some(413), "{big_body}");

    let big_header = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\n\r\n", "a".repeat(64 * 1024));
    let response = raw_exchange(port, big_header.as_bytes());
    assert_eq!(status_of(&response), Some(431), "{response}");

    // A client that never finishes its request head is cut off, not waited for.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(10),
        "slow client closed after {waited:?}, expected about the 5s header timeout"
    );
    assert!(!String::from_utf8_lossy(&rest).contains("daemonset_"));

    // Meanwhile the server answered everyone else.
    assert_eq!(http::get(port, "/healthz").map(|(s, _)| s), Some(200));
}

/// A snapshot with `nodes` nodes, each running a pod of a DaemonSet whose nodeSelector
/// matches none of them: one `daemonset_misscheduled_pod` series per node.
fn large_snapshot(path: &Path, nodes: usize) {
    let ds = support::daemonset("agent", serde_json::json!({"nodeSelector": {"pool": "gpu"}, "containers": []}));
    let mut items =
        vec![serde_json::to_value(&ds).unwrap(), serde_json::to_value(support::revision(&ds, "h1")).unwrap()];
    for n in 0..nodes {
        let name = format!("node-{n:06}-with-a-realistic-length-name.eu-west-1.compute.internal");
        items.push(serde_json::to_value(support::node(&name, &[("pool", "cpu")], &[])).unwrap());
        items.push(serde_json::to_value(support::daemon_pod(&ds, &name, "h1", true)).unwrap());
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, serde_json::to_vec(&list).unwrap()).unwrap();
}

/// The length the response head announces, and where its body starts.
fn content_length(response: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(response);
    let body_start = text.find("\r\n\r\n").expect("a complete response head") + 4;
    let length = text[..body_start]
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .expect("content-length");
    (length, body_start)
}

/// (head, body) of `GET /metrics` with `headers`, the body as bytes (it may be gzip).
fn scrape_with(port: u16, headers: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let (length, body_start) = content_length(&response);
    let head = String::from_utf8_lossy(&response[..body_start]).to_ascii_lowercase();
    assert_eq!(response.len() - body_start, length, "the body is as long as announced");
    (head, response[body_start..].to_vec())
}

fn gunzip(body: &[u8]) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(body).read_to_string(&mut text).expect("a valid gzip body");
    text
}

/// The series of the classification: they do not change between scrapes, unlike the self-metrics.
fn classification(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("daemonset_")).collect()
}

#[test]
fn scrapes_get_the_format_and_encoding_they_ask_for() {
    let exporter = Exporter::start(&example(), &[]);
    let port = exporter.port;

    // curl and older scrapers: the 0.0.4 text format.
    let (head, body) = scrape_with(port, "");
    let text = String::from_utf8(body).expect("plain text");
    assert!(head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    assert!(head.contains("vary: accept, accept-encoding"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(text.contains("# TYPE misschedule_exporter_watch_events_total counter\n"), "{text}");
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");

    // Prometheus: OpenMetrics.
    let accept = format!("Accept: {}\r\n", http::PROMETHEUS_ACCEPT);
    let (head, body) = scrape_with(port, &accept);
    let openmetrics = String::from_utf8(body).expect("plain text");
    assert!(head.contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"), "{head}");
    assert!(openmetrics.contains("# TYPE misschedule_exporter_watch_events counter\n"), "{openmetrics}");
    assert!(openmetrics.ends_with("# EOF\n"));
    assert!(!classification(&openmetrics).is_empty());
    assert_eq!(classification(&openmetrics), classification(&text));

    // Either format gzip-compressed, several times from the same cached generation.
    for (format, plain) in [(accept.as_str(), &openmetrics), ("", &text)] {
        for _ in 0..3 {
            let (head, body) = scrape_with(port, &format!("{format}Accept-Encoding: gzip\r\n"));
            assert!(head.contains("content-encoding: gzip"), "{head}");
            let unzipped = gunzip(&body);
            assert_eq!(classification(&unzipped), classification(plain));
            assert_eq!(unzipped.ends_with("# EOF\n"), plain.ends_with("# EOF\n"));
            assert!(body.len() * 2 < plain.len(), "{} compressed bytes for {}", body.len(), plain.len());
        }
    }
    let (head, _) = scrape_with(port, "Accept-Encoding: gzip;q=0, br\r\n");
    assert!(!head.contains("content-encoding"), "{head}");
}

#[test]
fn a_client_that_stops_reading_is_cut_off() {
    let temp = temp_dir("stall");
    let dir = temp.path();
    let snapshot = dir.join("large.json");
    large_snapshot(&snapshot, 20_000);
    let exporter = Exporter::start(&snapshot, &[]);
    let port = exporter.port;

    // Ask for a scrape far larger than the socket buffers, then read nothing for longer
    // than the server waits on a full socket.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_secs(13));
    assert_eq!(http::get(port, "/healthz").map(|(s, _)| s), Some(200), "others are served meanwhile");

    // What the buffers held still arrives; then the connection ends, short of the body.
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut received = Vec::new();
    let _ = stalled.read_to_end(&mut received);
    let (length, body_start) = content_length(&received);
    assert!(length > 8 << 20, "the scrape ({length} bytes) must outsize the socket buffers");
    let body = received.len() - body_start;
    assert!(body < length, "the stalled response was not cut off: {body} of {length} bytes arrived");
}

#[test]
fn sigterm_lets_an_in_flight_scrape_finish() {
    let temp = temp_dir("shutdown");
    let dir = temp.path();
    let snapshot = dir.join("large.json");
    large_snapshot(&snapshot, 20_000);
    let exporter = Exporter::start(&snapshot, &[]);
    let port = exporter.port;

    // Start a scrape far larger than the socket buffers, and read only its first bytes.
    let mut scrape = TcpStream::connect(("127.0.0.1", port)).unwrap();
    scrape.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: {}\r\n\r\n", http::PROMETHEUS_ACCEPT);
    scrape.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 4096];
    let read = scrape.read(&mut head).unwrap();
    let (content_length, body_start) = content_length(&head[..read]);
    let head = String::from_utf8_lossy(&head[..read]).into_owned();
    assert_eq!(status_of(&head), Some(200), "{head}");
    assert!(content_length > 8 << 20, "the scrape ({content_length} bytes) must outsize the socket buffers");

    exporter.terminate();
    let signalled = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "no new connections after SIGTERM");

    let mut rest = Vec::new();
    scrape.read_to_end(&mut rest).expect("the in-flight scrape completes");
    assert_eq!(read - body_start + rest.len(), content_length, "the whole body arrived");
    assert!(String::from_utf8_lossy(&rest).ends_with("# EOF\n"));

    let mut exporter = exporter;
    let status = loop {
        if let Some(status) = exporter.child.try_wait().unwrap() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(5), "did not exit within 5s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
