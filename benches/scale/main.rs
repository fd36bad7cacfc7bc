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
#[path = "../../tests/support/process.rs"]
mod process;
#[path = "../../tests/support/synth.rs"]
mod synth;

mod cold_start;
mod events;
mod front_ends;
mod report;
mod scrape;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::watcher::Event;
use misschedule_exporter::index::Grows;
use misschedule_exporter::k8s::slim::SlimNode;
use misschedule_exporter::report::format::Format;
use misschedule_exporter::report::metrics;
use misschedule_exporter::shared::Shared;
use misschedule_exporter::telemetry::Telemetry;
use synth::Shape;

use cold_start::synced_index;
use events::{ByKind, EventMix, alternating, decoded};
use front_ends::{guard, what_if};
use report::{Row, Targets, compare, mib, ms, write_tsv};
use scrape::{KeepAliveScraper, PlainScraper, bare_server, percentile, under_load};

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
    rows.push(Row::scrapes("GET /metrics p99 (8 concurrent scrapers)", p99, latencies.len(), body_size, targets.p99));

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
    rows.push(Row::scrapes(
        "GET /metrics gzip p99 (8 keep-alive scrapers)",
        p99,
        latencies.len(),
        gzip_size,
        targets.gzip_p99,
    ));
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
