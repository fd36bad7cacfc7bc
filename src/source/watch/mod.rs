//! The Kubernetes edge: one watch per resource (and per namespace when scoped) feeding
//! the shared index. Each lists (streamed where the server can, `stream_list`, else in
//! pages), then watches from the list's resourceVersion, call after call, nudging the
//! server when quiet (`nudge`); `progress` judges how each call ended and `retry` how long
//! to wait after a failure.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::Client;
use kube::api::{ListParams, VersionMatch, WatchParams};
use tokio::task::JoinSet;

use crate::clock::unix_ms;
use crate::index::Indexed;
use crate::k8s::slim::{SlimNode, SlimPod};
use crate::shared::{Shared, WatchHealth};
use crate::source::burst::Burst;
use crate::source::call_error::CallError;
use crate::source::decode::Wire;
use crate::source::progress::{Call, End, Failure, Next, Silence, after_call, is_short};
use crate::source::request::{Ask, Compression, Encoding};
use crate::source::retry::{Attempt, Retry};
use crate::source::stream_list::ListMode;
use crate::telemetry::Telemetry;

mod apply;
mod call;
mod list;
mod nudge;

pub use self::apply::MAX_BATCH;

/// Objects per list page unless configured: kube's watcher default.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// Seconds each watch call lasts unless configured: kube-runtime's default, whose
/// dead-connection detection fires this long plus 5 s after the last byte.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 290;
/// Seconds without an event or bookmark before a watch counts as stalled, where the API
/// server sends a bookmark each minute (1.27 and later, nudged: `nudge`): a minute and a half.
pub const DEFAULT_STALL_SECONDS: u32 = 90;
/// The label the DaemonSet controller puts on every pod it creates: a server-side selector
/// on it means non-daemon pods are never fetched.
pub const DEFAULT_POD_SELECTOR: &str = "pod-template-generation";

/// What to watch.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Namespaces for DaemonSets, revisions and pods; empty means all.
    pub namespaces: Vec<String>,
    /// Server-side label selector for pods.
    pub pod_selector: String,
    /// Seconds before the API server ends each watch call and it is resumed.
    pub timeout_seconds: u32,
    /// Objects per page of a list (`limit`/`continue`) from etcd.
    pub page_size: u32,
    /// List from the API server's watch cache (`resourceVersion=0`, in one piece) instead of
    /// a quorum read from etcd: cheaper for both, but the list may trail etcd by a moment
    /// (the watch then catches up).
    pub from_apiserver_cache: bool,
    /// Silence after which a watch is declared stalled (see `progress::Silence`).
    pub stall_after: Duration,
    /// Streamed lists, paged ones, or streamed where the server can.
    pub list_mode: ListMode,
    /// Ask for gzipped lists and watches (`--apiserver-compression`). The client must leave
    /// them compressed: `request` inflates them.
    pub compression: Compression,
    /// The encoding pods and nodes are asked for in (`--wire`).
    pub encoding: Encoding,
}

impl WatchConfig {
    /// The defaults, for `namespaces` (empty: all) and `pod_selector`.
    pub fn new(namespaces: Vec<String>, pod_selector: String) -> Self {
        Self {
            namespaces,
            pod_selector,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            page_size: DEFAULT_PAGE_SIZE,
            from_apiserver_cache: false,
            stall_after: Duration::from_secs(DEFAULT_STALL_SECONDS.into()),
            list_mode: ListMode::Auto,
            compression: Compression::Identity,
            encoding: Encoding::Auto,
        }
    }

    fn ask(&self) -> Ask {
        Ask { compression: self.compression, encoding: self.encoding }
    }
}

