//! The exporter against a fake API server that misbehaves on cue (`support::fakeapi`):
//! throttling and outages with Retry-After, stalled watches, streams cut mid-line, 410
//! ERROR events, malformed lines and watches that end at once. For each fault: no hot loop
//! (the requests are counted), `/readyz` false while blind and true after, the self-metric
//! that names the fault, one error line per burst, and the right answer right after
//! recovery, including a change made while the exporter was blind. And quiet: watches of
//! resources nobody writes, which hear bookmarks only by nudging the server.
//!
//! Each test prints what it measured: docs/operations.md quotes the figures.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::reported_rows;
use support::fakeapi::{FakeApi, Fault, RESOURCES};
use support::{Exporter, daemon_pod, daemonset, node, revision};

/// How long each fault lasts.
const FAULT: Duration = Duration::from_secs(10);
/// The stall limit the exporter runs with here; the fake sends a bookmark each second.
const STALL_SECONDS: &str = "3";
/// Requests per second, averaged over the fault, across all four watches.
const MAX_RATE: f64 = 5.0;

fn pool_node(name: &str, pool: &str) -> Value {
    serde_json::to_value(node(name, &[("pool", pool)], &[])).unwrap()
}

/// Two nodes, a DaemonSet for pool `a`, and its pods on both: the one on the node in
/// pool `b` is misscheduled.
fn cluster(pool_of_n1: &str, pool_of_n2: &str) -> Vec<Value> {
    let ds = daemonset("agent", json!({"nodeSelector": {"pool": "a"}, "containers": [{"name": "a", "image": "a"}]}));
    let mut objects = vec![pool_node("n1", pool_of_n1), pool_node("n2", pool_of_n2)];
    objects.push(serde_json::to_value(revision(&ds, "h1")).unwrap());
    for n in ["n1", "n2"] {
        objects.push(serde_json::to_value(daemon_pod(&ds, n, "h1", true)).unwrap());
    }
    objects.push(serde_json::to_value(ds).unwrap());
    objects
}

