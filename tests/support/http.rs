//! A minimal HTTP/1.0 client for talking to local test servers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// (status, body), or `None` if nothing answered.
pub fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    exchange(port, method, path, "", body).map(|(status, _head, body)| (status, body))
}

/// What Prometheus sends in `Accept`: OpenMetrics first.
pub const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// (status, body) of `GET /metrics` as Prometheus asks for it (OpenMetrics; uncompressed).
pub fn scrape(port: u16) -> Option<(u16, String)> {
    exchange(port, "GET", "/metrics", &format!("Accept: {PROMETHEUS_ACCEPT}\r\n"), None)
        .map(|(status, _head, body)| (status, body))
}

/// (status, headers, body) of a GET.
pub fn get_with_headers(port: u16, path: &str) -> Option<(u16, String, String)> {
    exchange(port, "GET", path, "", None)
}

/// (status, headers, body) of a GET with `Authorization: {authorization}`.
pub fn get_authorized(port: u16, path: &str, authorization: &str) -> Option<(u16, String, String)> {
    exchange(port, "GET", path, &format!("Authorization: {authorization}\r\n"), None)
}

fn exchange(port: u16, method: &str, path: &str, headers: &str, body: Option<&str>) -> Option<(u16, String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((status, head.to_ascii_lowercase(), body.to_owned()))
}

pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    request(port, "GET", path, None)
}

/// Wait until `path` answers 200, or panic after `timeout`.
pub fn wait_ok(port: u16, path: &str, timeout: Duration) {
    let started = std::time::Instant::now();
    while get(port, path).map(|(s, _)| s) != Some(200) {
        assert!(started.elapsed() < timeout, "127.0.0.1:{port}{path} never answered 200");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A loopback port for a server a test starts, chosen as tests/lab/lab.sh chooses its
/// components' ports: below the kernel's ephemeral range, never twice in one test binary. The
/// port is let go before the server binds it, and one from bind(0) may meanwhile be handed to
/// any connection on the machine or to another test's bind(0).
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    static CHOSEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    const LOWEST: u16 = 10_000;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let mut chosen = CHOSEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Where the ephemeral range starts low, there is no room below it: the kernel chooses.
    let span = ephemeral_start.saturating_sub(LOWEST);
    let port = if span < 1_000 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    } else {
        loop {
            // RandomState is seeded afresh for each instance: a random number without a crate.
            let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
            let port = LOWEST + (random % u64::from(span)) as u16;
            if !chosen.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                break port;
            }
        }
    };
    chosen.push(port);
    port
}

/// A loopback HTTP server that answers every request with `body` (as the Prometheus text
/// format) and keeps each request's path and body: a scrape target holding fixed series, or a
/// webhook receiver for Alertmanager.
pub struct Stub {
    pub port: u16,
    received: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl Stub {
    pub fn serve(body: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, body) = (received.clone(), body.to_owned());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if let Some(request) = read_request(&mut stream) {
                    log.lock().unwrap().push(request);
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { port, received }
    }

    /// (path, body) of every request so far.
    pub fn received(&self) -> Vec<(String, String)> {
        self.received.lock().unwrap().clone()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split(' ').nth(1)?.to_owned();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((path, String::from_utf8_lossy(&buf[head_end..]).into_owned()))
}

/// A self-signed certificate for 127.0.0.1 in `dir`: (cert, key).
pub fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", &format!("/CN={name}"), "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    (cert, key)
}
