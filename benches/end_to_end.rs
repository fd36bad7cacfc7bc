//! End-to-end cold start: the release exporter binary, started with a kubeconfig, lists a
//! synthetic cluster over loopback HTTP from a small API server in this bench, which
//! streams realistic paginated lists (`limit`/`continue`; full pods with status and
//! container statuses, nodes with images and managedFields) and then holds the watches
//! open. What it costs the exporter to become ready is read from /proc.
//!
//!   cargo bench --bench end_to_end -- --nodes 5000 --daemonsets 40
//!   cargo bench --bench end_to_end -- --smoke      small; checks the exporter's answer
//!   either, with --apiserver-compression: the exporter asks for gzip, and this server
//!   gzips as kube-apiserver does (responses over 128 KiB, at level 1)
//!   either, with --stream-lists: this server streams lists as 1.34 and later do
//!   (`sendInitialEvents`: one ADDED line per object, then the initial-events-end
//!   bookmark); without it, it refuses them as 1.33 does and the exporter lists in pages
//!
//! Pages are generated as they are asked for and never held whole, so the largest
//! cluster (65,000 nodes × 40 DaemonSets, about 8 GB of JSON) needs no more memory here
//! than one page.

// The test kit's synthetic cluster, and its exporter process (with the HTTP client it uses).
#[allow(dead_code)]
#[path = "../tests/support/exporter.rs"]
mod exporter;
#[allow(dead_code)]
#[path = "../tests/support/http.rs"]
mod http;
#[path = "../tests/support/process.rs"]
mod process;
#[path = "../tests/support/synth.rs"]
mod synth;

use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::write::GzEncoder;
use misschedule_exporter::http::negotiate;
use serde::Deserialize;
use serde_json::json;
use synth::Shape;

/// The resourceVersion every list is at; the watches that resume from it stay silent.
const RESOURCE_VERSION: &str = "1000";

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<usize>,
    #[serde(rename = "continue")]
    continue_from: Option<String>,
    watch: Option<String>,
    #[serde(rename = "sendInitialEvents")]
    send_initial_events: Option<String>,
}

struct Server {
    shape: Shape,
    /// Serve streaming lists (else refuse them with 422, as 1.33 does).
    streams: bool,
    /// JSON bytes served in list pages, before any compression.
    served: AtomicU64,
    /// Of those, by kind (in `Kind::ALL`'s order): what the decode floors are scaled by.
    served_by_kind: [AtomicU64; 4],
    /// Bytes of those pages on the wire.
    sent: AtomicU64,
}

/// kube-apiserver gzips a response over 128 KiB, at level 1, when the client accepts gzip
/// (`responsewriters`: `defaultGzipThresholdBytes`, `defaultGzipContentEncodingLevel`).
const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// The kinds this API server lists: how many there are, and the JSON of the n-th.
#[derive(Clone, Copy)]
enum Kind {
    Nodes,
    DaemonSets,
    Revisions,
    Pods,
}

impl Kind {
    const ALL: [Self; 4] = [Self::Nodes, Self::DaemonSets, Self::Revisions, Self::Pods];

    fn of(path: &str) -> Option<Self> {
        match path {
            "/api/v1/nodes" => Some(Self::Nodes),
            "/apis/apps/v1/daemonsets" => Some(Self::DaemonSets),
            "/apis/apps/v1/controllerrevisions" => Some(Self::Revisions),
            "/api/v1/pods" => Some(Self::Pods),
            _ => None,
        }
    }

    fn list_kind(self) -> (&'static str, &'static str) {
        match self {
            Self::Nodes => ("v1", "NodeList"),
            Self::DaemonSets => ("apps/v1", "DaemonSetList"),
            Self::Revisions => ("apps/v1", "ControllerRevisionList"),
            Self::Pods => ("v1", "PodList"),
        }
    }

    fn count(self, shape: &Shape) -> usize {
        match self {
            Self::Nodes => shape.nodes,
            Self::DaemonSets => shape.daemonsets,
            Self::Revisions => 2 * shape.daemonsets,
            Self::Pods => shape.pods(),
        }
    }

    fn item(self, shape: &Shape, n: usize) -> Vec<u8> {
        let json = match self {
            Self::Nodes => {
                let mut node = serde_json::to_value(shape.node(n)).unwrap_or_default();
                // What a kubelet reports: the images on the node, each with its digests.
                node["status"]["images"] = (0..12)
                    .map(|k| {
                        json!({"names": [format!("registry.example/image-{k}@sha256:{:064x}", n * 31 + k),
                                         format!("registry.example/image-{k}:1.{k}.{}", n % 7)],
                               "sizeBytes": 10_000_000 + k * 1_234_567})
                    })
                    .collect();
                node
            }
            Self::DaemonSets => serde_json::to_value(shape.daemonset(n)).unwrap_or_default(),
            Self::Revisions => serde_json::to_value(shape.revision(n / 2, 1 + n % 2)).unwrap_or_default(),
            Self::Pods => {
                let (nodes, j, i) = (shape.nodes, n / shape.nodes, n % shape.nodes);
                debug_assert!(i < nodes);
                serde_json::to_value(shape.pod(j, i, 1)).unwrap_or_default()
            }
        };
        serde_json::to_vec(&json).unwrap_or_default()
    }
}

