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

use crate::index::Indexed;
use crate::telemetry::{EventType, Shared, UNHEALTHY_AFTER_ERROR, unix_now};

/// Objects per list page unless configured: kube's watcher default.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

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

/// Start every watch. The tasks run until the set is dropped.
pub fn spawn_all(client: Client, config: &WatchConfig, shared: Arc<Shared>) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let mut base = watcher::Config::default().timeout(config.timeout_seconds).page_size(config.page_size);
    if config.from_apiserver_cache {
        // kube sends resourceVersion=0 only on an unpaged list: the cache answers in one piece.
        base = base.any_semantic();
        base.page_size = None;
    }
    tasks.spawn(run::<SlimNode>(Api::all(client.clone()), base.clone(), None, shared.clone()));
    let scopes: Vec<Option<String>> =
        if config.namespaces.is_empty() { vec![None] } else { config.namespaces.iter().cloned().map(Some).collect() };
    for scope in scopes {
        let daemonsets: Api<DaemonSet> = scoped_api(&client, scope.as_deref());
        let revisions: Api<ControllerRevision> = scoped_api(&client, scope.as_deref());
        let pods: Api<SlimPod> = scoped_api(&client, scope.as_deref());
        tasks.spawn(run(daemonsets, base.clone(), scope.clone(), shared.clone()));
        tasks.spawn(run(revisions, base.clone(), scope.clone(), shared.clone()));
        let pod_config = base.clone().labels(&config.pod_selector);
        tasks.spawn(run(pods, pod_config, scope, shared.clone()));
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

const MIN_BACKOFF: Duration = Duration::from_millis(500);
/// Short enough to resync within seconds of the API server coming back; failed
/// calls are cheap. An attempt that runs cleanly for twice this long resets it.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
// A watch that keeps failing must not look healthy between attempts.
const _: () = assert!(MAX_BACKOFF.as_millis() < UNHEALTHY_AFTER_ERROR.as_millis());

/// Watch one resource forever. After any error the watch is restarted with a
/// fresh list (after a backoff), so that recovery is proven by a completed
/// relist and anything deleted meanwhile disappears. An expired resourceVersion
/// (410 Gone, after etcd compaction) is routine: it relists at once and is not
/// counted as a failure.
async fn run<K>(api: Api<K>, config: watcher::Config, scope: Option<String>, shared: Arc<Shared>)
where
    K: Indexed + kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let resource = K::RESOURCE;
    let mut backoff = MIN_BACKOFF;
    loop {
        let attempt = Instant::now();
        let mut expired = false;
        let mut stream = pin!(watcher::watcher(api.clone(), config.clone()));
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(error) if is_expired(&error) => {
                    shared.telemetry.record_expiry(resource);
                    tracing::info!(
                        resource = resource.as_str(),
                        namespace = scope.as_deref().unwrap_or("*"),
                        "watch expired (410 Gone); relisting"
                    );
                    expired = true;
                    break;
                }
                Err(error) => {
                    shared.telemetry.record_error(resource);
                    tracing::error!(
                        resource = resource.as_str(),
                        namespace = scope.as_deref().unwrap_or("*"),
                        %error,
                        retry_in = ?backoff,
                        "watch failed; serving the last known state"
                    );
                    break;
                }
            };
            let kind = EventType::of(&event);
            if kind == EventType::InitDone {
                tracing::info!(
                    resource = resource.as_str(),
                    namespace = scope.as_deref().unwrap_or("*"),
                    "cache synced"
                );
            }
            let now = unix_now();
            shared.telemetry.record_event(resource, kind, now);
            let started = Instant::now();
            let result = {
                let mut index = shared.write();
                index.set_now(now);
                index.apply_scoped(scope.as_deref(), event)
            };
            shared.telemetry.apply_duration.observe(started.elapsed().as_secs_f64());
            if let Err(error) = result {
                shared.telemetry.record_invalid(resource);
                tracing::warn!(resource = resource.as_str(), %error, "ignoring object the exporter cannot read");
            }
        }
        // A completed relist is no proof of health (the watch call after it may be refused):
        // only an attempt that ran cleanly for a while resets the backoff.
        if attempt.elapsed() > MAX_BACKOFF * 2 {
            backoff = MIN_BACKOFF;
        }
        if expired {
            continue;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
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
