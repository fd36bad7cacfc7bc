//! A small fake API server that misbehaves on demand, the way real API servers and the
//! proxies in front of them do: 429/503 with Retry-After, watches held open with nothing
//! sent, responses cut mid-line, 410 ERROR events, malformed lines, watches closed at once.
//! The real API server cannot be made to do any of this on cue. Streaming lists
//! (`sendInitialEvents`) it serves, refuses or ignores, as `Streaming` says.
//!
//! It speaks just enough HTTP/1.1 for kube's client (GET, keep-alive, chunked watches) and
//! serves one consistent cluster: the test changes it and watches see the change. Every
//! request is counted per resource, so a test can prove there is no hot loop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

/// The four resources, by the URL segment kube's client asks for.
pub const RESOURCES: [&str; 4] = ["nodes", "daemonsets", "controllerrevisions", "pods"];

/// What the server does to every request for a resource (or all of them).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer every list and watch with this status, a Status body with
    /// `retryAfterSeconds` and a Retry-After header, as the API server throttles.
    Status { code: u16, retry_after: u32 },
    /// Watches get their headers, then nothing, not even a bookmark, until closed.
    StallWatch,
    /// Watches send half a line, then the connection closes.
    CutWatch,
    /// Lists send half their body, then the connection closes; watches get a 410, so that
    /// a relist is needed.
    CutList,
    /// Lists get no answer at all, the connection held open; watches get a 410, so that a
    /// relist is needed.
    StallList,
    /// Watches get an ERROR event with code 410 at once, and the response ends.
    Gone,
    /// Watches send a line that is not a watch event of the resource.
    Malformed,
    /// Watches close at once, cleanly, with nothing sent.
    EndEarly,
    /// A streamed list sends its first object, then half a line, and the connection closes.
    CutStreamedList,
}

/// What the server does with a watch that asks for its initial events (a streaming list).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Streaming {
    /// As API servers without the WatchList feature: 422, "sendInitialEvents is forbidden".
    #[default]
    Refuse,
    /// As API servers since 1.34: every object as ADDED, then a bookmark annotated
    /// `k8s.io/initial-events-end`, then the watch goes on.
    Serve,
    /// As a server (or a proxy) that does not know the parameter: a plain watch.
    Ignore,
}

/// One request the server answered.
#[derive(Clone, Debug)]
pub struct Seen {
    pub resource: String,
    pub watch: bool,
    /// A list of at most one object that names no resourceVersion: a consistent read, as a
    /// watch's nudge (`watch::nudge`) is.
    pub nudge: bool,
    /// A watch that asked for its initial events: a streaming list.
    pub streamed_list: bool,
    /// Its answer was gzipped (`gzip_watches`, and the client accepted gzip).
    pub gzipped: bool,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    resource_version: u64,
    /// Objects by resource, by namespace/name.
    objects: BTreeMap<&'static str, BTreeMap<String, Value>>,
    /// Every change: (resourceVersion, resource, event type, object).
    history: Vec<(u64, &'static str, &'static str, Value)>,
    faults: BTreeMap<&'static str, Fault>,
    streaming: Streaming,
    /// Gzip watches for clients that accept it, one member per event, as 1.37 does.
    gzip_watches: bool,
    /// Bumped by each new fault: open watches close, as when a proxy or API server restarts.
    epoch: u64,
    seen: Vec<Seen>,
    /// As the API server's watch cache (`bookmark_as_watch_cache`): the version each
    /// resource's cache knows; `None` for the simple rule (every tick, the newest version).
    cache_versions: Option<BTreeMap<&'static str, u64>>,
}

pub struct FakeApi {
    pub port: u16,
    state: Arc<Mutex<State>>,
    changes: broadcast::Sender<()>,
    accept_loop: AbortHandle,
    /// Send a bookmark to every open watch this often (API servers since 1.27: each minute).
    _bookmarks: AbortHandle,
}

fn key(object: &Value) -> String {
    let meta = &object["metadata"];
    format!("{}/{}", meta["namespace"].as_str().unwrap_or(""), meta["name"].as_str().unwrap_or(""))
}