/// A streaming list: every object as an ADDED line, built 500 at a time off the runtime's
/// threads, then the bookmark that ends them, then silence (the exporter then watches
/// from that bookmark's resourceVersion, which stays silent too). `gzip`: each piece sent
/// is a gzip member of its own, as 1.37 flushes a gzipped watch.
fn streamed_list(server: Arc<Server>, kind: Kind, gzip: bool) -> Response {
    let (lines, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let (total, shape) = (kind.count(&server.shape), server.shape);
        for start in (0..total).step_by(500) {
            let end = (start + 500).min(total);
            let (chunk, raw_len) = tokio::task::spawn_blocking(move || {
                let mut chunk = Vec::new();
                for n in start..end {
                    chunk.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
                    chunk.extend(kind.item(&shape, n));
                    chunk.extend_from_slice(b"}\n");
                }
                let raw_len = chunk.len();
                (if gzip { gzip_member(&chunk) } else { chunk }, raw_len)
            })
            .await
            .unwrap_or_default();
            server.count_served(kind, raw_len);
            server.sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if lines.send(Ok(Bytes::from(chunk))).await.is_err() {
                return;
            }
        }
        let (api_version, list_kind) = kind.list_kind();
        let object_kind = list_kind.trim_end_matches("List");
        let end = format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{object_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{RESOURCE_VERSION}\",\"annotations\":{{\"k8s.io/initial-events-end\":\"true\"}}}}}}}}\n"
        );
        let end = if gzip { gzip_member(end.as_bytes()) } else { end.into_bytes() };
        if lines.send(Ok(Bytes::from(end))).await.is_ok() {
            std::future::pending::<()>().await;
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|line| (line, rx)) });
    let mut response = Body::from_stream(body).into_response();
    if gzip {
        response.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// `bytes` as one gzip member, at kube-apiserver's level 1.
fn gzip_member(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 8), Compression::new(1));
    encoder.write_all(bytes).expect("gzip into memory");
    encoder.finish().expect("gzip into memory")
}

/// The list page of objects `range`, as this server serves it.
fn list_page(kind: Kind, shape: &Shape, range: std::ops::Range<usize>) -> Vec<u8> {
    let (api_version, list_kind) = kind.list_kind();
    let total = kind.count(shape);
    let continue_token = if range.end < total { format!(",\"continue\":\"{}\"", range.end) } else { String::new() };
    let mut page = format!(
        "{{\"apiVersion\":\"{api_version}\",\"kind\":\"{list_kind}\",\"metadata\":{{\"resourceVersion\":\"{RESOURCE_VERSION}\"{continue_token}}},\"items\":["
    )
    .into_bytes();
    for n in range.clone() {
        if n > range.start {
            page.push(b',');
        }
        page.extend(kind.item(shape, n));
    }
    page.extend_from_slice(b"]}");
    page
}

