//! The exporter's own metrics (`misschedule_exporter_*`), all registered by
//! [`Telemetry::register`]: counters the edges bump (watch events and failures, credential
//! reloads, Events written), and gauges read at scrape time from the shared index and
//! readiness.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::guard::{self, Verdict};
use crate::index::Resource;
use crate::report::format::gauges;
use crate::shared::Shared;

mod labels;

use self::labels::{
    AdmissionLabels, ErrorLabels, EventLabels, FileLabels, KubeEventLabels, ListLabels, ReloadLabels, ResourceLabels,
    resource_labels,
};
pub use self::labels::{CredentialFile, EventType, KubeEventResult, ListedBy, WatchFailure};

/// The counters and histograms the edges write: the watch tasks, the HTTP edge's credential
/// reloads and the Event publisher.
#[derive(Debug)]
pub struct Telemetry {
    watch_events: Family<EventLabels, Counter>,
    watch_errors: Family<ErrorLabels, Counter>,
    watch_stalls: Family<ResourceLabels, Counter>,
    watch_expiries: Family<ResourceLabels, Counter>,
    lists: Family<ListLabels, Counter>,
    invalid_objects: Family<ResourceLabels, Counter>,
    pub apply_duration: Histogram,
    reloads: Family<ReloadLabels, Counter>,
    /// 1 while the files on disk are unusable and the previous credentials serve.
    reload_failing: Family<FileLabels, Gauge>,
    kube_events: Family<KubeEventLabels, Counter>,
    admission_reviews: Family<AdmissionLabels, Counter>,
    admission_duration: Histogram,
    /// Unix seconds of each resource's last watch event: a plain store per event, read by
    /// the collector, rather than a family lookup on the hot path.
    last_event: Arc<[AtomicI64; 4]>,
}