fn resource_of(kind: &str) -> &'static str {
    match kind {
        "Node" => "nodes",
        "DaemonSet" => "daemonsets",
        "ControllerRevision" => "controllerrevisions",
        "Pod" => "pods",
        other => panic!("the fake API server does not serve {other}"),
    }
}

impl FakeApi {
    /// Serve `objects` (any of the four kinds, as JSON), with a bookmark every `bookmark_every`.
    pub async fn start(objects: Vec<Value>, bookmark_every: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (changes, _) = broadcast::channel(1024);
        let state = Arc::new(Mutex::new(State::default()));
        let fake_state = state.clone();
        let accept_loop = tokio::spawn({
            let (state, changes) = (state.clone(), changes.clone());
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, state.clone(), changes.clone()));
                }
            }
        })
        .abort_handle();
        let bookmarks = tokio::spawn({
            let (state, changes) = (state.clone(), changes.clone());
            async move {
                loop {
                    tokio::time::sleep(bookmark_every).await;
                    {
                        // As the watch cache: what else the cluster writes (leases) moves
                        // etcd's revision on, unseen by the four resources' caches.
                        let mut state = state.lock().unwrap();
                        if state.cache_versions.is_some() {
                            state.resource_version += 1;
                        }
                    }
                    // An empty change: every open watch is due a bookmark (`watch_stream`).
                    let _ = changes.send(());
                }
            }
        })
        .abort_handle();
        let fake = Self { port, state: fake_state, changes, accept_loop, _bookmarks: bookmarks };
        for object in objects {
            fake.put(object);
        }
        fake
    }

    /// A kubeconfig for the exporter, written to `path`.
    pub fn kubeconfig(&self, path: &std::path::Path) -> String {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: 'http://127.0.0.1:{}'}}}}]\n\
             users: [{{name: fake, user: {{}}}}]\ncontexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n\
             current-context: fake\n",
            self.port
        );
        std::fs::write(path, text).unwrap();
        path.display().to_string()
    }

    /// Create or replace an object; open watches get the event.
    pub fn put(&self, object: Value) {
        self.put_all([object]);
    }

    /// Create or replace objects at once: open watches get their events together, in order,
    /// as from a burst of writes.
    pub fn put_all(&self, objects: impl IntoIterator<Item = Value>) {
        {
            let mut state = self.state.lock().unwrap();
            for mut object in objects {
                let resource = resource_of(object["kind"].as_str().unwrap_or_default());
                state.resource_version += 1;
                let version = state.resource_version;
                object["metadata"]["resourceVersion"] = json!(version.to_string());
                let existed = state.objects.entry(resource).or_default().insert(key(&object), object.clone()).is_some();
                state.history.push((version, resource, if existed { "MODIFIED" } else { "ADDED" }, object));
                if let Some(versions) = &mut state.cache_versions {
                    versions.insert(resource, version);
                }
            }
        }
        let _ = self.changes.send(());
    }

    /// `resource` (or every resource, for `None`) misbehaves this way until `clear`.
    /// Open watches end (cleanly, at a line boundary), as when a proxy or the API server
    /// in front restarts; the calls that follow meet the fault.
    pub fn fault(&self, resource: Option<&'static str>, fault: Fault) {
        {
            let mut state = self.state.lock().unwrap();
            for r in resource.map_or(RESOURCES.to_vec(), |r| vec![r]) {
                state.faults.insert(r, fault.clone());
            }
            state.epoch += 1;
        }
        let _ = self.changes.send(());
    }

    /// How watches that ask for their initial events are answered from now on.
    pub fn streaming(&self, streaming: Streaming) {
        self.state.lock().unwrap().streaming = streaming;
    }

    /// Bookmark as the API server's watch cache does (apiserver `cacheWatcher.process`): a
    /// watch's bookmark only with a version newer than the watch's, and a resource's cache
    /// learns one only from a write to that resource or from a consistent read of it (a list
    /// without resourceVersion, or a streamed list), which asks etcd for progress; each tick
    /// moves the revision on, as the cluster's other writes do. Off: every tick bookmarks
    /// every watch at the newest version.
    pub fn bookmark_as_watch_cache(&self) {
        let mut state = self.state.lock().unwrap();
        let version = state.resource_version;
        state.cache_versions = Some(RESOURCES.into_iter().map(|r| (r, version)).collect());
        // The cluster writes on meanwhile.
        state.resource_version += 1;
    }

    /// Gzip watches (and streamed lists) for clients that accept gzip, each event a gzip
    /// member of its own, as Kubernetes 1.37 does.
    pub fn gzip_watches(&self, on: bool) {
        self.state.lock().unwrap().gzip_watches = on;
    }

    pub fn clear(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// The requests answered so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Requests answered since `since`.
    pub fn requests_since(&self, since: Instant) -> usize {
        self.seen().iter().filter(|s| s.at >= since).count()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.accept_loop.abort();
        self._bookmarks.abort();
    }
}

