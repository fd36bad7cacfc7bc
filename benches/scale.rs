//! In-process scale benchmark: a synthetic cluster of 5,000 nodes, 40 DaemonSets and
//! 200,000 daemon pods (1% of nodes draining, so 2,000 misscheduled pods).
//!
//!   cargo bench --bench scale                  full scale, prints a markdown table
//!   cargo bench --bench scale -- --smoke       small and quick; checks results, not targets
//!
//! Measures what the targets name: cold start (JSON decode + index build of
//! the initial lists, exporter work only), RSS read from /proc (the kernel's count,
//! not an estimate), GET /metrics latency under 8 concurrent scrapers, and watch
//! events applied per second through `Index::warm` and `Index::apply`, the watcher's own
//! path (`Watch::apply_batch`). Lists
//! and events are decoded into the shapes the watcher uses (`SlimPod`, `SlimNode`).

// The test kit's synthetic cluster (tests/support/synth.rs), shared with the tests.
#[allow(dead_code)]
#[path = "../tests/support/process.rs"]
mod process;
#[path = "../tests/support/synth.rs"]
mod synth;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use misschedule_exporter::guard::review;
use misschedule_exporter::guard::{self, Change, Policy, Verdict};
use misschedule_exporter::index::{Grows, Index, Indexed};
use misschedule_exporter::k8s::slim::{SlimNode, SlimPod};
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::report::format::Format;
use misschedule_exporter::report::metrics;
use misschedule_exporter::shared::Shared;
use misschedule_exporter::source::decode::{Wire, decode};
use misschedule_exporter::source::watch::MAX_BATCH;
use misschedule_exporter::telemetry::Telemetry;
use misschedule_exporter::whatif::edit::{LABEL_MANAGER, LabelEdit, TAINT_MANAGER, TaintEdit};
use misschedule_exporter::whatif::{Effect, simulate};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use synth::Shape;

struct Options {
    shape: Shape,
    events: usize,
    scrape_for: Duration,
    scrapers: usize,
    smoke: bool,
    /// `--only KIND`: every event of one kind of the mix (`ByKind::NAMES`), for a profile of
    /// that kind alone.
    only: Option<usize>,
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| flag::<usize>(&args, name);
    let smoke = args.iter().any(|a| a == "--smoke");
    let (nodes, daemonsets, events, secs) = if smoke { (200, 8, 20_000, 1) } else { (5_000, 40, 1_000_000, 10) };
    Options {
        shape: Shape {
            nodes: value("--nodes").unwrap_or(nodes),
            daemonsets: value("--daemonsets").unwrap_or(daemonsets),
            draining_percent: 1,
        },
        events: value("--events").unwrap_or(events),
        scrape_for: Duration::from_secs(flag(&args, "--scrape-seconds").unwrap_or(secs)),
        scrapers: value("--scrapers").unwrap_or(8),
        smoke,
        only: flag::<String>(&args, "--only").map(|kind| {
            let found = ByKind::NAMES.iter().position(|name| *name == kind);
            found.unwrap_or_else(|| panic!("--only takes one of {:?}, not {kind:?}", ByKind::NAMES))
        }),
    }
}

/// Resident set size in bytes, as the kernel counts it.
fn rss() -> u64 {
    process::rss_kib(std::process::id()) * 1024
}

/// One page of a list response, as the API server sends it.
#[derive(Serialize, Deserialize)]
struct Page<T> {
    items: Vec<T>,
}

/// Time spent on one initial list: decoding the JSON, and building the index from it.
#[derive(Default, Clone, Copy)]
struct ColdStart {
    decode: Duration,
    index: Duration,
    /// RSS after the list was applied, before the purge that follows it.
    rss_before_purge: u64,
}

impl ColdStart {
    fn total(self) -> Duration {
        self.decode + self.index
    }
}

impl std::ops::AddAssign for ColdStart {
    fn add_assign(&mut self, other: Self) {
        self.decode += other.decode;
        self.index += other.index;
        self.rss_before_purge = other.rss_before_purge;
    }
}

/// Apply one resource's initial list, page by page: the page's JSON (full API
/// objects, `A`) is produced untimed, as that is the API server's work; decoding
/// into the shape the watcher uses (`W`), the way kube's client decodes it, and
/// applying are timed.
fn initial_list<A, W>(index: &mut Index, objects: impl Iterator<Item = A>, page_size: usize) -> ColdStart
where
    A: Serialize,
    W: Indexed + Wire,
{
    let mut spent = ColdStart::default();
    let mut objects = objects.peekable();
    let started = Instant::now();
    index.apply(Event::<W>::Init).unwrap();
    spent.index += started.elapsed();
    while objects.peek().is_some() {
        let page = Page { items: objects.by_ref().take(page_size).collect::<Vec<A>>() };
        let bytes = serde_json::to_vec(&page).unwrap();
        drop(page);
        let started = Instant::now();
        // As the exporter's own list call reads a page.
        let page: Page<W> = decode::<W, _>(&bytes, "a page", |_| None).unwrap();
        drop(bytes);
        let decoded = Instant::now();
        // In batches, each warmed first, as the watcher applies them (`Watch::apply_batch`).
        let mut items = page.items.into_iter().map(Event::InitApply).peekable();
        while items.peek().is_some() {
            let batch: Vec<_> = items.by_ref().take(MAX_BATCH).collect();
            index.warm(&batch);
            batch.into_iter().for_each(|event| index.apply(event).unwrap());
        }
        spent.decode += decoded - started;
        spent.index += decoded.elapsed();
    }
    let started = Instant::now();
    index.apply(Event::<W>::InitDone).unwrap();
    spent.index += started.elapsed();
    // As the watcher does after each list: its garbage goes back to the kernel at once.
    spent.rss_before_purge = rss();
    let started = Instant::now();
    assert!(misschedule_exporter::allocator::purge(), "jemalloc refused the purge");
    spent.index += started.elapsed();
    spent
}