struct Lab {
    fake: FakeApi,
    exporter: Exporter,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Lab {
    async fn start(name: &str) -> Self {
        let args = ["--watch-stall-seconds", STALL_SECONDS, "--watch-timeout-seconds", "60"];
        Self::start_with(name, Duration::from_secs(1), &args).await
    }

    /// A fake that sends a bookmark every `bookmark_every`, and the exporter with `args`.
    async fn start_with(name: &str, bookmark_every: Duration, args: &[&str]) -> Self {
        let dir = tempfile::Builder::new().prefix(&format!("misschedule-apifaults-{name}-")).tempdir().unwrap();
        let fake = FakeApi::start(cluster("a", "b"), bookmark_every).await;
        let kubeconfig = fake.kubeconfig(&dir.path().join("kubeconfig"));
        let log = dir.path().join("exporter.log");
        // The exporter's own log filter, as a user gets it: one line per burst is a promise
        // of the defaults.
        let args: Vec<&str> = ["--kubeconfig", kubeconfig.as_str()].into_iter().chain(args.iter().copied()).collect();
        let file = std::fs::File::create(&log).unwrap();
        let exporter = Exporter::spawn_logging("127.0.0.1", &args, file.into(), None);
        let lab = Self { fake, exporter, log, _dir: dir };
        lab.wait("ready with n2 misscheduled", Duration::from_secs(20), |lab| lab.ready() && lab.nodes() == ["n2"])
            .await;
        lab
    }

    fn ready(&self) -> bool {
        self.exporter.ready()
    }

    /// The nodes whose daemon pod the exporter reports misscheduled.
    fn nodes(&self) -> Vec<String> {
        let rows = reported_rows(&self.exporter.metrics());
        rows.into_iter().map(|(_, node, _, _)| node).collect::<BTreeSet<_>>().into_iter().collect()
    }

    fn sum(&self, family: &str, label: &str) -> f64 {
        let metrics = self.exporter.metrics();
        metrics
            .lines()
            .filter(|l| l.starts_with(family) && l.contains(label))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn wait(&self, what: &str, timeout: Duration, condition: impl Fn(&Self) -> bool) -> Duration {
        let started = Instant::now();
        while !condition(self) {
            assert!(started.elapsed() < timeout, "{what}: not within {timeout:?}\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started.elapsed()
    }

    /// Inject `fault` on `resource` (or all), change the cluster while it lasts, clear it,
    /// and check every promise; `counter` is the self-metric (family and label) it must move.
    async fn survive(&self, name: &str, resource: Option<&'static str>, fault: Fault, counter: (&str, &str)) {
        let (family, label) = counter;
        let counted_before = self.sum(family, label);
        let began = Instant::now();
        self.fake.fault(resource, fault.clone());
        let detected = self.wait("/readyz 503 while blind", Duration::from_secs(15), |lab| !lab.ready()).await;
        // A change the exporter can only learn by a relist once the fault is over.
        for object in [pool_node("n1", "b"), pool_node("n2", "a")] {
            self.fake.put(object);
        }
        let mut ready_while_blind = 0;
        while began.elapsed() < FAULT {
            ready_while_blind += usize::from(self.ready());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let requests = self.fake.requests_since(began);
        let rate = requests as f64 / began.elapsed().as_secs_f64();
        let counted = self.sum(family, label) - counted_before;
        self.fake.clear();
        let cleared = Instant::now();
        let recovered = self
            // The next attempt comes when the backoff says: by the end of 10 s of failures,
            // up to 12.8 s stretched by up to as much again.
            .wait("ready and right after the fault", Duration::from_secs(30), |lab| {
                lab.ready() && lab.nodes() == ["n1"]
            })
            .await;
        let log = self.log();
        let bursts = log.matches("watch failed; serving the last known state").count();
        let loud = log.lines().filter(|l| l.contains(" ERROR ") || l.contains(" WARN ")).count();
        println!(
            "MEASURED {name}: {requests} requests in {:.1}s ({rate:.1}/s), detected in {detected:.1?}, \
             {family}{{{label}}} +{counted}, recovered {recovered:.1?} after the fault ended, {bursts} error lines",
            cleared.duration_since(began).as_secs_f64(),
        );
        assert!(rate <= MAX_RATE, "{name}: {requests} requests in {FAULT:?} is a hot loop");
        assert!(counted >= 1.0, "{name}: {family}{{{label}}} did not count the fault");
        assert!(ready_while_blind <= 2, "{name}: /readyz said ready {ready_while_blind} times while blind");
        let watches = resource.map_or(4, |_| 1);
        assert!((1..=watches).contains(&bursts), "{name}: {bursts} error lines for one burst\n{log}");
        assert_eq!(loud, bursts, "{name}: warnings or errors beyond one per burst\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn throttled_429_with_retry_after_is_visible_and_honoured() {
    let lab = Lab::start("throttled").await;
    let began = Instant::now();
    lab.survive(
        "429 Retry-After 2",
        None,
        Fault::Status { code: 429, retry_after: 2 },
        ("misschedule_exporter_watch_errors_total", "reason=\"throttled\""),
    )
    .await;
    // Retry-After: 2 is a floor: no watch retried sooner than 2 s after a 429.
    let seen = lab.fake.seen();
    for resource in support::fakeapi::RESOURCES {
        let times: Vec<Instant> =
            seen.iter().filter(|s| s.resource == resource && s.at >= began).map(|s| s.at).collect();
        for pair in times.windows(2).take(3) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(1900),
                "{resource}: retried {:?} after a 429 asking for 2 s",
                pair[1] - pair[0]
            );
        }
    }
    assert!(lab.log().contains("HTTP 429"), "the log says the API server throttles\n{}", lab.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn unavailable_503_is_visible() {
    let lab = Lab::start("unavailable").await;
    lab.survive(
        "503",
        None,
        Fault::Status { code: 503, retry_after: 1 },
        ("misschedule_exporter_watch_errors_total", "reason=\"unavailable\""),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_stalled_watch_is_closed_and_relisted() {
    let lab = Lab::start("stall").await;
    lab.survive(
        "stalled watch",
        Some("nodes"),
        Fault::StallWatch,
        ("misschedule_exporter_watch_stalls_total", "resource=\"nodes\""),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_watch_cut_mid_line_backs_off_instead_of_looping() {
    let lab = Lab::start("cut").await;
    lab.survive(
        "watch cut mid-line",
        Some("nodes"),
        Fault::CutWatch,
        ("misschedule_exporter_watch_errors_total", "reason=\"cut\""),
    )
    .await;
}

/// A proxy that cuts every watch mid-line for a whole minute, every watch at once: each
/// resource's requests stay within 20 + 60/8 (the backoff grows to 30 s, where a fixed
/// short delay would relist every few seconds), and all four recover once it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_minute_of_cuts_backs_off_to_a_handful_of_requests_per_watch() {
    const SUSTAINED: Duration = Duration::from_secs(60);
    let lab = Lab::start("sustained").await;
    let began = Instant::now();
    lab.fake.fault(None, Fault::CutWatch);
    lab.wait("/readyz 503 while cut", Duration::from_secs(15), |lab| !lab.ready()).await;
    lab.fake.put(pool_node("n1", "b"));
    lab.fake.put(pool_node("n2", "a"));
    tokio::time::sleep(SUSTAINED.saturating_sub(began.elapsed())).await;
    let seen = lab.fake.seen();
    lab.fake.clear();
    let cleared = Instant::now();
    let budget = 20 + SUSTAINED.as_secs() as usize / 8;
    let mut counts = Vec::new();
    for resource in support::fakeapi::RESOURCES {
        let requests = seen.iter().filter(|s| s.resource == resource && s.at >= began).count();
        counts.push(format!("{resource} {requests}"));
        assert!(requests <= budget, "{resource}: {requests} requests in {SUSTAINED:?} of cuts; at most {budget}");
        assert!(requests >= 4, "{resource}: {requests} requests: the watch gave up instead of backing off");
    }
    let recovered = lab
        .wait("ready and right after the cuts", Duration::from_secs(45), |lab| lab.ready() && lab.nodes() == ["n1"])
        .await;
    let log = lab.log();
    let bursts = log.matches("watch failed; serving the last known state").count();
    println!(
        "MEASURED a minute of cuts: {} in {:.0?}, recovered {recovered:.1?} after, {bursts} error lines",
        counts.join(", "),
        cleared.duration_since(began)
    );
    assert!((1..=4).contains(&bursts), "{bursts} error lines for one burst per watch\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_list_cut_mid_body_backs_off() {
    let lab = Lab::start("cutlist").await;
    // Lists fail, but the watch already open keeps going: the relist a failure needs is
    // what fails, so the fault is first made visible by ending the watch.
    lab.survive(
        "list cut mid-body",
        Some("nodes"),
        Fault::CutList,
        ("misschedule_exporter_watch_errors_total", "reason=\"cut\""),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_list_that_never_answers_is_a_stall_not_a_hang() {
    let lab = Lab::start("stalllist").await;
    lab.survive(
        "list never answered",
        Some("nodes"),
        Fault::StallList,
        ("misschedule_exporter_watch_stalls_total", "resource=\"nodes\""),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_watch_ending_at_once_counts_as_a_failure() {
    let lab = Lab::start("endearly").await;
    lab.survive(
        "watch ends at once",
        Some("nodes"),
        Fault::EndEarly,
        ("misschedule_exporter_watch_errors_total", "reason=\"ended_early\""),
    )
    .await;
}

/// A burst of events, written at once, which the exporter takes and applies in batches: each event is counted, the last word on each node wins, and a pod it
/// cannot read among them is left out, counted and logged, alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs the exporter binary against the fake API server: scripts/test.sh runs it"]
async fn a_burst_of_events_is_applied_in_order_and_counted() {
    let lab = Lab::start("burst").await;
    let applied = |lab: &Lab| lab.sum("misschedule_exporter_watch_events_total", "resource=\"nodes\",type=\"apply\"");
    let invalid = |lab: &Lab| lab.sum("misschedule_exporter_invalid_objects_total", "resource=\"pods\"");
    let (applied_before, invalid_before) = (applied(&lab), invalid(&lab));
    // The pools swap back and forth, and the last flip leaves n1 in pool b: its pod is the
    // misscheduled one now.
    const FLIPS: usize = 201;
    let ds = daemonset("agent", json!({"nodeSelector": {"pool": "a"}, "containers": [{"name": "a", "image": "a"}]}));
    let mut burst = Vec::new();
    for flip in 0..FLIPS {
        let (n1, n2) = if flip % 2 == 0 { ("b", "a") } else { ("a", "b") };
        burst.extend([pool_node("n1", n1), pool_node("n2", n2)]);
        if flip == FLIPS / 2 {
            let mut unreadable = serde_json::to_value(daemon_pod(&ds, "n1", "h1", true)).unwrap();
            unreadable["metadata"]["name"] = json!("agent-unreadable");
            unreadable["metadata"]["uid"] = json!("");
            burst.push(unreadable);
        }
    }
    lab.fake.put_all(burst);
    let events = 2.0 * FLIPS as f64;
    lab.wait("every node event applied, n1 misscheduled", Duration::from_secs(10), |lab| {
        applied(lab) - applied_before == events && lab.nodes() == ["n1"]
    })
    .await;
    assert_eq!(invalid(&lab) - invalid_before, 1.0, "the unreadable pod is counted once");
    let log = lab.log();
    let ignored: Vec<_> = log.lines().filter(|l| l.contains("ignoring object")).collect();
    assert!(ignored.len() == 1 && ignored[0].contains("missing metadata.uid"), "{ignored:?}");
    assert!(lab.ready(), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_malformed_line_names_resource_and_field_and_relists() {
    let lab = Lab::start("malformed").await;
    lab.survive(
        "malformed line",
        Some("nodes"),
        Fault::Malformed,
        ("misschedule_exporter_watch_errors_total", "reason=\"malformed\""),
    )
    .await;
    let log = lab.log();
    let line = log.lines().find(|l| l.contains("watch failed")).unwrap_or_default();
    for words in ["nodes", "field `object.metadata.name`", "relisting"] {
        assert!(line.contains(words), "the error line says {words:?}: {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn gone_410_right_after_each_list_backs_off() {
    let lab = Lab::start("gone").await;
    let before = lab.sum("misschedule_exporter_watch_expiries_total", "resource=\"nodes\"");
    let began = Instant::now();
    lab.fake.fault(Some("nodes"), Fault::Gone);
    // The first 410 may be a compaction just after a list; the second in a row is not.
    let detected =
        lab.wait("/readyz 503 once the watch cannot resume", Duration::from_secs(15), |lab| !lab.ready()).await;
    for object in [pool_node("n1", "b"), pool_node("n2", "a")] {
        lab.fake.put(object);
    }
    tokio::time::sleep(FAULT.saturating_sub(began.elapsed())).await;
    let requests = lab.fake.requests_since(began);
    let expiries = lab.sum("misschedule_exporter_watch_expiries_total", "resource=\"nodes\"") - before;
    lab.fake.clear();
    let cleared = Instant::now();
    lab.wait("ready and right after the fault", Duration::from_secs(30), |lab| lab.ready() && lab.nodes() == ["n1"])
        .await;
    let recovered = cleared.elapsed();
    println!(
        "MEASURED 410 after every list: {requests} requests in {FAULT:?}, {expiries} expiries, unready after {detected:.1?}, recovered {recovered:.1?} after the fault ended"
    );
    assert!(expiries >= 2.0, "each 410 counted as an expiry");
    assert!((requests as f64) / FAULT.as_secs_f64() <= MAX_RATE, "{requests} requests: a relist loop");
}

/// The defaults against an API server that sends a bookmark each minute, as 1.27 and later
/// do: a watch that goes silent is declared stalled after 90 s, not at its 290 s timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn with_the_defaults_a_stall_is_caught_within_90_seconds() {
    let lab = Lab::start_with("stall-defaults", Duration::from_secs(60), &[]).await;
    // Let every watch see a periodic bookmark first.
    tokio::time::sleep(Duration::from_secs(61)).await;
    let began = Instant::now();
    lab.fake.fault(None, Fault::StallWatch);
    let detected = lab.wait("stall detected", Duration::from_secs(100), |lab| !lab.ready()).await;
    let stalls = lab.sum("misschedule_exporter_watch_stalls_total", "resource=");
    let requests = lab.fake.requests_since(began);
    println!(
        "MEASURED stall with the defaults: detected {detected:.1?} after the watches went silent, {stalls} stalls, {requests} requests"
    );
    assert!(detected >= Duration::from_secs(85), "declared stalled after {detected:?}: too soon for 60 s bookmarks");
    assert!(stalls >= 4.0, "every watch counted its stall: {stalls}");
}

/// Watches of resources nobody writes, against a server that bookmarks as the watch cache
/// does: only with a version newer than the watch's, which the cache learns from a
/// consistent read. Each watch nudges the server with one and hears its bookmarks, so none
/// is declared stalled, however long the quiet lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs minutes of faults against the exporter binary: scripts/test.sh runs it"]
async fn a_quiet_watch_nudges_for_its_bookmarks_instead_of_stalling() {
    // A 40 s limit: a watch nudges after 15 s of silence, and the server tries a bookmark
    // each 20 s.
    let lab = Lab::start_with("quiet", Duration::from_secs(20), &["--watch-stall-seconds", "40"]).await;
    // Every watch has had a bookmark mid-call: the short limit applies.
    tokio::time::sleep(Duration::from_secs(25)).await;
    lab.fake.bookmark_as_watch_cache();
    let began = Instant::now();
    let stalls_before = lab.sum("misschedule_exporter_watch_stalls_total", "resource=");
    // Three limits of quiet.
    let quiet = Duration::from_secs(120);
    while began.elapsed() < quiet {
        assert!(lab.ready(), "unready {:?} into the quiet\n{}", began.elapsed(), lab.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stalls = lab.sum("misschedule_exporter_watch_stalls_total", "resource=") - stalls_before;
    let seen = lab.fake.seen();
    let nudges: BTreeMap<&str, usize> = RESOURCES
        .into_iter()
        .map(|r| (r, seen.iter().filter(|s| s.at >= began && s.nudge && s.resource == r).count()))
        .collect();
    println!("MEASURED {quiet:?} of quiet under the watch cache's bookmark rule: {stalls} stalls, nudges {nudges:?}");
    assert_eq!(stalls, 0.0, "a quiet watch was declared stalled\n{}", lab.log());
    for (resource, n) in nudges {
        // At most one a nudge period (15 s) per kind, and some.
        assert!((1..=9).contains(&n), "{n} nudges for {resource} in {quiet:?}");
    }
}