impl Default for Telemetry {
    fn default() -> Self {
        let telemetry = Self {
            watch_events: Family::default(),
            watch_errors: Family::default(),
            watch_stalls: Family::default(),
            watch_expiries: Family::default(),
            lists: Family::default(),
            invalid_objects: Family::default(),
            // 1µs .. ~1s
            apply_duration: Histogram::new(exponential_buckets(1e-6, 4.0, 11)),
            reloads: Family::default(),
            reload_failing: Family::default(),
            kube_events: Family::default(),
            admission_reviews: Family::default(),
            // 100µs .. ~1.6s: a node change costs microseconds, a DaemonSet change at the
            // largest scale tens of milliseconds; the API server waits 3 s at most.
            admission_duration: Histogram::new(exponential_buckets(1e-4, 4.0, 8)),
            last_event: Arc::new(std::array::from_fn(|_| AtomicI64::new(0))),
        };
        // Series exist at zero from the start, so rate() and alerts see "none yet", not "no data".
        for resource in Resource::ALL {
            for kind in EventType::ALL {
                telemetry
                    .watch_events
                    .get_or_create_owned(&EventLabels { resource: resource.as_str(), r#type: kind.as_str() });
            }
            for family in [&telemetry.watch_stalls, &telemetry.watch_expiries, &telemetry.invalid_objects] {
                family.get_or_create_owned(&resource_labels(resource));
            }
            for mode in ListedBy::ALL {
                telemetry.lists.get_or_create_owned(&ListLabels { resource: resource.as_str(), mode: mode.as_str() });
            }
            for reason in WatchFailure::COUNTED {
                telemetry
                    .watch_errors
                    .get_or_create_owned(&ErrorLabels { resource: resource.as_str(), reason: reason.as_str() });
            }
        }
        for file in [CredentialFile::Tls, CredentialFile::Auth, CredentialFile::WebhookTls] {
            telemetry.reload_failing.get_or_create_owned(&FileLabels { file: file.as_str() });
            for result in ["success", "failure"] {
                telemetry.reloads.get_or_create_owned(&ReloadLabels { file: file.as_str(), result });
            }
        }
        for result in KubeEventResult::ALL {
            telemetry.kube_events.get_or_create_owned(&KubeEventLabels { result: result.as_str() });
        }
        for resource in guard::RESOURCES {
            for verdict in Verdict::ALL {
                telemetry
                    .admission_reviews
                    .get_or_create_owned(&AdmissionLabels { resource, verdict: verdict.as_str() });
            }
        }
        telemetry
    }
}

impl Telemetry {
    pub fn record_event(&self, resource: Resource, kind: EventType, now_ms: i64) {
        self.record_events(resource, kind, 1, now_ms);
    }

    /// `count` events of one kind, received together.
    pub fn record_events(&self, resource: Resource, kind: EventType, count: u64, now_ms: i64) {
        let labels = EventLabels { resource: resource.as_str(), r#type: kind.as_str() };
        self.watch_events.get_or_create(&labels).inc_by(count);
        self.last_event[resource as usize].store(now_ms / 1000, Ordering::Relaxed);
    }

    /// A failed watch or list call; a stall counts in `watch_stalls_total` instead.
    pub fn record_failure(&self, resource: Resource, failure: WatchFailure) {
        if failure == WatchFailure::Stalled {
            self.watch_stalls.get_or_create(&resource_labels(resource)).inc();
        } else {
            let labels = ErrorLabels { resource: resource.as_str(), reason: failure.as_str() };
            self.watch_errors.get_or_create(&labels).inc();
        }
    }

    pub fn record_expiry(&self, resource: Resource) {
        self.watch_expiries.get_or_create(&resource_labels(resource)).inc();
    }

    /// A list (the first, or a relist) completed.
    pub fn record_list(&self, resource: Resource, mode: ListedBy) {
        self.lists.get_or_create(&ListLabels { resource: resource.as_str(), mode: mode.as_str() }).inc();
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

    /// One AdmissionReview answered by the guard, and how long the answer took.
    pub fn record_admission(&self, resource: &'static str, verdict: Verdict, seconds: f64) {
        self.admission_reviews.get_or_create(&AdmissionLabels { resource, verdict: verdict.as_str() }).inc();
        self.admission_duration.observe(seconds);
    }

    /// Registers every self-metric: these counters, and the gauges read from `shared` at
    /// scrape time.
    pub fn register(&self, registry: &mut Registry, shared: Arc<Shared>) {
        registry.register(
            "misschedule_exporter_watch_events",
            "Watch events received, by resource and event type",
            self.watch_events.clone(),
        );
        registry.register(
            "misschedule_exporter_watch_errors",
            "Failed watch or list calls, by resource and reason (throttled, unavailable, refused, unreachable, cut, ended_early, malformed); each is followed by a backoff and a relist",
            self.watch_errors.clone(),
        );
        registry.register(
            "misschedule_exporter_watch_stalls",
            "Watches closed because nothing, not even a bookmark, arrived for --watch-stall-seconds (or the call's timeout where the API server sends no periodic bookmarks); each is followed by a backoff and a relist",
            self.watch_stalls.clone(),
        );
        registry.register(
            "misschedule_exporter_watch_expiries",
            "Watches whose resourceVersion had expired (410 Gone), each followed by an immediate relist; not a failure",
            self.watch_expiries.clone(),
        );
        registry.register(
            "misschedule_exporter_lists",
            "Completed lists, the first and each relist, by resource and how they came: stream (a streaming list from the API server's watch cache) or pages (--list-mode)",
            self.lists.clone(),
        );
        registry.register(
            "misschedule_exporter_invalid_objects",
            "Objects the exporter could not read (logged with their name) and left out",
            self.invalid_objects.clone(),
        );
        registry.register(
            "misschedule_exporter_classification_duration_seconds",
            "Time to apply one watch event to the index, re-classifying what it touches; events applied together in a batch each count the batch's mean",
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
            "Kubernetes Events about misscheduled pods (--events), by result: sent, exists (written already by another replica or before a restart), rate_limited and unavailable (retried later), forbidden (RBAC; not retried), failed",
            self.kube_events.clone(),
        );
        registry.register(
            "misschedule_exporter_admission_reviews",
            "AdmissionReviews the guard answered (--webhook-listen), by resource and verdict: allowed (nothing moves), warned, denied (a DaemonSet with misschedule.io/guard: deny), unsynced (let through unchecked)",
            self.admission_reviews.clone(),
        );
        registry.register(
            "misschedule_exporter_admission_review_duration_seconds",
            "Time to answer one AdmissionReview, from the decoded request to the encoded answer",
            self.admission_duration.clone(),
        );
        registry.register_collector(Box::new(StateGauges { shared, last_event: self.last_event.clone() }));
    }
}

/// The gauges read at scrape time: from the shared index and readiness, and when each
/// resource's last event came.
#[derive(Debug)]
struct StateGauges {
    shared: Arc<Shared>,
    last_event: Arc<[AtomicI64; 4]>,
}

impl Collector for StateGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let (objects, synced) = {
            let index = self.shared.read();
            (Resource::ALL.map(|r| index.len(r) as i64), Resource::ALL.map(|r| i64::from(index.is_synced(r))))
        };
        let by_resource =
            |values: [i64; 4]| Resource::ALL.into_iter().zip(values).map(|(r, v)| (resource_labels(r), v));
        gauges(
            &mut encoder,
            "misschedule_exporter_cache_objects",
            "Objects in the exporter's cache, by resource",
            by_resource(objects),
        )?;
        gauges(
            &mut encoder,
            "misschedule_exporter_cache_synced",
            "1 once the resource's cache has completed its initial list",
            by_resource(synced),
        )?;
        gauges(
            &mut encoder,
            "misschedule_exporter_watch_healthy",
            "0 while the resource's watch is failing, until a relist has been watched cleanly for a few seconds (the cache meanwhile serves the last known state)",
            by_resource(Resource::ALL.map(|r| i64::from(self.shared.readiness.healthy(r)))),
        )?;
        gauges(
            &mut encoder,
            "misschedule_exporter_last_event_timestamp_seconds",
            "When the last watch event for the resource arrived (unix seconds; 0 if none yet)",
            by_resource(Resource::ALL.map(|r| self.last_event[r as usize].load(Ordering::Relaxed))),
        )?;
        gauges(
            &mut encoder,
            "misschedule_exporter_build_info",
            "Build information: the version, the source revision and the compiler",
            [(
                [
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("revision", env!("MISSCHEDULE_REVISION")),
                    ("rustc", env!("MISSCHEDULE_RUSTC")),
                ],
                1,
            )],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;

    #[test]
    fn every_self_metric_is_registered_once_and_starts_at_zero() {
        let telemetry = Telemetry::default();
        let mut registry = Registry::default();
        telemetry.register(&mut registry, Arc::new(Shared::new(Index::default())));
        telemetry.record_failure(Resource::Pods, WatchFailure::Throttled);
        telemetry.record_failure(Resource::Nodes, WatchFailure::Stalled);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for family in [
            "watch_events",
            "watch_errors",
            "watch_stalls",
            "watch_expiries",
            "lists",
            "invalid_objects",
            "classification_duration_seconds",
            "credential_reloads",
            "credential_reload_failing",
            "kube_events",
            "admission_reviews",
            "admission_review_duration_seconds",
            "last_event_timestamp_seconds",
            "cache_objects",
            "cache_synced",
            "watch_healthy",
            "build_info",
        ] {
            let help = format!("# HELP misschedule_exporter_{family} ");
            assert_eq!(text.matches(&help).count(), 1, "{family}: {text}");
        }
        let errors = |labels: &str| format!("misschedule_exporter_watch_errors_total{{{labels}}} ");
        assert!(text.contains(&(errors("resource=\"pods\",reason=\"throttled\"") + "1")), "{text}");
        assert!(text.contains(&(errors("resource=\"pods\",reason=\"cut\"") + "0")), "{text}");
        assert!(!text.contains("reason=\"stalled\""), "{text}");
        assert!(text.contains("misschedule_exporter_watch_stalls_total{resource=\"nodes\"} 1"), "{text}");
        assert!(text.contains("misschedule_exporter_cache_synced{resource=\"pods\"} 0"), "{text}");
        assert!(text.contains("misschedule_exporter_lists_total{resource=\"nodes\",mode=\"stream\"} 0"), "{text}");
        assert!(text.contains("misschedule_exporter_last_event_timestamp_seconds{resource=\"pods\"} 0"), "{text}");
    }
}