/// An index of `shape` built from its four initial lists, in the watcher's order: nodes,
/// DaemonSets, revisions, pods. `after_each(list)` runs after each, numbered 0 to 3.
fn synced_index(shape: &Shape, mut after_each: impl FnMut(usize)) -> (Index, ColdStart) {
    let mut index = Index::default();
    index.set_now(1_780_000_000);
    let mut cold = initial_list::<Node, SlimNode>(&mut index, (0..shape.nodes).map(|i| shape.node(i)), 500);
    after_each(0);
    cold += initial_list::<DaemonSet, DaemonSet>(&mut index, (0..shape.daemonsets).map(|j| shape.daemonset(j)), 500);
    after_each(1);
    cold += initial_list::<ControllerRevision, ControllerRevision>(
        &mut index,
        (0..shape.daemonsets).flat_map(|j| [shape.revision(j, 1), shape.revision(j, 2)]),
        500,
    );
    after_each(2);
    cold += initial_list::<Pod, SlimPod>(&mut index, shape.pod_slots().map(|(j, i)| shape.pod(j, i, 0)), 500);
    after_each(3);
    (index, cold)
}

/// Applies `events` (and drops them) as the watcher applies a batch (`Watch::apply_batch`),
/// adding their count and the time it took to `kind`.
fn timed<K: Indexed>(index: &mut Index, events: Vec<Event<K>>, kind: &mut (usize, Duration)) {
    let count = events.len();
    let started = Instant::now();
    index.warm(&events);
    for event in events {
        index.apply(event).unwrap();
    }
    kind.1 += started.elapsed();
    kind.0 += count;
}

/// Events made, then applied, at a time (see `EventMix`).
const EVENT_BATCH: usize = 32;

/// Watch events: 80% pod status updates, 10% node heartbeats, 1% drain taints added or
/// removed, 9% pods deleted and recreated, on pods and nodes picked at random. Drains
/// alternate: one taints a node that is not drained, the next untaints one picked at random
/// among those that are, so that the same share of nodes (1%) stays drained at either size.
/// Flipping random nodes would drift toward half of them drained, which 5,000 nodes reach
/// within their first 10,000 drains and 65,000 never do: the two sizes would be measured in
/// states of their own, one of them with every DaemonSet's tables growing throughout. A
/// heartbeat sends the node as it is. Each is encoded as the API server sends it and decoded
/// into the watcher's shape (untimed); applying it, and dropping it, is timed. The watcher
/// applies at most 64 decoded events at a time, so the allocator reuses what the last batch
/// freed; events are made in small batches to keep that true here.
struct EventMix<'s> {
    shape: &'s Shape,
    slots: Vec<(usize, usize)>,
    /// Whether each node carries the drain taint now, as the events sent it last.
    drained: Vec<bool>,
    /// The nodes `drained` marks, in no order: an undrain picks one of them.
    draining: Vec<usize>,
    /// Drain events so far: odd ones taint, even ones untaint.
    drains: u64,
    nonce: u64,
    /// Every event of this kind (`Options::only`), in place of the mix.
    only: Option<usize>,
}

/// A drain's cost in times an event of another kind, and drains' share (`ByKind::drains`).
struct DrainShare {
    times_lowest: f64,
    times_highest: f64,
    of_time: f64,
    of_events: f64,
}

/// Time spent on each kind of event, to show which kind a bigger cluster makes dearer.
#[derive(Default)]
struct ByKind([(usize, Duration); 4]);

impl ByKind {
    const KINDS: [&str; 4] =
        ["pod status updates", "node heartbeats", "drain taints on or off", "pods deleted and recreated"];
    /// Each kind in a word, as `--only` takes it.
    const NAMES: [&str; 4] = ["updates", "heartbeats", "drains", "recreations"];

    fn count(&self) -> usize {
        self.0.iter().map(|(count, _)| count).sum()
    }

    fn add(&mut self, other: &Self) {
        for ((count, spent), (more, longer)) in self.0.iter_mut().zip(&other.0) {
            *count += more;
            *spent += *longer;
        }
    }

    fn spent(&self) -> Duration {
        self.0.iter().map(|(_, spent)| *spent).sum()
    }

    fn rate(&self) -> f64 {
        self.count() as f64 / self.spent().as_secs_f64()
    }

    /// What a drain cost against each other kind seen, and drains' share of the time and of
    /// the events; `None` without drains or other kinds. Computed where the times are, so
    /// that the prose about drains cannot drift from the figures.
    fn drains(&self) -> Option<DrainShare> {
        const DRAINS: usize = 2;
        let per_event: Vec<(f64, usize)> = self.each().map(|(_, us, count)| (us, count)).collect();
        let (drain_us, drains) = per_event[DRAINS];
        let others = per_event.iter().enumerate().filter(|&(kind, &(_, count))| kind != DRAINS && count > 0);
        let times: Vec<f64> = others.map(|(_, &(us, _))| drain_us / us).collect();
        (drains > 0 && !times.is_empty()).then(|| DrainShare {
            times_lowest: times.iter().copied().fold(f64::INFINITY, f64::min),
            times_highest: times.iter().copied().fold(0.0, f64::max),
            of_time: self.0[DRAINS].1.as_secs_f64() / self.spent().as_secs_f64(),
            of_events: drains as f64 / self.count() as f64,
        })
    }

