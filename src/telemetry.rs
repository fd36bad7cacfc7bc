//! What the edges report and readiness reads: watch counters and health, credential
//! reloads, the shared index behind one lock, and the one clock. The watchers and the HTTP
//! edge write here; `report::metrics` exposes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kube::runtime::watcher::Event;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::index::{Index, Resource};
use crate::model::Timestamp;

/// Unix time in milliseconds: the one clock the exporter reads.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Unix time in seconds, as the index stamps transitions.
pub fn unix_now() -> Timestamp {
    unix_ms() / 1000
}

/// After a failure, a watch counts as failing until it has run this long after a completed
/// relist. The state does not expire by itself, so no retry backoff, however long, can
/// turn a watch that keeps failing green between attempts.
pub const HEALTHY_AFTER_CLEAN: Duration = Duration::from_secs(5);

/// One watch's health (a resource has one watch per namespace when scoped), written by its
/// task alone through `Telemetry`.
#[derive(Debug)]
pub struct WatchHealth {
    resource: Resource,
    /// 0: no failure yet. `FAILING`: failed, and no list has completed since. Otherwise the
    /// unix milliseconds at which the first list after the last failure completed.
    clean_since_ms: AtomicI64,
}

const FAILING: i64 = -1;

impl WatchHealth {
    pub fn new(resource: Resource) -> Self {
        Self { resource, clean_since_ms: AtomicI64::new(0) }
    }

    fn failed(&self) {
        self.clean_since_ms.store(FAILING, Ordering::Relaxed);
    }

    /// A list completed: a failing watch starts proving itself (a later expiry's relist does
    /// not restart the proof).
    fn listed(&self, now_ms: i64) {
        let _ = self.clean_since_ms.compare_exchange(FAILING, now_ms, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn healthy_at(&self, now_ms: i64) -> bool {
        match self.clean_since_ms.load(Ordering::Relaxed) {
            0 => true,
            FAILING => false,
            since => now_ms - since >= HEALTHY_AFTER_CLEAN.as_millis() as i64,
        }
    }
}

/// A watch event's kind, as the `type` label of `misschedule_exporter_watch_events_total` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Init,
    InitApply,
    InitDone,
    Apply,
    Delete,
}

impl EventType {
    pub const ALL: [EventType; 5] = [Self::Init, Self::InitApply, Self::InitDone, Self::Apply, Self::Delete];

    pub fn of<K>(event: &Event<K>) -> Self {
        match event {
            Event::Init => Self::Init,
            Event::InitApply(_) => Self::InitApply,
            Event::InitDone => Self::InitDone,
            Event::Apply(_) => Self::Apply,
            Event::Delete(_) => Self::Delete,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Init => "init",
            Self::InitApply => "init_apply",
            Self::InitDone => "init_done",
            Self::Apply => "apply",
            Self::Delete => "delete",
        }
    }
}

/// Which credential files a reload concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialFile {
    Tls,
    Auth,
}

impl CredentialFile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls => "tls",
            Self::Auth => "auth",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub resource: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub resource: &'static str,
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FileLabels {
    pub file: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub file: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeEventLabels {
    pub result: &'static str,
}

/// What became of an Event the exporter meant to write (`--events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeEventResult {
    Sent,
    /// Over the rate limit; tried again in a later round.
    RateLimited,
    /// RBAC denies writing Events; not retried.
    Forbidden,
    Failed,
}

impl KubeEventResult {
    pub const ALL: [Self; 4] = [Self::Sent, Self::RateLimited, Self::Forbidden, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::RateLimited => "rate_limited",
            Self::Forbidden => "forbidden",
            Self::Failed => "failed",
        }
    }
}

/// Per-resource watch health and counters, written by the watch tasks, and credential
/// reloads, written by the HTTP edge.
#[derive(Debug)]
pub struct Telemetry {
    pub watch_events: Family<EventLabels, Counter>,
    pub watch_errors: Family<ResourceLabels, Counter>,
    pub watch_expiries: Family<ResourceLabels, Counter>,
    pub invalid_objects: Family<ResourceLabels, Counter>,
    pub apply_duration: Histogram,
    pub reloads: Family<ReloadLabels, Counter>,
    /// 1 while the files on disk are unusable and the previous credentials serve.
    pub reload_failing: Family<FileLabels, Gauge>,
    pub kube_events: Family<KubeEventLabels, Counter>,
    /// Every watch, by resource.
    watches: [Mutex<Vec<Arc<WatchHealth>>>; 4],
    last_event: [AtomicI64; 4],
}

