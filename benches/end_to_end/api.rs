//! The bench's API server: realistic list pages made as they are asked for, paged or
//! streamed, gzipped where kube-apiserver would, and watches held open and silent.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::synth::Shape;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::StreamExt;
use misschedule_exporter::http::negotiate;
use serde::Deserialize;
use serde_json::json;

/// The resourceVersion every list is at; the watches that resume from it stay silent.
pub(crate) const RESOURCE_VERSION: &str = "1000";

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    limit: Option<usize>,
    #[serde(rename = "continue")]
    continue_from: Option<String>,
    watch: Option<String>,
    #[serde(rename = "sendInitialEvents")]
    send_initial_events: Option<String>,
}

pub(crate) struct Server {
    pub(crate) shape: Shape,
    /// Serve streaming lists (else refuse them with 422, as 1.33 does).
    pub(crate) streams: bool,
    /// JSON bytes served in list pages, before any compression.
    pub(crate) served: AtomicU64,
    /// Of those, by kind (in `Kind::ALL`'s order): what the decode floors are scaled by.
    pub(crate) served_by_kind: [AtomicU64; 4],
    /// Bytes of those pages on the wire.
    pub(crate) sent: AtomicU64,
}

/// kube-apiserver gzips a response over 128 KiB, at level 1, when the client accepts gzip
/// (`responsewriters`: `defaultGzipThresholdBytes`, `defaultGzipContentEncodingLevel`).
const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// The kinds this API server lists: how many there are, and the JSON of the n-th.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Nodes,
    DaemonSets,
    Revisions,
    Pods,
}

impl Kind {
    pub(crate) const ALL: [Self; 4] = [Self::Nodes, Self::DaemonSets, Self::Revisions, Self::Pods];

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

    pub(crate) fn count(self, shape: &Shape) -> usize {
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

/// How often a held watch gets a bookmark, as a 1.37 API server's watch cache sends one to
/// each watcher that asked about once a minute. Without them the exporter, rightly, took the
/// largest runs' watches of nodes and DaemonSets for stalled while the pods were still
/// being listed, and was not ready when they were.
const BOOKMARK_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// A bookmark line of `kind`'s list at this server's one resourceVersion, annotated as the
/// end of the initial events or not.
fn bookmark(kind: Kind, initial_events_end: bool) -> String {
    let (api_version, list_kind) = kind.list_kind();
    let object_kind = list_kind.trim_end_matches("List");
    let annotations = if initial_events_end { r#"{"k8s.io/initial-events-end":"true"}"# } else { "{}" };
    format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{object_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{RESOURCE_VERSION}\",\"annotations\":{annotations}}}}}}}\n"
    )
}

/// A held watch's lines from now on: a plain bookmark every [`BOOKMARK_EVERY`], and nothing else.
fn bookmarks(kind: Kind, gzip: bool) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(BOOKMARK_EVERY).await;
        let line = bookmark(kind, false);
        Some((Ok(Bytes::from(if gzip { gzip_member(line.as_bytes()) } else { line.into_bytes() })), ()))
    })
}

/// A streaming list: every object as an ADDED line, built 500 at a time off the runtime's
/// threads, then the bookmark that ends them, then a bookmark a minute (the exporter then
/// watches from that bookmark's resourceVersion, which has only those too). `gzip`: each
/// piece sent is a gzip member of its own, as 1.37 flushes a gzipped watch.
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
        let end = bookmark(kind, true);
        let end = if gzip { gzip_member(end.as_bytes()) } else { end.into_bytes() };
        if lines.send(Ok(Bytes::from(end))).await.is_err() {
            return;
        }
        let mut held = std::pin::pin!(bookmarks(kind, gzip));
        while let Some(line) = held.next().await {
            if lines.send(line).await.is_err() {
                return;
            }
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
pub(crate) fn list_page(kind: Kind, shape: &Shape, range: std::ops::Range<usize>) -> Vec<u8> {
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
pub(crate) async fn api(
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
        return Body::from_stream(bookmarks(kind, false)).into_response();
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
