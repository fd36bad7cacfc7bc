//! What the edges report and readiness reads: watch counters and health, credential
//! reloads, the shared index behind one lock, and the one clock. The watchers and the HTTP
//! edge write here; `report::metrics` exposes it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kube::runtime::watcher::Event;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
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

/// A watch counts as failing until it has gone this long without an error. The watchers'
/// longest retry backoff is shorter (they assert it), so a watch that keeps failing never
/// looks healthy between attempts (a relist can complete, then the watch call is refused again).
pub const UNHEALTHY_AFTER_ERROR: Duration = Duration::from_secs(7);

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
    /// When each resource's watch last failed (unix milliseconds; 0 = never).
    last_error_ms: [AtomicI64; 4],
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
            last_error_ms: std::array::from_fn(|_| AtomicI64::new(0)),
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
    pub fn record_event(&self, resource: Resource, kind: EventType, now: Timestamp) {
        self.watch_events.get_or_create(&EventLabels { resource: resource.as_str(), r#type: kind.as_str() }).inc();
        self.last_event[resource as usize].store(now, Ordering::Relaxed);
    }

    pub fn record_error(&self, resource: Resource) {
        self.watch_errors.get_or_create(&resource_labels(resource)).inc();
        self.last_error_ms[resource as usize].store(unix_ms(), Ordering::Relaxed);
    }

    pub fn record_expiry(&self, resource: Resource) {
        self.watch_expiries.get_or_create(&resource_labels(resource)).inc();
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

    /// No watch error within `UNHEALTHY_AFTER_ERROR`.
    pub fn healthy(&self, resource: Resource) -> bool {
        let last_error = self.last_error_ms[resource as usize].load(Ordering::Relaxed);
        last_error == 0 || unix_ms() - last_error > UNHEALTHY_AFTER_ERROR.as_millis() as i64
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