/// Start every watch, and the optional one of `FailedCreate` Events. The tasks run until
/// the set is dropped.
pub fn spawn_all(client: Client, config: &WatchConfig, shared: Arc<Shared>, telemetry: Arc<Telemetry>) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let watch = Watch { client, config: config.clone(), shared, telemetry, nudges: Arc::default() };
    tasks.spawn(watch.clone().run::<SlimNode>(None, None));
    let scopes: Vec<Option<String>> =
        if config.namespaces.is_empty() { vec![None] } else { config.namespaces.iter().cloned().map(Some).collect() };
    for scope in scopes {
        tasks.spawn(watch.clone().run::<DaemonSet>(scope.clone(), None));
        tasks.spawn(watch.clone().run::<ControllerRevision>(scope.clone(), None));
        tasks.spawn(watch.clone().run::<SlimPod>(scope.clone(), Some(config.pod_selector.clone())));
        tasks.spawn(super::failed_creates::run(watch.client.clone(), scope, watch.shared.clone()));
    }
    tasks
}

/// A resource a watch lists and watches: indexed, decoded from the API server's JSON, one of
/// the four static kinds.
pub(super) trait Listed:
    Indexed + kube::Resource<DynamicType = ()> + Clone + Wire + Debug + Send + 'static
{
}

impl<K> Listed for K where K: Indexed + kube::Resource<DynamicType = ()> + Clone + Wire + Debug + Send + 'static {}

/// What a watch task talks to and reports to.
#[derive(Clone)]
struct Watch {
    client: Client,
    config: WatchConfig,
    shared: Arc<Shared>,
    telemetry: Arc<Telemetry>,
    nudges: Arc<nudge::Nudges>,
}

/// One watch's requests: where, and with which parameters.
struct Endpoint {
    url_path: String,
    list: ListParams,
    watch: WatchParams,
    timeout: Duration,
}

impl Endpoint {
    fn new<K: kube::Resource<DynamicType = ()>>(
        config: &WatchConfig,
        scope: Option<&str>,
        labels: Option<String>,
    ) -> Self {
        let mut list =
            ListParams { label_selector: labels.clone(), limit: Some(config.page_size), ..Default::default() };
        if config.from_apiserver_cache {
            // The watch cache answers resourceVersion=0 only when unpaged, in one piece.
            (list.resource_version, list.version_match, list.limit) =
                (Some("0".into()), Some(VersionMatch::NotOlderThan), None);
        }
        let watch = WatchParams {
            label_selector: labels,
            timeout: Some(config.timeout_seconds),
            bookmarks: true,
            ..Default::default()
        };
        let timeout = Duration::from_secs(config.timeout_seconds.into());
        Self { url_path: K::url_path(&(), scope), list, watch, timeout }
    }
}

/// Where a watch stands between and during its calls.
struct Cursor<'a> {
    /// What the next call resumes from: the last event's or bookmark's.
    resource_version: String,
    /// What the watch has learned of the server's bookmarks.
    silence: &'a mut Silence,
    /// After a stall: the health to start proving at the first event or bookmark.
    proof: Option<&'a WatchHealth>,
    /// The current call's start, and whether it has received anything yet.
    started: Instant,
    progressed: bool,
}

/// Why a list-then-watch cycle stopped.
enum Stop {
    Expired,
    Failed { failure: Failure, error: String, retry_after: Option<Duration> },
}

impl Stop {
    fn failed(error: CallError) -> Self {
        if error.is_expired() {
            return Self::Expired;
        }
        Self::Failed { failure: error.failure(), retry_after: error.retry_after(), error: error.to_string() }
    }
}