    /// Each kind, its µs per event and its count.
    fn each(&self) -> impl Iterator<Item = (&'static str, f64, usize)> + '_ {
        Self::KINDS
            .into_iter()
            .zip(&self.0)
            .map(|(kind, (count, spent))| (kind, spent.as_secs_f64() * 1e6 / (*count).max(1) as f64, *count))
    }
}

impl<'s> EventMix<'s> {
    fn new(shape: &'s Shape, only: Option<usize>) -> Self {
        let drained: Vec<bool> = (0..shape.nodes).map(|i| shape.draining(i)).collect();
        let draining = (0..shape.nodes).filter(|&i| drained[i]).collect();
        Self { shape, slots: shape.pod_slots().collect(), drained, draining, drains: 0, nonce: 1, only }
    }

    /// The node the next drain event flips, from the node `picked` at random: a taint goes
    /// to the first node from there on that is not drained, and an untaint to a drained
    /// node that `picked` chooses too.
    fn flip_drain(&mut self, picked: usize) -> usize {
        self.drains += 1;
        let nodes = self.drained.len();
        let free = (picked..picked + nodes).map(|i| i % nodes).find(|&i| !self.drained[i]);
        match free {
            Some(i) if self.drains % 2 == 1 || self.draining.is_empty() => {
                self.draining.push(i);
                self.drained[i] = true;
                i
            }
            // Every node drained, or an untaint's turn: `draining` holds some node.
            _ => {
                let i = self.draining.swap_remove(picked % self.draining.len());
                self.drained[i] = false;
                i
            }
        }
    }

    /// Node `i` as it is now: with the drain taint where `drained` says so.
    fn node(&self, i: usize) -> Node {
        let mut node = self.shape.node(i);
        let taints = node.spec.as_mut().unwrap().taints.get_or_insert_default();
        let has = taints.iter().any(|t| t.key == synth::DRAIN_TAINT);
        if has && !self.drained[i] {
            taints.retain(|t| t.key != synth::DRAIN_TAINT);
        } else if !has && self.drained[i] {
            let taint = serde_json::json!({"key": synth::DRAIN_TAINT, "value": "1", "effect": "NoSchedule"});
            taints.push(serde_json::from_value(taint).unwrap());
        }
        node
    }

    /// The kind of the event numbered `nonce`, as `ByKind::KINDS` numbers them.
    fn kind(&self, nonce: u64) -> usize {
        self.only.unwrap_or(match nonce % 100 {
            0..=79 => 0,
            80..=89 => 1,
            90 => 2,
            _ => 3,
        })
    }