/// One page of a list, or a watch that stays open and silent.
async fn api(
    State(server): State<Arc<Server>>,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if uri.path() == "/version" {
        let version = json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "bench",
                             "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
                             "compiler": "gc", "platform": "linux/amd64"});
        return ([("content-type", "application/json")], version.to_string()).into_response();
    }
    let Some(kind) = Kind::of(uri.path()) else {
        return (StatusCode::NOT_FOUND, format!("no such resource: {}", uri.path())).into_response();
    };
    // Read as the exporter's own /metrics reads a scraper's header.
    let accepts_gzip = negotiate::gzip(headers.get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok()));
    if query.send_initial_events.as_deref() == Some("true") && server.streams {
        return streamed_list(server, kind, accepts_gzip);
    }
    if query.send_initial_events.as_deref() == Some("true") {
        // As a 1.33 API server without the WatchList feature: the exporter lists in pages.
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
                            "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"});
        return (StatusCode::UNPROCESSABLE_ENTITY, [("content-type", "application/json")], status.to_string())
            .into_response();
    }
    if query.watch.as_deref().is_some_and(|w| w == "true" || w == "1") {
        let silence = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        return Body::from_stream(silence).into_response();
    }
    let total = kind.count(&server.shape);
    let start = query.continue_from.and_then(|c| c.parse().ok()).unwrap_or(0usize).min(total);
    let end = query.limit.filter(|&l| l > 0).map_or(total, |l| (start + l).min(total));
    let shape = server.shape;
    // Generating (and compressing) a page is CPU work: off the runtime's threads.
    let (page, raw_len, gzipped) = tokio::task::spawn_blocking(move || {
        let page = list_page(kind, &shape, start..end);
        let raw_len = page.len();
        if accepts_gzip && raw_len > GZIP_THRESHOLD_BYTES {
            let mut encoder = GzEncoder::new(Vec::with_capacity(raw_len / 8), Compression::new(1));
            if encoder.write_all(&page).is_ok()
                && let Ok(gzipped) = encoder.finish()
            {
                return (gzipped, raw_len, true);
            }
        }
        (page, raw_len, false)
    })
    .await
    .unwrap_or_default();
    server.count_served(kind, raw_len);
    server.sent.fetch_add(page.len() as u64, Ordering::Relaxed);
    let mut response = ([(header::CONTENT_TYPE, "application/json")], page).into_response();
    if gzipped {
        response.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

impl Server {
    fn count_served(&self, kind: Kind, bytes: usize) {
        self.served.fetch_add(bytes as u64, Ordering::Relaxed);
        self.served_by_kind[kind as usize].fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Pages of each kind to time the decode floors on: up to four of 500 objects, spread
/// over the list, so that every part of the synthetic cluster is in the sample.
fn sample_pages(shape: &Shape, kind: Kind) -> Vec<Vec<u8>> {
    let total = kind.count(shape);
    let starts: Vec<usize> = (0..4).map(|i| i * total / 4).collect();
    let mut starts = starts.into_iter().map(|s| s - s % 500).collect::<Vec<_>>();
    starts.dedup();
    starts.into_iter().map(|start| list_page(kind, shape, start..(start + 500).min(total))).collect()
}

/// Seconds per byte, the best of five passes over `pages`.
fn best_of_five(pages: &[Vec<u8>], decode: impl Fn(&[u8])) -> f64 {
    let bytes: usize = pages.iter().map(Vec::len).sum();
    let best = (0..5)
        .map(|_| {
            let start = Instant::now();
            pages.iter().for_each(|page| decode(page));
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    best / bytes.max(1) as f64
}

/// What decoding the bytes this run served would cost, at the rates measured on samples
/// of them: `serde_json` into `IgnoredAny` (a tokenizer's floor) and CPython's `json.loads`
/// (the yardstick #41 sets). `None` for CPython where there is no python3.
fn decode_floors(server: &Server, dir: &std::path::Path) -> (f64, Option<f64>) {
    let python = "import json, sys, time\n\
        for path in sys.argv[1:]:\n\
        \x20   pages = [open(p, 'rb').read() for p in path.split(',')]\n\
        \x20   best = float('inf')\n\
        \x20   for _ in range(5):\n\
        \x20       start = time.perf_counter()\n\
        \x20       for page in pages: json.loads(page)\n\
        \x20       best = min(best, time.perf_counter() - start)\n\
        \x20   print(best / sum(len(p) for p in pages))\n";
    let (mut floor, mut files) = (0.0, Vec::new());
    let served = |kind: Kind| server.served_by_kind[kind as usize].load(Ordering::Relaxed) as f64;
    for kind in Kind::ALL {
        let pages = sample_pages(&server.shape, kind);
        floor += served(kind)
            * best_of_five(&pages, |page| {
                let _: Option<serde::de::IgnoredAny> = serde_json::from_slice(page).ok();
            });
        let paths: Vec<String> = pages
            .iter()
            .enumerate()
            .map(|(i, page)| {
                let path = dir.join(format!("sample-{}-{i}.json", kind as usize));
                std::fs::write(&path, page).expect("write a sample page");
                path.display().to_string()
            })
            .collect();
        files.push(paths.join(","));
    }
    let output = std::process::Command::new("python3").arg("-c").arg(python).args(&files).output().ok();
    let rates: Option<Vec<f64>> = output
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect());
    let cpython = rates
        .filter(|rates| rates.len() == Kind::ALL.len())
        .map(|rates| Kind::ALL.iter().zip(rates).map(|(&kind, rate)| served(kind) * rate).sum());
    (floor, cpython)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse().ok());
    let smoke = args.iter().any(|a| a == "--smoke");
    let shape = Shape {
        nodes: value("--nodes").unwrap_or(if smoke { 200 } else { 5_000 }),
        daemonsets: value("--daemonsets").unwrap_or(if smoke { 8 } else { 40 }),
        draining_percent: 1,
    };
    let streams = args.iter().any(|a| a == "--stream-lists");
    let server = Arc::new(Server {
        shape,
        streams,
        served: AtomicU64::new(0),
        served_by_kind: Default::default(),
        sent: AtomicU64::new(0),
    });

    // The API server, on its own runtime thread; pages are built on its blocking pool.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
    let address: SocketAddr = listener.local_addr().expect("its address");
    let router = axum::Router::new().fallback(api).with_state(server.clone());
    runtime.spawn(async move { axum::serve(listener, router).await });

    let dir = std::env::temp_dir().join(format!("misschedule-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: bench\n\
             clusters: [{{name: bench, cluster: {{server: \"http://{address}\"}}}}]\n\
             users: [{{name: bench, user: {{}}}}]\n\
             contexts: [{{name: bench, context: {{cluster: bench, user: bench}}}}]\n"
        ),
    )
    .expect("write the kubeconfig");

    let started = Instant::now();
    let kubeconfig = kubeconfig.to_str().expect("a UTF-8 temporary path");
    let compression = args.iter().any(|a| a == "--apiserver-compression");
    let mut exporter_args = vec!["--kubeconfig", kubeconfig];
    if compression {
        exporter_args.push("--apiserver-compression");
    }
    let exporter = exporter::Exporter::spawn(&exporter_args, Stdio::inherit());
    let pid = exporter.child.id();
    http::wait_ok(exporter.port, "/readyz", Duration::from_secs(1800));
    let wall = started.elapsed();
    let (cpu, rss_synced) = (process::cpu_seconds(pid), mib(process::rss_kib(pid)));
    // The high-water mark so far: the initial sync's peak.
    let rss_peak = mib(process::peak_rss_kib(pid));
    std::thread::sleep(Duration::from_secs(3));
    let rss_idle = mib(process::rss_kib(pid));
    let served = server.served.load(Ordering::Relaxed);
    let sent = server.sent.load(Ordering::Relaxed);

    // The answer must be right before its cost means anything.
    let metrics = exporter.metrics();
    let misscheduled =
        metrics.lines().filter(|l| l.starts_with("daemonset_misscheduled_pod_info{") && l.ends_with(" 1")).count();
    assert_eq!(misscheduled, shape.expected_misscheduled_pods(), "the exporter's answer is wrong");
    // Stopped before the samples are timed, so that nothing of it runs beside them: CPython's
    // sampled time swung from 3.5 to 6.4 s at 5k within one bench run, and alone held within 6%.
    drop(exporter);
    let (floor, cpython) = decode_floors(&server, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    // The exporter asks for gzip only when told to; this server then compresses every page
    // over the threshold, and every piece of a streamed list, as kube-apiserver does.
    if compression {
        assert!(sent < served, "--apiserver-compression: the exporter did not ask for gzip");
    } else {
        assert_eq!(sent, served, "the exporter asked for gzip without --apiserver-compression");
    }

    let gb = served as f64 / 1e9;
    println!(
        "End to end: {} nodes × {} DaemonSets = {} pods, {misscheduled} misscheduled; {:.2} GB of list JSON {}, {:.2} GB on the wire\n",
        shape.nodes,
        shape.daemonsets,
        shape.pods(),
        gb,
        if streams {
            "streamed (`sendInitialEvents`), one object a line, 500 a gzip member if gzipped"
        } else {
            "in pages of 500"
        },
        sent as f64 / 1e9
    );
    println!("| measure | result |\n|---|---|");
    let asked = if compression { "yes (`--apiserver-compression`)" } else { "no (the default)" };
    println!(
        "| exporter asks for gzip; this server then gzips pages over 128 KiB, and streams, at level 1 | {asked} |"
    );
    println!("| exporter CPU to ready (user + system, /proc) | {cpu:.2} s |");
    println!(
        "| wall time to ready (this server builds the pages on one core meanwhile) | {:.2} s |",
        wall.as_secs_f64()
    );
    println!("| list JSON read per exporter CPU second | {:.0} MB/s |", served as f64 / 1e6 / cpu.max(0.01));
    println!("| exporter RSS when ready / 3 s later | {rss_synced:.1} MiB / {rss_idle:.1} MiB |");
    println!(
        "| exporter peak RSS during the initial sync (VmHWM) / 3 s later | {rss_peak:.1} MiB / {rss_idle:.1} MiB = {:.2}× (target ≤ 1.25×) |",
        rss_peak / rss_idle.max(0.1)
    );
    println!(
        "| floor: `serde_json` into `IgnoredAny` over the same bytes (sampled, same run) | {floor:.2} s; exporter = {:.1}× |",
        cpu / floor.max(1e-6)
    );
    match cpython {
        Some(cpython) => println!(
            "| CPython `json.loads` over the same bytes (sampled, same run) | {cpython:.2} s; exporter = {:.2}× (target ≤ 0.2×) |",
            cpu / cpython.max(1e-6)
        ),
        None => println!("| CPython `json.loads` over the same bytes | not measured: no python3 on PATH |"),
    }
    if smoke {
        println!("\nsmoke run: the answer checked, no targets at this size");
    }
}