impl Watch {
    /// Watch one resource forever. After a failure the exporter serves the last known state
    /// and relists after `Retry`'s delay, so that recovery is proven by a completed relist
    /// and anything deleted meanwhile disappears. An expired resourceVersion (410 Gone,
    /// after etcd compaction) is not counted as a failure; `Retry` says when it relists.
    async fn run<K>(self, scope: Option<String>, labels: Option<String>)
    where
        K: Listed,
    {
        let resource = K::RESOURCE;
        let endpoint = Endpoint::new::<K>(&self.config, scope.as_deref(), labels);
        let health = self.shared.readiness.watch(resource);
        let mut retry = Retry::default();
        let mut burst = Burst::new(resource, scope.as_deref().unwrap_or("*"));
        let mut silence = Silence::new(self.config.stall_after, endpoint.timeout);
        // After a stall a completed list proves nothing (the list call may work while watches
        // hang): the first event or bookmark of the new watch does.
        let mut stalled = false;
        // 410s right after a list, in a row: once may be a compaction just after the list;
        // twice, the watch cannot resume at all and only relists see changes.
        let mut early_expiries = 0u32;
        // Auto turns to pages for good once the server shows it cannot stream.
        let mut list_mode = self.config.list_mode;
        loop {
            let started = Instant::now();
            // When the last list data arrived, and when the list completed.
            let mut list_progress: Option<Instant> = None;
            let mut listed: Option<Instant> = None;
            let idle = silence.limit();
            let listing = self.list::<K>(&endpoint, scope.as_deref(), idle, &mut list_progress, &mut list_mode);
            let stop = match listing.await {
                Err(error) => Stop::failed(error),
                Ok(resource_version) => {
                    let now = Instant::now();
                    let proof = if stalled {
                        Some(&*health)
                    } else {
                        health.listed(unix_ms());
                        None
                    };
                    listed = Some(now);
                    burst.listed(now - started);
                    self.watch::<K>(&endpoint, scope.as_deref(), resource_version, &mut silence, proof).await
                }
            };
            let attempt = Attempt {
                listing: list_progress.map_or(Duration::ZERO, |at| at.duration_since(started)),
                watched: listed.map(|at| at.elapsed()),
                retry_after: match &stop {
                    Stop::Failed { retry_after, .. } => *retry_after,
                    Stop::Expired => None,
                },
            };
            let delay = match stop {
                Stop::Expired => {
                    self.telemetry.record_expiry(resource);
                    let delay = retry.after_expiry(attempt);
                    early_expiries = if attempt.proved_clean() { 0 } else { early_expiries + 1 };
                    if early_expiries >= 2 {
                        health
                            .failed("each watch expires (410 Gone) right after its list, so only relists see changes");
                    }
                    tracing::info!(resource = resource.as_str(), namespace = burst.namespace, relist_in = ?delay, "watch expired (410 Gone); relisting");
                    delay
                }
                Stop::Failed { failure, error, .. } => {
                    stalled = failure == Failure::Stalled;
                    early_expiries = 0;
                    self.telemetry.record_failure(resource, failure);
                    health.failed(&error);
                    let delay = retry.after_failure(attempt);
                    burst.failed(attempt, failure, &error, delay);
                    delay
                }
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// Watch call after call from `resource_version`, until one expires or fails.
    async fn watch<K>(
        &self,
        endpoint: &Endpoint,
        scope: Option<&str>,
        resource_version: String,
        silence: &mut Silence,
        proof: Option<&WatchHealth>,
    ) -> Stop
    where
        K: Listed,
    {
        let mut cursor = Cursor { resource_version, silence, proof, started: Instant::now(), progressed: false };
        // Calls in a row that a proxy (or the server) closed short: each waits longer.
        let mut short = 0;
        loop {
            (cursor.started, cursor.progressed) = (Instant::now(), false);
            let started = cursor.started;
            let (end, error): (End, Option<CallError>) = match self.call::<K>(endpoint, scope, &mut cursor).await {
                Ok(()) => (End::Closed, None),
                Err(error) if error.is_expired() => (End::Expired, None),
                Err(error) => (End::Failed(error.failure()), Some(error)),
            };
            let call = Call { lasted: started.elapsed(), progressed: cursor.progressed };
            let next = after_call(call, end, endpoint.timeout, short);
            short = if is_short(call, end) { short + 1 } else { 0 };
            match next {
                Next::Resume(pause) => tokio::time::sleep(pause).await,
                Next::Relist => return Stop::Expired,
                Next::Fail(failure) => {
                    let retry_after = error.as_ref().and_then(CallError::retry_after);
                    let error = match error {
                        Some(error) => error.to_string(),
                        None => format!(
                            "the server closed the watch after {:.1?} without an event or bookmark",
                            call.lasted
                        ),
                    };
                    return Stop::Failed { failure, error, retry_after };
                }
            }
        }
    }
}