    /// Applies about `count` more events to `index` (a recreation is two, and a batch is
    /// not cut in the middle of one), timed by kind into `by_kind`.
    fn apply(&mut self, index: &mut Index, count: usize, by_kind: &mut ByKind) {
        let shape = self.shape;
        let mut applied = 0usize;
        while applied < count {
            let (mut updates, mut heartbeats, mut drains, mut recreations) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..EVENT_BATCH.min(count - applied) {
                self.nonce += 1;
                let nonce = self.nonce;
                let pick = (nonce.wrapping_mul(2_654_435_761) % self.slots.len() as u64) as usize;
                let (j, i) = self.slots[pick];
                match self.kind(nonce) {
                    0 => updates.push(Event::Apply(decoded::<SlimPod>(&shape.pod(j, i, nonce)))),
                    1 => heartbeats.push(Event::Apply(decoded::<SlimNode>(&self.node(i)))),
                    2 => {
                        let i = self.flip_drain(i);
                        drains.push(Event::Apply(decoded::<SlimNode>(&self.node(i))));
                    }
                    _ => {
                        let pod = shape.pod(j, i, nonce);
                        recreations.push(Event::Delete(decoded::<SlimPod>(&pod)));
                        recreations.push(Event::Apply(decoded::<SlimPod>(&pod)));
                    }
                }
            }
            applied += updates.len() + heartbeats.len() + drains.len() + recreations.len();
            timed(index, heartbeats, &mut by_kind.0[1]);
            timed(index, drains, &mut by_kind.0[2]);
            timed(index, updates, &mut by_kind.0[0]);
            timed(index, recreations, &mut by_kind.0[3]);
        }
    }
}

/// Events applied alternately to `index` (`events` goes on with its mix) and to an index of
/// `nodes` nodes built beside it, in blocks, `count` each: this host's speed drifts by tens of
/// percent between runs minutes apart, so a ratio of two runs says more about the host than
/// the index. Each block starts with the caches warm for the other index, as a block of a
/// run of its own does not; blocks of 50,000 events make that a small share.
fn alternating(index: &mut Index, events: &mut EventMix<'_>, nodes: usize, count: usize) -> String {
    const BLOCK: usize = 50_000;
    let shape = events.shape;
    let small_shape = Shape { nodes, ..*shape };
    let (mut small, _) = synced_index(&small_shape, |_| {});
    let mut small_events = EventMix::new(&small_shape, events.only);
    let (mut large_kinds, mut small_kinds) = (ByKind::default(), ByKind::default());
    // Each pair of blocks' ratio too: their spread says how far one run's ratio can be
    // trusted on this host.
    let mut ratios = Vec::new();
    let mut done = 0;
    while done < count {
        let block = BLOCK.min(count - done);
        let (mut large_block, mut small_block) = (ByKind::default(), ByKind::default());
        events.apply(index, block, &mut large_block);
        small_events.apply(&mut small, block, &mut small_block);
        ratios.push(large_block.rate() / small_block.rate());
        large_kinds.add(&large_block);
        small_kinds.add(&small_block);
        done += block;
    }
    ratios.sort_by(f64::total_cmp);
    let quartile = |q: usize| ratios.get(ratios.len().saturating_sub(1) * q / 4).copied().unwrap_or(f64::NAN);
    let ratio = large_kinds.rate() / small_kinds.rate();
    let only = events.only.map_or(String::new(), |kind| format!(" Only {} here (`--only`).", ByKind::KINDS[kind]));
    let mut out = format!(
        "Events alternating: {count} events each, in blocks of {BLOCK}, applied by turns to the index of {} nodes and to one of {nodes} nodes built beside it in the same process, both with {} DaemonSets.{only}\n\n",
        shape.nodes, shape.daemonsets
    );
    out += &format!(
        "| measure | {} nodes | {nodes} nodes | speed at {} ÷ at {nodes} | target | met |\n|---|---|---|---|---|---|\n",
        shape.nodes, shape.nodes
    );
    out += &format!(
        "| watch events applied, per second | {:.0} | {:.0} | {ratio:.2}× | ≥ 0.9× | {} |\n",
        large_kinds.rate(),
        small_kinds.rate(),
        if ratio >= 0.9 { "yes" } else { "**no**" }
    );
    out += &format!(
        "| the same, each pair of blocks: lowest, quartiles, highest ({} pairs) | | | {:.2}× {:.2}× {:.2}× {:.2}× {:.2}× | | |\n",
        ratios.len(),
        quartile(0),
        quartile(1),
        quartile(2),
        quartile(3),
        quartile(4)
    );
    for ((kind, large, count), (_, small, _)) in large_kinds.each().zip(small_kinds.each()) {
        if count == 0 {
            continue;
        }
        out += &format!("| of which: {kind}, µs per event | {large:.2} | {small:.2} | {:.2}× | | |\n", small / large);
    }
    for (size, kinds) in [(shape.nodes, &large_kinds), (nodes, &small_kinds)] {
        if let Some(drains) = kinds.drains() {
            out += &format!(
                "\nAt {size} nodes a drain cost {:.0} to {:.0} times an event of another kind, and drains, {:.1}% of the events, took {:.0}% of the time.\n",
                drains.times_lowest,
                drains.times_highest,
                drains.of_events * 100.0,
                drains.of_time * 100.0
            );
        }
    }
    out
}

/// `object` as the watcher gets it: encoded by the API server, decoded into shape `W`.
fn decoded<W: DeserializeOwned>(object: &impl Serialize) -> W {
    serde_json::from_slice(&serde_json::to_vec(object).unwrap()).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A plain scraper: a new connection per request, uncompressed, read into a buffer it keeps.
/// Prometheus does keep one (its scrape pool sizes the next buffer from the last scrape);
/// a fresh buffer per scrape made this client's own reallocations and page faults most of
/// the phase's CPU at 2,600,000 pods (perf), on the cores the server needs.
struct PlainScraper {
    port: u16,
    response: Vec<u8>,
}

impl PlainScraper {
    fn new(port: u16) -> Self {
        Self { port, response: Vec::new() }
    }

    /// One scrape: its latency and the response's length.
    fn scrape(&mut self) -> (Duration, usize) {
        let started = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n").unwrap();
        self.response.clear();
        stream.read_to_end(&mut self.response).unwrap();
        assert!(self.response.starts_with(b"HTTP/1.0 200"), "scrape failed");
        (started.elapsed(), self.response.len())
    }
}

/// A Prometheus-like scraper on one keep-alive connection: OpenMetrics, gzip.
struct KeepAliveScraper {
    stream: std::io::BufReader<TcpStream>,
}

impl KeepAliveScraper {
    const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\nAccept-Encoding: gzip\r\n\r\n";

    fn connect(port: u16) -> Self {
        Self { stream: std::io::BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap()) }
    }

    /// One scrape: its latency and the body's length on the wire.
    fn scrape(&mut self) -> (Duration, usize) {
        use std::io::BufRead;
        let started = Instant::now();
        self.stream.get_mut().write_all(Self::REQUEST).unwrap();
        let (mut length, mut gzip, mut line) = (0usize, false, String::new());
        loop {
            line.clear();
            self.stream.read_line(&mut line).unwrap();
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            gzip |= lower.starts_with("content-encoding: gzip");
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        assert!(gzip, "the scrape was not compressed");
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).unwrap();
        (started.elapsed(), length)
    }
}

/// A server that answers every request with `body` and does nothing else: hyper's HTTP/1
/// connection and a body held in memory, as the exporter's, without its routes, limits or
/// rendering. Abort the task to stop it.
fn bare_server(runtime: &tokio::runtime::Runtime, body: bytes::Bytes) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            let answer = hyper::service::service_fn(move |_| {
                let response = hyper::Response::new(axum::body::Body::from(body.clone()));
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), answer));
        }
    });
    (port, accept)
}

