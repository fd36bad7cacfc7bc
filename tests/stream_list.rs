//! Streaming lists (`--list-mode`) against the fake API server (`support::fakeapi`): a server
//! that streams, one that refuses (as without the WatchList feature), one that ignores the
//! request (a plain watch), and a stream cut midway; gzipped one member per event, as 1.37
//! does, where the exporter asks for gzip. What was fetched is read from the fake's own
//! request log, what the exporter made of it from its metrics.

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::reported_rows;
use support::fakeapi::{FakeApi, Fault, RESOURCES, Seen, Streaming};
use support::{Exporter, daemon_pod, daemonset, node, revision};

fn pool_node(name: &str, pool: &str) -> Value {
    serde_json::to_value(node(name, &[("pool", pool)], &[])).unwrap()
}

/// Two nodes and a DaemonSet for pool `a` with a pod on each: the one on n2 (pool `b`) is
/// misscheduled.
fn objects() -> Vec<Value> {
    let ds = daemonset("agent", json!({"nodeSelector": {"pool": "a"}, "containers": [{"name": "a", "image": "a"}]}));
    let mut objects = vec![pool_node("n1", "a"), pool_node("n2", "b")];
    objects.push(serde_json::to_value(revision(&ds, "h1")).unwrap());
    for n in ["n1", "n2"] {
        objects.push(serde_json::to_value(daemon_pod(&ds, n, "h1", true)).unwrap());
    }
    objects.push(serde_json::to_value(ds).unwrap());
    objects
}