/// One connection: requests one after another (kube's client keeps connections alive).
async fn serve(stream: TcpStream, state: Arc<Mutex<State>>, changes: broadcast::Sender<()>) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut accepts_gzip = false;
        loop {
            let mut header = String::new();
            if stream.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            let header = header.to_ascii_lowercase();
            accepts_gzip |= header.starts_with("accept-encoding:") && header.contains("gzip");
        }
        let target = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let keep_open = respond(stream.get_mut(), &target, accepts_gzip, &state, &changes).await;
        if !keep_open {
            return;
        }
    }
}

fn query(target: &str) -> BTreeMap<String, String> {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes()).into_owned().collect()
}

/// Answer one request; whether the connection can take another.
async fn respond(
    stream: &mut TcpStream,
    target: &str,
    accepts_gzip: bool,
    state: &Arc<Mutex<State>>,
    changes: &broadcast::Sender<()>,
) -> bool {
    let path = target.split('?').next().unwrap_or("");
    if path == "/version" {
        let body = json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake"}).to_string();
        return write_full(stream, 200, &[], &body).await;
    }
    let Some(resource) = RESOURCES.into_iter().find(|r| path.ends_with(&format!("/{r}"))) else {
        return write_full(stream, 404, &[], &status_body(404, "NotFound", "no such path", 0)).await;
    };
    let params = query(target);
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let streamed_list = watch && params.get("sendInitialEvents").is_some_and(|v| v == "true");
    let consistent = params.get("resourceVersion").is_none_or(String::is_empty);
    let nudge = !watch && consistent && params.get("limit").is_some_and(|l| l == "1");
    let (fault, streaming, gzip) = {
        let mut state = state.lock().unwrap();
        let gzipped = watch && accepts_gzip && state.gzip_watches;
        state.seen.push(Seen { resource: resource.into(), watch, nudge, streamed_list, gzipped, at: Instant::now() });
        let newest = state.resource_version;
        if let Some(versions) = state.cache_versions.as_mut().filter(|_| consistent && (!watch || streamed_list)) {
            versions.insert(resource, newest);
        }
        (state.faults.get(resource).cloned(), state.streaming, Gzip(gzipped))
    };
    let throttled = matches!(fault, Some(Fault::Status { .. }));
    if streamed_list && streaming == Streaming::Refuse && !throttled {
        let message = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
        return write_full(stream, 422, &[], &status_body(422, "Invalid", message, 0)).await;
    }
    match (fault, watch) {
        (Some(Fault::Status { code, retry_after }), _) => {
            let body = status_body(code, "TooManyRequests", "the server is throttling (fake)", retry_after);
            let headers = [("Retry-After", retry_after.to_string())];
            write_full(stream, code, &headers, &body).await
        }
        (Some(Fault::CutList), false) => {
            let body = list_body(state, resource, &params);
            let head = head(200, &[("Content-Length", body.len().to_string())], false);
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body.as_bytes()[..body.len() / 2]).await;
            false
        }
        (Some(Fault::StallList), false) => {
            let mut buf = [0u8; 1];
            let _ = tokio::io::AsyncReadExt::read(stream, &mut buf).await;
            false
        }
        (_, false) => write_full(stream, 200, &[], &list_body(state, resource, &params)).await,
        (fault, true) => {
            let mut since: u64 = params.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
            let timeout = params.get("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(290);
            let changes = changes.subscribe();
            let served = streamed_list && streaming == Streaming::Serve;
            if served {
                let Some(version) = initial_events(stream, gzip, state, resource, &params, fault.as_ref()).await else {
                    return false;
                };
                since = version;
            }
            watch_stream(stream, gzip, state, changes, resource, since, timeout, fault, served).await
        }
    }
}