/// 8 (or `scrapers`) clients scraping for `duration`: sorted latencies and one body's size.
fn under_load<S>(
    scrapers: usize,
    duration: Duration,
    connect: impl Fn() -> S + Sync,
    scrape: fn(&mut S) -> (Duration, usize),
) -> (Vec<Duration>, usize) {
    let stop = AtomicBool::new(false);
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..scrapers)
            .map(|_| {
                scope.spawn(|| {
                    let mut client = connect();
                    let (mut latencies, mut size) = (Vec::new(), 0);
                    while !stop.load(Ordering::Relaxed) {
                        let (latency, bytes) = scrape(&mut client);
                        latencies.push(latency);
                        size = bytes;
                    }
                    (latencies, size)
                })
            })
            .collect();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let size = results.iter().map(|r| r.1).max().unwrap_or(0);
    let mut latencies: Vec<Duration> = results.into_iter().flat_map(|r| r.0).collect();
    latencies.sort();
    (latencies, size)
}

/// One measure: its value (for the growth between scales), as shown, and its target.
struct Row {
    what: std::borrow::Cow<'static, str>,
    value: f64,
    measured: String,
    target: String,
    met: Option<bool>,
}

impl Row {
    fn new(what: impl Into<std::borrow::Cow<'static, str>>, value: f64, measured: String) -> Self {
        Self { what: what.into(), value, measured, target: String::new(), met: None }
    }

    fn target(self, target: impl Into<String>, met: bool) -> Self {
        Self { target: target.into(), met: Some(met), ..self }
    }

    fn met(&self) -> &'static str {
        match self.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        }
    }
}

/// The targets at 5,000 nodes (200,000 pods) and at 65,000 (2,600,000 pods).
struct Targets {
    cold_start: Duration,
    synced_rss_mib: f64,
    /// RSS after the allocator has purged the lists' garbage; no target at the largest scale.
    idle_rss_mib: Option<f64>,
    p99: Duration,
    gzip_p99: Duration,
    events_per_second: f64,
}

