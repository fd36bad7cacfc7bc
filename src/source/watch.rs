//! The Kubernetes edge: one watch per resource (and per namespace when scoped)
//! feeding the shared index.

use std::fmt::Debug;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::k8s::slim::{SlimNode, SlimPod};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::clock::unix_ms;
use crate::index::Indexed;
use crate::shared::Shared;
use crate::source::retry::{Attempt, Retry};
use crate::telemetry::{EventType, Telemetry};

/// Objects per list page unless configured: kube's watcher default.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// Seconds each watch call lasts unless configured: kube-runtime's default, whose
/// dead-connection detection fires this long plus 5 s after the last byte.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 290;
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
        }
    }
}

/// Start every watch. The tasks run until the set is dropped.
pub fn spawn_all(client: Client, config: &WatchConfig, shared: Arc<Shared>, telemetry: Arc<Telemetry>) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let mut base = watcher::Config::default().timeout(config.timeout_seconds).page_size(config.page_size);
    if config.from_apiserver_cache {
        // kube sends resourceVersion=0 only on an unpaged list: the cache answers in one piece.
        base = base.any_semantic();
        base.page_size = None;
    }
    let watch = Watch { shared, telemetry };
    tasks.spawn(watch.clone().run::<SlimNode>(Api::all(client.clone()), base.clone(), None));
    let scopes: Vec<Option<String>> =
        if config.namespaces.is_empty() { vec![None] } else { config.namespaces.iter().cloned().map(Some).collect() };
    for scope in scopes {
        let daemonsets: Api<DaemonSet> = scoped_api(&client, scope.as_deref());
        let revisions: Api<ControllerRevision> = scoped_api(&client, scope.as_deref());
        let pods: Api<SlimPod> = scoped_api(&client, scope.as_deref());
        tasks.spawn(watch.clone().run(daemonsets, base.clone(), scope.clone()));
        tasks.spawn(watch.clone().run(revisions, base.clone(), scope.clone()));
        let pod_config = base.clone().labels(&config.pod_selector);
        tasks.spawn(watch.clone().run(pods, pod_config, scope));
    }
    tasks
}

/// An `Api` for one namespace, or for all of them.
fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What a watch task reports to: the index and readiness, and the self-metrics.
#[derive(Clone)]
struct Watch {
    shared: Arc<Shared>,
    telemetry: Arc<Telemetry>,
}

impl Watch {
    /// Watch one resource forever. After any error the watch is restarted with a fresh list,
    /// after `Retry`'s delay, so that recovery is proven by a completed relist and anything
    /// deleted meanwhile disappears. An expired resourceVersion (410 Gone, after etcd
    /// compaction) is not counted as a failure; `Retry` says when it relists.
    async fn run<K>(self, api: Api<K>, config: watcher::Config, scope: Option<String>)
    where
        K: Indexed + kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let Watch { shared, telemetry } = self;
        let resource = K::RESOURCE;
        let namespace = scope.as_deref().unwrap_or("*");
        let health = shared.readiness.watch(resource);
        let mut retry = Retry::default();
        loop {
            let started = Instant::now();
            // The latest list data received, and when the list completed.
            let mut list_progress: Option<Instant> = None;
            let mut listed: Option<Instant> = None;
            let mut failure = None;
            let mut stream = pin!(watcher::watcher(api.clone(), config.clone()));
            while let Some(item) = stream.next().await {
                let event = match item {
                    Ok(event) => event,
                    Err(error) if is_expired(&error) => {
                        telemetry.record_expiry(resource);
                        break;
                    }
                    Err(error) => {
                        telemetry.record_error(resource);
                        health.failed();
                        failure = Some(error);
                        break;
                    }
                };
                let kind = EventType::of(&event);
                let now_ms = unix_ms();
                telemetry.record_event(resource, kind, now_ms);
                // The one clock read per event times the apply and marks the list's progress.
                let applying = Instant::now();
                if kind == EventType::InitApply {
                    list_progress = Some(applying);
                } else if kind == EventType::InitDone {
                    health.listed(now_ms);
                    (listed, list_progress) = (Some(applying), Some(applying));
                    tracing::info!(resource = resource.as_str(), namespace, took = ?(applying - started), "cache synced");
                }
                let result = shared.update(|index| {
                    index.set_now(now_ms / 1000);
                    index.apply_scoped(scope.as_deref(), event)
                });
                telemetry.apply_duration.observe(applying.elapsed().as_secs_f64());
                if kind == EventType::InitDone {
                    // The list's pages and decoded objects are garbage now: give them back at once.
                    crate::allocator::purge();
                }
                if let Err(error) = result {
                    telemetry.record_invalid(resource);
                    tracing::warn!(resource = resource.as_str(), %error, "ignoring object the exporter cannot read");
                }
            }
            let attempt = Attempt {
                listing: list_progress.map_or(Duration::ZERO, |at| at.duration_since(started)),
                watched: listed.map(|at| at.elapsed()),
            };
            let resource = resource.as_str();
            let delay = match failure {
                None => {
                    let delay = retry.after_expiry(attempt);
                    tracing::info!(resource, namespace, relist_in = ?delay, "watch expired (410 Gone); relisting");
                    delay
                }
                Some(error) => {
                    let delay = retry.after_failure(attempt);
                    let listing = attempt.listing;
                    tracing::error!(resource, namespace, %error, retry_in = ?delay, ?listing, "watch failed; serving the last known state");
                    delay
                }
            };
            tokio::time::sleep(delay).await;
        }
    }
}

/// The API server no longer has the resourceVersion the watch resumes from.
fn is_expired(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}