fn status_body(code: u16, reason: &str, message: &str, retry_after: u32) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
           "details": {"retryAfterSeconds": retry_after}, "code": code})
    .to_string()
}

/// The objects a list or a streamed list returns, and the resourceVersion they are at.
fn current(state: &Arc<Mutex<State>>, resource: &str, params: &BTreeMap<String, String>) -> (Vec<Value>, u64) {
    let state = state.lock().unwrap();
    let selector = params.get("labelSelector");
    let items = state
        .objects
        .get(resource)
        .into_iter()
        .flat_map(|objects| objects.values())
        // Only the selector the exporter sends for pods: a label that must exist.
        .filter(|o| selector.is_none_or(|key| o["metadata"]["labels"].get(key.as_str()).is_some()))
        .cloned()
        .collect();
    (items, state.resource_version)
}

fn list_body(state: &Arc<Mutex<State>>, resource: &str, params: &BTreeMap<String, String>) -> String {
    let (items, version) = current(state, resource, params);
    json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": version.to_string()}, "items": items})
        .to_string()
}

/// A streamed list's initial events: every object as ADDED, then the bookmark that ends
/// them. The resourceVersion the watch goes on from, or `None` once the connection is done.
async fn initial_events(
    stream: &mut TcpStream,
    gzip: Gzip,
    state: &Arc<Mutex<State>>,
    resource: &'static str,
    params: &BTreeMap<String, String>,
    fault: Option<&Fault>,
) -> Option<u64> {
    if stream.write_all(gzip.head().as_bytes()).await.is_err() {
        return None;
    }
    let (items, version) = current(state, resource, params);
    for (i, object) in items.into_iter().enumerate() {
        let line = json!({"type": "ADDED", "object": object}).to_string() + "\n";
        if fault == Some(&Fault::CutStreamedList) && i == 1 {
            gzip.chunk(stream, &line[..line.len() / 2]).await;
            return None;
        }
        if !gzip.chunk(stream, &line).await {
            return None;
        }
    }
    let end = json!({"type": "BOOKMARK", "object": {"kind": kind_of(resource), "apiVersion": "v1",
        "metadata": {"resourceVersion": version.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}}});
    gzip.chunk(stream, &(end.to_string() + "\n")).await.then_some(version)
}

fn head(code: u16, headers: &[(&str, String)], chunked: bool) -> String {
    let mut head = format!("HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n");
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    if chunked {
        head += "Transfer-Encoding: chunked\r\n";
    }
    head + "\r\n"
}

async fn write_full(stream: &mut TcpStream, code: u16, headers: &[(&str, String)], body: &str) -> bool {
    let mut headers = headers.to_vec();
    headers.push(("Content-Length", body.len().to_string()));
    let text = head(code, &headers, false) + body;
    stream.write_all(text.as_bytes()).await.is_ok()
}

async fn chunk(stream: &mut TcpStream, data: &str) -> bool {
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).await.is_ok()
}

/// The chunk that ends a response cleanly; the connection can then take another request.
async fn last_chunk(stream: &mut TcpStream) -> bool {
    stream.write_all(b"0\r\n\r\n").await.is_ok()
}

/// A watch answer gzipped or not; gzipped, each piece written is a gzip member of its own.
#[derive(Clone, Copy)]
struct Gzip(bool);

impl Gzip {
    fn head(self) -> String {
        let encoding = [("Content-Encoding", "gzip".to_owned())];
        head(200, if self.0 { &encoding } else { &[] }, true)
    }

    async fn chunk(self, stream: &mut TcpStream, data: &str) -> bool {
        if !self.0 {
            return chunk(stream, data).await;
        }
        let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut member, data.as_bytes()).unwrap();
        let member = member.finish().unwrap();
        let mut framed = format!("{:x}\r\n", member.len()).into_bytes();
        framed.extend_from_slice(&member);
        framed.extend_from_slice(b"\r\n");
        stream.write_all(&framed).await.is_ok()
    }
}