impl Targets {
    fn for_shape(shape: &Shape) -> Self {
        if shape.nodes >= 65_000 {
            Self {
                cold_start: Duration::from_secs(20),
                synced_rss_mib: 1024.0,
                idle_rss_mib: None,
                p99: Duration::from_millis(20),
                gzip_p99: Duration::from_millis(20),
                events_per_second: 500_000.0,
            }
        } else {
            Self {
                cold_start: Duration::from_secs(2),
                synced_rss_mib: 128.0,
                idle_rss_mib: Some(80.0),
                p99: Duration::from_millis(10),
                gzip_p99: Duration::from_millis(5),
                events_per_second: 500_000.0,
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// Rows as tab-separated lines, after a `# scale` line, for `--compare`.
fn write_tsv(path: &str, scale: [usize; 4], rows: &[Row]) {
    let mut out = format!("# scale\t{}\t{}\t{}\t{}\n", scale[0], scale[1], scale[2], scale[3]);
    for r in rows {
        out += &format!("{}\t{}\t{}\t{}\t{}\n", r.what, r.value, r.measured, r.target, r.met());
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
}

/// Two runs' rows side by side (`--compare SMALL.tsv LARGE.tsv`), with how each grew.
fn compare(small: &str, large: &str) {
    let read = |path: &str| {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        let mut lines = text.lines();
        let scale: Vec<usize> =
            lines.next().unwrap_or_default().split('\t').skip(1).filter_map(|v| v.parse().ok()).collect();
        assert_eq!(scale.len(), 4, "{path}: no scale line");
        let rows: Vec<Vec<String>> = lines.map(|l| l.split('\t').map(str::to_owned).collect()).collect();
        assert!(rows.iter().all(|r| r.len() == 5), "{path}: malformed rows");
        (scale, rows)
    };
    let ((s, small_rows), (l, large_rows)) = (read(small), read(large));
    let thousands = |n: usize| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    println!(
        "Scales: {} nodes × {} DaemonSets = {} pods, and {} nodes × {} DaemonSets = {} pods ({:.1}× the pods; {} and {} misscheduled)\n",
        thousands(s[0]),
        s[1],
        thousands(s[2]),
        thousands(l[0]),
        l[1],
        thousands(l[2]),
        l[2] as f64 / s[2] as f64,
        thousands(s[3]),
        thousands(l[3])
    );
    println!("| measure | {} nodes | {} nodes | grew | target | met |", thousands(s[0]), thousands(l[0]));
    println!("|---|---|---|---|---|---|");
    for (a, b) in small_rows.iter().zip(&large_rows) {
        assert_eq!(a[0], b[0], "the two runs measured different things");
        let (x, y) = (a[1].parse::<f64>().unwrap_or(0.0), b[1].parse::<f64>().unwrap_or(0.0));
        let grew = if x > 0.0 { format!("×{:.1}", y / x) } else { String::new() };
        let target = match (a[3].as_str(), b[3].as_str()) {
            ("", "") => String::new(),
            (t, u) if t == u => t.to_owned(),
            (t, u) => format!("{} / {}", if t.is_empty() { "–" } else { t }, if u.is_empty() { "–" } else { u }),
        };
        let met = match (a[4].as_str(), b[4].as_str()) {
            ("", "") => String::new(),
            (m, n) => format!("{} / {}", if m.is_empty() { "–" } else { m }, if n.is_empty() { "–" } else { n }),
        };
        println!("| {} | {} | {} | {grew} | {target} | {met} |", a[0], a[2], b[2]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--compare") {
        let (Some(small), Some(large)) = (args.get(at + 1), args.get(at + 2)) else {
            panic!("usage: --compare SMALL.tsv LARGE.tsv");
        };
        return compare(small, large);
    }
    let opts = options();
    let shape = opts.shape;
    let targets = Targets::for_shape(&shape);
    let mut rows = Vec::new();
    let baseline = rss();

    // Cold start, with the RSS after each list.
    let mut after = [0; 4];
    let (index, cold) = synced_index(&shape, |list| after[list] = rss());
    let [after_nodes, _, after_daemonsets, synced] = after;

    // The results must be right before their speed means anything.
    let misscheduled: usize = index.daemonsets().iter().map(|d| d.misscheduled_pods().len()).sum();
    assert_eq!(misscheduled, shape.expected_misscheduled_pods(), "wrong misscheduled pod count");
    let uncovered: usize = index.daemonsets().iter().map(|d| d.uncovered_nodes().len()).sum();
    assert_eq!(uncovered, shape.expected_uncovered_nodes(), "wrong uncovered node count");
    assert_eq!(index.daemonsets().len(), shape.daemonsets);
    let pods = shape.pods();
    let seconds = |d: Duration| (d.as_secs_f64(), format!("{:.2} s", d.as_secs_f64()));
    let (value, shown) = seconds(cold.total());
    rows.push(
        Row::new("cold start: decode + index the initial lists (single thread)", value, shown)
            .target(format!("≤ {} s", targets.cold_start.as_secs()), cold.total() <= targets.cold_start),
    );
    let (value, shown) = seconds(cold.decode);
    rows.push(Row::new("of which: JSON decode", value, shown));
    let (value, shown) = seconds(cold.index);
    rows.push(Row::new("of which: index build", value, shown));
    rows.push(
        Row::new("RSS once synced and purged (VmRSS)", mib(synced), format!("{:.1} MiB", mib(synced)))
            .target(format!("≤ {} MiB", targets.synced_rss_mib), mib(synced) <= targets.synced_rss_mib),
    );
    // Buffers over jemalloc's oversize threshold (8 MiB) go back when freed; the purge takes
    // what smaller garbage the list left (tables outgrown while it filled them).
    let given_back = mib(cold.rss_before_purge.saturating_sub(synced));
    rows.push(Row::new("RSS the purge after the pod list gave back", given_back, format!("{given_back:.1} MiB")));
    // Whatever is left goes back on jemalloc's timer, without any allocation to trigger it.
    std::thread::sleep(Duration::from_secs(3));
    let purged = rss();
    let idle = Row::new(
        "RSS 3 s after sync, idle (allocator purged in the background)",
        mib(purged),
        format!("{:.1} MiB", mib(purged)),
    );
    rows.push(match targets.idle_rss_mib {
        Some(target) => idle.target(format!("≤ {target} MiB"), mib(purged) <= target),
        None => idle,
    });
    let per_node = after_nodes.saturating_sub(baseline) as f64 / shape.nodes as f64;
    rows.push(Row::new("of which: RSS growth per node, after the node list", per_node, format!("{per_node:.0} B")));
    // A DaemonSet and its two revisions, before its pods (their claims grow with the pods).
    let per_daemonset = after_daemonsets.saturating_sub(after_nodes) as f64 / shape.daemonsets as f64;
    rows.push(Row::new(
        "of which: RSS growth per DaemonSet and its revisions, after their lists",
        per_daemonset,
        format!("{per_daemonset:.0} B"),
    ));
    let per_pod = purged.saturating_sub(baseline) as f64 / pods as f64;
    rows.push(Row::new("RSS growth per daemon pod, idle (all objects included)", per_pod, format!("{per_pod:.0} B")));
    // Where those bytes go, as the index estimates its own structures.
    for part in index.footprint() {
        let (per, unit) = match part.grows_with {
            Grows::Nodes => (part.bytes as f64 / shape.nodes as f64, "node"),
            Grows::Pods => (part.bytes as f64 / pods as f64, "daemon pod"),
        };
        rows.push(Row::new(format!("of which (estimated): {}, per {unit}", part.name), per, format!("{per:.0} B")));
    }

    // Scrapes under concurrent load.
    let shared = Arc::new(Shared::new(index));
    let mut self_metrics = prometheus_client::registry::Registry::default();
    Telemetry::default().register(&mut self_metrics, shared.clone());
    let exposition = Arc::new(metrics::Exposition::new(shared.clone(), self_metrics));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let router = misschedule_exporter::http::server::router(
        shared.clone(),
        exposition.clone(),
        Default::default(),
        Default::default(),
    );
    let server = runtime.spawn(misschedule_exporter::http::server::serve(listener, router, None, async {
        let _ = stop_rx.await;
    }));
    let (_, body_size) = PlainScraper::new(port).scrape();
    let (latencies, _) = under_load(opts.scrapers, opts.scrape_for, || PlainScraper::new(port), PlainScraper::scrape);
    let p99 = percentile(&latencies, 0.99);
    let p50 = percentile(&latencies, 0.5);
    rows.push(Row::new("GET /metrics p50 (8 concurrent scrapers)", ms(p50), format!("{:.2} ms", ms(p50))));
    rows.push(
        Row::new(
            "GET /metrics p99 (8 concurrent scrapers)",
            ms(p99),
            format!("{:.2} ms ({} scrapes, {} KiB each)", ms(p99), latencies.len(), body_size / 1024),
        )
        .target(format!("≤ {} ms", targets.p99.as_millis()), p99 <= targets.p99),
    );

    // The floor under that figure on this machine: the same bytes from a bare hyper server
    // on the same runtime, to the same clients. At 2,600,000 pods, 94% of the CPU in this
    // phase was the kernel's loopback TCP, for the scrapers and the server alike (perf).
    let plain: Vec<u8> = exposition.body(Format::Text, false).unwrap().concat();
    let (bare_port, stop_bare) = bare_server(&runtime, bytes::Bytes::from(plain));
    let (latencies, _) =
        under_load(opts.scrapers, opts.scrape_for, || PlainScraper::new(bare_port), PlainScraper::scrape);
    stop_bare.abort();
    let floor = percentile(&latencies, 0.99);
    rows.push(Row::new(
        "the same body from a bare hyper server, p99 (this machine's floor)",
        ms(floor),
        format!("{:.2} ms ({} scrapes)", ms(floor), latencies.len()),
    ));

    // gzip, as Prometheus asks: what compressing one generation costs, then the scrapes.
    // A node relabelled starts a new generation, so nothing is cached yet.
    let mut relabelled = shape.node(0);
    relabelled.metadata.labels.get_or_insert_default().insert("bench.example/generation".into(), "2".into());
    let generation = shared.read().generation();
    shared.update(|index| index.apply(Event::Apply(decoded::<SlimNode>(&relabelled)))).unwrap();
    assert_ne!(shared.read().generation(), generation, "the relabel must start a new generation");
    let started = Instant::now();
    exposition.body(Format::OpenMetrics, false).unwrap();
    let render = started.elapsed();
    let started = Instant::now();
    exposition.body(Format::OpenMetrics, true).unwrap();
    let compress = started.elapsed();
    let (latencies, gzip_size) =
        under_load(opts.scrapers, opts.scrape_for, || KeepAliveScraper::connect(port), KeepAliveScraper::scrape);
    let _ = stop_tx.send(());
    let _ = runtime.block_on(server);
    drop(exposition);
    let p99 = percentile(&latencies, 0.99);
    let ratio = body_size as f64 / gzip_size.max(1) as f64;
    rows.push(Row::new(
        "render one index generation (OpenMetrics; once, not per scrape)",
        ms(render),
        format!("{:.2} ms", ms(render)),
    ));
    rows.push(Row::new("compress it with gzip (once per generation)", ms(compress), format!("{:.2} ms", ms(compress))));
    rows.push(
        Row::new(
            "GET /metrics gzip p99 (8 keep-alive scrapers)",
            ms(p99),
            format!("{:.2} ms ({} scrapes, {} KiB each)", ms(p99), latencies.len(), gzip_size / 1024),
        )
        .target(format!("≤ {} ms", targets.gzip_p99.as_millis()), p99 <= targets.gzip_p99),
    );
    rows.push(Row::new("bytes on the wire, plain ÷ gzip", ratio, format!("{ratio:.1}×")).target("≥ 5×", ratio >= 5.0));

    // Watch events: pod status updates, node heartbeats, drain taints coming and going,
    // pods deleted and recreated (see `EventMix`).
    let mut index = Arc::try_unwrap(shared).map(|s| s.into_index()).unwrap_or_else(|_| panic!("index still shared"));
    let mut events = EventMix::new(&shape, opts.only);
    let mut by_kind = ByKind::default();
    events.apply(&mut index, opts.events, &mut by_kind);
    let rate = by_kind.rate();
    rows.push(
        Row::new(
            "watch events applied (Index::apply, one core)",
            rate,
            format!("{rate:.0} events/s ({} events)", by_kind.count()),
        )
        .target("≥ 500,000/s", rate >= targets.events_per_second),
    );
    for (kind, each, count) in by_kind.each().filter(|(_, _, count)| *count > 0) {
        rows.push(Row::new(format!("of which: {kind}, per event"), each, format!("{each:.2} µs ({count} events)")));
    }
    let beside =
        flag::<usize>(&args, "--events-beside").map(|nodes| alternating(&mut index, &mut events, nodes, opts.events));

    guard(&index, &shape, &mut rows);
    what_if(&mut index, &shape, &mut rows);

    println!(
        "Scale: {} nodes, {} DaemonSets, {} pods, {} misscheduled pods\n",
        shape.nodes, shape.daemonsets, pods, misscheduled
    );
    println!("| measure | result | target | met |\n|---|---|---|---|");
    for row in &rows {
        println!("| {} | {} | {} | {} |", row.what, row.measured, row.target, row.met());
    }
    if let Some(path) = flag::<String>(&args, "--tsv") {
        write_tsv(&path, [shape.nodes, shape.daemonsets, pods, misscheduled], &rows);
    }
    if let Some(beside) = beside {
        println!("\n{beside}");
    }
    if opts.smoke {
        println!("\nsmoke run: results checked, targets not enforced at this size");
    }
}

/// The admission guard's answer to a review, from decoding to the answer: one node tainted
/// NoExecute (a copy of that node's part of the index), and one DaemonSet narrowed to no
/// node (a copy of every node). The API server waits 3 s at most.
fn guard(index: &Index, shape: &Shape, rows: &mut Vec<Row>) {
    let review = |resource: (&str, &str), object: serde_json::Value| {
        let body = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "bench", "resource": {"group": resource.0, "version": "v1", "resource": resource.1},
            "operation": "UPDATE", "userInfo": {"username": "bench"}, "object": object}});
        serde_json::to_vec(&body).unwrap()
    };
    let answered = |body: &[u8]| {
        let started = Instant::now();
        let request = review::decode(body).unwrap();
        let change = Change::of(&request).unwrap();
        let excerpt = index.excerpt(change.touched().unwrap());
        let (verdict, response) = guard::answer(excerpt, change, &request, &Policy::default());
        (started.elapsed(), verdict, response)
    };
    // The API server waits timeoutSeconds (at most 3 s) for each answer: the p99 of repeats.
    let p99 = |body: Vec<u8>, repeats: usize| {
        let mut took: Vec<Duration> = (0..repeats)
            .map(|_| {
                let (took, verdict, response) = answered(&body);
                assert_eq!(verdict, Verdict::Warned, "{response:?}");
                took
            })
            .collect();
        took.sort();
        took[(repeats * 99 / 100).min(repeats - 1)]
    };
    let mut tainted = serde_json::to_value(shape.node(0)).unwrap();
    tainted["spec"]["taints"] =
        serde_json::json!([{"key": "bench.example/evict", "value": "x", "effect": "NoExecute"}]);
    let node = p99(review(("", "nodes"), tainted), 200);
    rows.push(Row::new("guard: a review of one node's taint, p99", ms(node), format!("{:.2} ms", ms(node))));
    // Every label of one node removed: each DaemonSet that selects by one loses it.
    let mut unlabelled = serde_json::to_value(shape.node(0)).unwrap();
    unlabelled["metadata"]["labels"] = serde_json::json!({});
    let label = p99(review(("", "nodes"), unlabelled), 200);
    rows.push(
        Row::new("guard: a review of one node's labels, p99", ms(label), format!("{:.2} ms", ms(label)))
            .target("≤ 50 ms", ms(label) <= 50.0),
    );

    let mut narrowed = shape.daemonset(0);
    narrowed.status = None;
    let template = narrowed.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    template.node_selector.get_or_insert_default().insert("bench.example/pool".into(), "none".into());
    let ds = p99(review(("apps", "daemonsets"), serde_json::to_value(narrowed).unwrap()), 10);
    let shown = format!("{:.0} ms (every node copied)", ms(ds));
    rows.push(
        Row::new("guard: a review of one DaemonSet's placement, p99 of 10", ms(ds), shown)
            .target("≤ 1 s", ds <= Duration::from_secs(1)),
    );
}

/// `kubectl misschedule what-if` on the synced index, after the cluster was listed (what
/// the plugin adds to a plain answer): one node tainted NoExecute; every node relabelled
/// with a key no DaemonSet reads, the most nodes a change can touch; and one DaemonSet's
/// selector narrowed so that none of its nodes fits, every node compared.
fn what_if(index: &mut Index, shape: &Shape, rows: &mut Vec<Row>) {
    let selection = Selection::default();
    let node = |i: usize| decoded::<SlimNode>(&shape.node(i));
    let taint = TaintEdit::parse(&["bench.example/evict=x:NoExecute".to_owned()]).unwrap();
    let current = vec![node(0)];
    let edited = vec![taint.apply(&current[0], false, TAINT_MANAGER, 1_780_000_100).unwrap()];
    let started = Instant::now();
    let outcome = simulate::nodes(index, &selection, current, edited).unwrap();
    let one = started.elapsed();
    // Every agent on the node is deleted, but those that tolerate every taint.
    let deletes = outcome.changes.iter().filter(|r| r.effect == Effect::Delete).count();
    assert!(deletes > 0 && deletes == outcome.changes.len(), "{:?}", outcome.changes);
    rows.push(Row::new("what-if: taint one node NoExecute", ms(one), format!("{:.1} ms", ms(one))));

    let label = LabelEdit::parse(&["bench.example/what-if=yes".to_owned()]).unwrap();
    let current: Vec<SlimNode> = (1..shape.nodes).map(node).collect();
    let edited = current.iter().map(|n| label.apply(n, false, LABEL_MANAGER, 1_780_000_100).unwrap().0).collect();
    let started = Instant::now();
    let outcome = simulate::nodes(index, &selection, current, edited).unwrap();
    let all = started.elapsed();
    assert!(outcome.changes.is_empty(), "a label no DaemonSet reads changes nothing");
    let shown = format!("{:.2} s ({} nodes × {} DaemonSets)", all.as_secs_f64(), shape.nodes - 1, shape.daemonsets);
    rows.push(Row::new("what-if: label every node (-l or --all)", all.as_secs_f64(), shown));

    let mut narrowed = shape.daemonset(0);
    narrowed.metadata.uid = None;
    narrowed.status = None;
    let template = narrowed.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    template.node_selector.get_or_insert_default().insert("bench.example/pool".into(), "none".into());
    let started = Instant::now();
    let outcome = simulate::daemonsets(index, vec![narrowed]).unwrap();
    let apply = started.elapsed();
    assert!(outcome.changes.len() >= shape.nodes - 1 - shape.nodes / 100, "{} rows", outcome.changes.len());
    let shown = format!("{:.2} s ({} rows)", apply.as_secs_f64(), outcome.changes.len());
    rows.push(Row::new("what-if: apply -f one DaemonSet that leaves every node", apply.as_secs_f64(), shown));
}