struct Run {
    fake: FakeApi,
    exporter: Exporter,
    log: PathBuf,
    dir: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Run {
    async fn start(name: &str, streaming: Streaming, fault: Option<Fault>, args: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("misschedule-stream-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = FakeApi::start(objects(), Duration::from_secs(1)).await;
        fake.streaming(streaming);
        // As 1.37: gzipped for a client that asks (only --apiserver-compression does).
        fake.gzip_watches(true);
        if let Some(fault) = fault {
            fake.fault(Some("nodes"), fault);
        }
        let kubeconfig = fake.kubeconfig(&dir.join("kubeconfig"));
        let log = dir.join("exporter.log");
        let args: Vec<&str> = ["--kubeconfig", kubeconfig.as_str()].into_iter().chain(args.iter().copied()).collect();
        let file = std::fs::File::create(&log).unwrap();
        let exporter = Exporter::spawn_logging("127.0.0.1", &args, Stdio::from(file), Some("info"));
        Self { fake, exporter, log, dir }
    }

    fn nodes(&self) -> Vec<String> {
        let rows = reported_rows(&self.exporter.metrics());
        rows.into_iter().map(|(_, node, _, _)| node).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// `misschedule_exporter_lists_total` for one resource and mode.
    fn lists(&self, resource: &str, mode: &str) -> f64 {
        let series = format!("misschedule_exporter_lists_total{{resource=\"{resource}\",mode=\"{mode}\"}}");
        self.exporter.sample(&series).unwrap_or(f64::NAN)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn wait(&self, what: &str, condition: impl Fn(&Self) -> bool) {
        let started = Instant::now();
        while !condition(self) {
            assert!(started.elapsed() < Duration::from_secs(20), "{what}: not within 20 s\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Right, then right again after a change only a watch can bring.
    async fn answers_and_follows(&self) {
        self.wait("ready with n2 misscheduled", |run| run.exporter.ready() && run.nodes() == ["n2"]).await;
        self.fake.put(pool_node("n1", "b"));
        self.fake.put(pool_node("n2", "a"));
        self.wait("the change watched", |run| run.nodes() == ["n1"]).await;
    }

    /// The requests for `resource`, in order: (a watch, a streamed list).
    fn requests(&self, resource: &str) -> Vec<(bool, bool)> {
        let seen: Vec<Seen> = self.fake.seen();
        seen.iter().filter(|s| s.resource == resource).map(|s| (s.watch, s.streamed_list)).collect()
    }
}

const PLAIN_LIST: (bool, bool) = (false, false);
const STREAMED_LIST: (bool, bool) = (true, true);
const WATCH: (bool, bool) = (true, false);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_streams_is_listed_by_streaming_and_never_paged() {
    let run = Run::start("serve", Streaming::Serve, None, &[]).await;
    run.answers_and_follows().await;
    for resource in RESOURCES {
        let requests = run.requests(resource);
        assert_eq!(requests.first(), Some(&STREAMED_LIST), "{resource}: {requests:?}");
        assert!(!requests.contains(&PLAIN_LIST), "{resource} was paged: {requests:?}");
        // After the stream's end bookmark, the watch goes on from its resourceVersion.
        assert!(requests.contains(&WATCH), "{resource}: {requests:?}");
    }
    assert_eq!(run.lists("pods", "stream"), 1.0);
    assert_eq!(run.lists("pods", "pages"), 0.0);
    assert!(run.fake.seen().iter().all(|s| !s.gzipped), "gzip without --apiserver-compression");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzipped_streams_are_read_past_their_first_member() {
    let run = Run::start("gzip", Streaming::Serve, None, &["--apiserver-compression"]).await;
    // The list's objects, its end bookmark and the changes after it: a gzip member each.
    run.answers_and_follows().await;
    for resource in RESOURCES {
        let seen: Vec<Seen> = run.fake.seen().into_iter().filter(|s| s.resource == resource).collect();
        assert!(seen.iter().all(|s| s.gzipped), "{resource}: not all gzipped: {seen:?}");
        assert_eq!(run.lists(resource, "stream"), 1.0, "{resource}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_is_paged_after_one_try_and_never_asked_again() {
    let run = Run::start("refuse", Streaming::Refuse, None, &[]).await;
    run.answers_and_follows().await;
    // A relist (the watch of nodes fails once) does not try streaming again.
    run.fake.fault(Some("nodes"), Fault::EndEarly);
    tokio::time::sleep(Duration::from_secs(2)).await;
    run.fake.clear();
    run.wait("relisted", |run| run.lists("nodes", "pages") >= 2.0 && run.exporter.ready()).await;
    for resource in RESOURCES {
        let requests = run.requests(resource);
        assert_eq!(requests[..2], [STREAMED_LIST, PLAIN_LIST], "{resource}: {requests:?}");
        assert_eq!(requests.iter().filter(|r| **r == STREAMED_LIST).count(), 1, "{resource}: {requests:?}");
    }
    assert_eq!(run.lists("pods", "stream"), 0.0);
    let log = run.log();
    assert!(log.contains("listing in pages from now on"), "{log}");
    assert!(log.contains("sendInitialEvents is forbidden"), "the log says why\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_the_request_is_paged_once_it_shows() {
    let run = Run::start("ignore", Streaming::Ignore, None, &[]).await;
    run.answers_and_follows().await;
    for resource in RESOURCES {
        let requests = run.requests(resource);
        assert_eq!(requests[..2], [STREAMED_LIST, PLAIN_LIST], "{resource}: {requests:?}");
    }
    assert_eq!(run.lists("nodes", "pages"), 1.0);
    assert!(run.log().contains("initial-events-end"), "{}", run.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_midway_is_a_failure_retried_by_streaming() {
    let run = Run::start("cut", Streaming::Serve, Some(Fault::CutStreamedList), &[]).await;
    run.wait("the cut counted", |run| {
        run.exporter.sample("misschedule_exporter_watch_errors_total{resource=\"nodes\",reason=\"cut\"}") >= Some(1.0)
    })
    .await;
    assert!(!run.exporter.ready(), "ready with the nodes' list cut");
    run.fake.clear();
    run.answers_and_follows().await;
    let requests = run.requests("nodes");
    assert!(requests.len() >= 3, "{requests:?}");
    assert!(!requests.contains(&PLAIN_LIST), "a cut is no reason to page: {requests:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_mode_forces_one_way() {
    // Pages against a server that streams: never a streamed list.
    let run = Run::start("pages", Streaming::Serve, None, &["--list-mode", "pages"]).await;
    run.answers_and_follows().await;
    assert!(RESOURCES.iter().all(|r| !run.requests(r).contains(&STREAMED_LIST)));
    drop(run);
    // Stream against a server that refuses: unready, the refusal in the log and counted.
    let run = Run::start("stream", Streaming::Refuse, None, &["--list-mode", "stream"]).await;
    run.wait("the refusal counted", |run| {
        run.exporter.sample("misschedule_exporter_watch_errors_total{resource=\"nodes\",reason=\"refused\"}")
            >= Some(1.0)
    })
    .await;
    assert!(!run.exporter.ready());
    assert!(!run.requests("nodes").contains(&PLAIN_LIST));
    assert!(run.log().contains("sendInitialEvents is forbidden"), "{}", run.log());
}