/// A watch from `since`: past changes after it, then each new one, with a bookmark on
/// every empty change, until `timeout` seconds (a clean end) or a fault. `headed`: a
/// streamed list sent the response's head already. Whether the connection can take another
/// request: after a clean end it can, as an API server's can, and the client's pool reuses
/// it (closing it instead raced the client's next request, which then failed to send).
#[allow(clippy::too_many_arguments)]
async fn watch_stream(
    stream: &mut TcpStream,
    gzip: Gzip,
    state: &Arc<Mutex<State>>,
    mut changes: broadcast::Receiver<()>,
    resource: &'static str,
    mut since: u64,
    timeout: u64,
    fault: Option<Fault>,
    headed: bool,
) -> bool {
    if !headed && stream.write_all(gzip.head().as_bytes()).await.is_err() {
        return false;
    }
    match fault {
        Some(Fault::StallWatch) => {
            // Hold the connection, send nothing, until the client gives up.
            let mut buf = [0u8; 1];
            let _ = tokio::io::AsyncReadExt::read(stream, &mut buf).await;
            return false;
        }
        Some(Fault::CutWatch) => {
            let line = json!({"type": "MODIFIED", "object": {"kind": "x", "metadata": {"name": "cut"}}}).to_string();
            gzip.chunk(stream, &line[..line.len() / 2]).await;
            return false;
        }
        Some(Fault::Gone | Fault::CutList | Fault::StallList) => {
            let line = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": format!("too old resource version: {since}"), "reason": "Expired", "code": 410}});
            // Then the response ends cleanly, as kube-apiserver ends a watch after its ERROR.
            return gzip.chunk(stream, &(line.to_string() + "\n")).await && last_chunk(stream).await;
        }
        Some(Fault::Malformed) => {
            let line = json!({"type": "MODIFIED", "object": {"apiVersion": "v1", "kind": kind_of(resource),
                "metadata": {"name": ["not", "a", "name"]}}});
            gzip.chunk(stream, &(line.to_string() + "\n")).await;
            // Then nothing: the exporter must not wait for more.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return false;
        }
        Some(Fault::EndEarly) => {
            return last_chunk(stream).await;
        }
        _ => {}
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let epoch = state.lock().unwrap().epoch;
    // The newest version this watch was sent, by event or bookmark.
    let mut sent = since;
    loop {
        let current = {
            let state = state.lock().unwrap();
            (state.epoch == epoch).then(|| {
                let events: Vec<(u64, String)> = state
                    .history
                    .iter()
                    .filter(|(v, r, _, _)| *v > since && *r == resource)
                    .map(|(v, _, kind, object)| (*v, json!({"type": kind, "object": object}).to_string() + "\n"))
                    .collect();
                let cached = state.cache_versions.as_ref().map(|versions| versions[resource]);
                (events, state.resource_version, cached)
            })
        };
        let Some((events, version, cached)) = current else {
            return last_chunk(stream).await;
        };
        let quiet = events.is_empty();
        for (event_version, line) in events {
            if !gzip.chunk(stream, &line).await {
                return false;
            }
            sent = event_version;
        }
        // The simple rule bookmarks at the newest version; the watch cache's, only with a
        // newer version than the watch was sent.
        let bookmark_at = match cached {
            None => Some(version),
            Some(cached) => (cached > sent).then_some(cached),
        };
        if let Some(at) = bookmark_at.filter(|_| quiet) {
            let bookmark = json!({"type": "BOOKMARK", "object": {"kind": kind_of(resource), "apiVersion": "v1",
                "metadata": {"resourceVersion": at.to_string()}}});
            if !gzip.chunk(stream, &(bookmark.to_string() + "\n")).await {
                return false;
            }
            sent = at;
        }
        since = version;
        tokio::select! {
            _ = changes.recv() => {}
            () = tokio::time::sleep_until(deadline) => {
                return last_chunk(stream).await;
            }
        }
    }
}

fn kind_of(resource: &str) -> &'static str {
    match resource {
        "nodes" => "Node",
        "daemonsets" => "DaemonSet",
        "controllerrevisions" => "ControllerRevision",
        _ => "Pod",
    }
}