fn resource_labels(resource: Resource) -> ResourceLabels {
    ResourceLabels { resource: resource.as_str() }
}

impl Default for Telemetry {
    fn default() -> Self {
        let telemetry = Self {
            watch_events: Family::default(),
            watch_errors: Family::default(),
            watch_expiries: Family::default(),
            invalid_objects: Family::default(),
            // 1µs .. ~1s
            apply_duration: Histogram::new(exponential_buckets(1e-6, 4.0, 11)),
            reloads: Family::default(),
            reload_failing: Family::default(),
            kube_events: Family::default(),
            watches: std::array::from_fn(|_| Mutex::new(Vec::new())),
            last_event: std::array::from_fn(|_| AtomicI64::new(0)),
        };
        // Counters exist at zero from the start, so rate() and alerts see "none yet", not "no data".
        for resource in Resource::ALL {
            for kind in EventType::ALL {
                telemetry
                    .watch_events
                    .get_or_create_owned(&EventLabels { resource: resource.as_str(), r#type: kind.as_str() });
            }
            telemetry.watch_errors.get_or_create_owned(&resource_labels(resource));
            telemetry.watch_expiries.get_or_create_owned(&resource_labels(resource));
            telemetry.invalid_objects.get_or_create_owned(&resource_labels(resource));
        }
        for file in [CredentialFile::Tls, CredentialFile::Auth] {
            telemetry.reload_failing.get_or_create_owned(&FileLabels { file: file.as_str() });
            for result in ["success", "failure"] {
                telemetry.reloads.get_or_create_owned(&ReloadLabels { file: file.as_str(), result });
            }
        }
        for result in KubeEventResult::ALL {
            telemetry.kube_events.get_or_create_owned(&KubeEventLabels { result: result.as_str() });
        }
        telemetry
    }
}

impl Telemetry {
    /// A new watch of `resource`, healthy until it fails; readiness reads every watch.
    pub fn watch(&self, resource: Resource) -> Arc<WatchHealth> {
        let health = Arc::new(WatchHealth::new(resource));
        self.watches[resource as usize].lock().push(health.clone());
        health
    }

    pub fn record_event(&self, watch: &WatchHealth, kind: EventType, now_ms: i64) {
        let resource = watch.resource;
        self.watch_events.get_or_create(&EventLabels { resource: resource.as_str(), r#type: kind.as_str() }).inc();
        self.last_event[resource as usize].store(now_ms / 1000, Ordering::Relaxed);
        if kind == EventType::InitDone {
            watch.listed(now_ms);
        }
    }

    pub fn record_error(&self, watch: &WatchHealth) {
        self.watch_errors.get_or_create(&resource_labels(watch.resource)).inc();
        watch.failed();
    }

    pub fn record_expiry(&self, watch: &WatchHealth) {
        self.watch_expiries.get_or_create(&resource_labels(watch.resource)).inc();
    }

    pub fn record_invalid(&self, resource: Resource) {
        self.invalid_objects.get_or_create(&resource_labels(resource)).inc();
    }

    pub fn record_reload(&self, file: CredentialFile, success: bool) {
        let result = if success { "success" } else { "failure" };
        self.reloads.get_or_create(&ReloadLabels { file: file.as_str(), result }).inc();
        self.reload_failing.get_or_create(&FileLabels { file: file.as_str() }).set(i64::from(!success));
    }

    pub fn record_kube_event(&self, result: KubeEventResult) {
        self.kube_events.get_or_create(&KubeEventLabels { result: result.as_str() }).inc();
    }

    /// Every watch of the resource is healthy (see `HEALTHY_AFTER_CLEAN`); true without any.
    pub fn healthy(&self, resource: Resource) -> bool {
        let now_ms = unix_ms();
        self.watches[resource as usize].lock().iter().all(|w| w.healthy_at(now_ms))
    }

    /// Registers the counters, histograms and reload gauges; the gauges read from the index
    /// are `report::metrics`'s.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "misschedule_exporter_watch_events",
            "Watch events received, by resource and event type",
            self.watch_events.clone(),
        );
        registry.register(
            "misschedule_exporter_watch_errors",
            "Failed watch or list calls, by resource; each is followed by a backoff and a relist",
            self.watch_errors.clone(),
        );
        registry.register(
            "misschedule_exporter_watch_expiries",
            "Watches whose resourceVersion had expired (410 Gone), each followed by an immediate relist; not a failure",
            self.watch_expiries.clone(),
        );
        registry.register(
            "misschedule_exporter_invalid_objects",
            "Objects the exporter could not read (logged with their name) and left out",
            self.invalid_objects.clone(),
        );
        registry.register(
            "misschedule_exporter_classification_duration_seconds",
            "Time to apply one watch event to the index, re-classifying what it touches",
            self.apply_duration.clone(),
        );
        registry.register(
            "misschedule_exporter_credential_reloads",
            "Changed TLS certificate or auth secret files picked up (success) or refused (failure; the previous ones stay in use)",
            self.reloads.clone(),
        );
        registry.register(
            "misschedule_exporter_credential_reload_failing",
            "1 while the TLS or auth files on disk are unusable and the previous credentials stay in use",
            self.reload_failing.clone(),
        );
        registry.register(
            "misschedule_exporter_kube_events",
            "Kubernetes Events about misscheduled pods (--events), by result: sent, rate_limited (retried later), forbidden (RBAC; not retried), failed",
            self.kube_events.clone(),
        );
    }

    /// Unix seconds of the resource's last watch event; 0 if none yet (or no watch at all).
    pub fn last_event(&self, resource: Resource) -> Timestamp {
        self.last_event[resource as usize].load(Ordering::Relaxed)
    }
}

/// What the watch tasks, the HTTP edge and the collectors share: the index behind one lock,
/// and the telemetry. The index is only ever mutated through methods that leave it
/// consistent, and parking_lot's locks do not poison, so a panic elsewhere cannot take
/// `/metrics` down with it.
#[derive(Debug, Default)]
pub struct Shared {
    index: RwLock<Index>,
    pub telemetry: Telemetry,
}

impl Shared {
    pub fn new(index: Index) -> Self {
        Self { index: RwLock::new(index), telemetry: Telemetry::default() }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read()
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write()
    }

    pub fn into_index(self) -> Index {
        self.index.into_inner()
    }

    /// Readiness: the resources that have not listed yet or whose watch is failing.
    pub fn not_ready(&self) -> Vec<Resource> {
        let index = self.read();
        Resource::ALL.into_iter().filter(|&r| !index.is_synced(r) || !self.telemetry.healthy(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN_MS: i64 = HEALTHY_AFTER_CLEAN.as_millis() as i64;

    #[test]
    fn a_watch_is_healthy_until_it_fails() {
        let watch = WatchHealth::new(Resource::Pods);
        assert!(watch.healthy_at(1_000));
        watch.listed(1_000);
        assert!(watch.healthy_at(1_001), "a first list has nothing to prove");
    }

    #[test]
    fn a_failed_watch_stays_failing_through_any_backoff() {
        let watch = WatchHealth::new(Resource::Pods);
        watch.failed();
        assert!(!watch.healthy_at(1_000));
        assert!(!watch.healthy_at(i64::MAX), "no time window turns it green");
    }

    #[test]
    fn a_failed_watch_recovers_once_clean_for_long_enough_after_its_list() {
        let watch = WatchHealth::new(Resource::Pods);
        watch.failed();
        watch.listed(10_000);
        assert!(!watch.healthy_at(10_000));
        assert!(!watch.healthy_at(10_000 + CLEAN_MS - 1));
        assert!(watch.healthy_at(10_000 + CLEAN_MS));
        // A later relist (an expiry) does not restart the proof...
        watch.listed(10_000 + CLEAN_MS);
        assert!(watch.healthy_at(10_000 + CLEAN_MS));
        // ...but a failure does, however long the watch had been clean.
        watch.failed();
        assert!(!watch.healthy_at(10_000 + 10 * CLEAN_MS));
        watch.listed(20_000 * CLEAN_MS);
        assert!(!watch.healthy_at(20_000 * CLEAN_MS + 1));
    }

    #[test]
    fn a_resource_is_healthy_only_when_every_namespace_watch_is() {
        let telemetry = Telemetry::default();
        assert!(telemetry.healthy(Resource::Pods), "no watch at all (snapshot mode)");
        let a = telemetry.watch(Resource::Pods);
        let b = telemetry.watch(Resource::Pods);
        telemetry.record_error(&a);
        // Another namespace's relist proves nothing about this one.
        telemetry.record_event(&b, EventType::InitDone, unix_ms() - 2 * CLEAN_MS);
        assert!(!telemetry.healthy(Resource::Pods));
        assert!(telemetry.healthy(Resource::Nodes));
        telemetry.record_event(&a, EventType::InitDone, unix_ms() - 2 * CLEAN_MS);
        assert!(telemetry.healthy(Resource::Pods));
        assert_eq!(telemetry.watch_errors.get_or_create(&resource_labels(Resource::Pods)).get(), 1);
    }
}
