//! Readiness: each watch's health, written by its task, read by `/readyz`, the page and the
//! self-metrics. A flag the watches set, as kubert's admin server reads one.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::unix_ms;
use crate::index::Resource;

/// After a failure, a watch counts as failing until it has run this long after a completed
/// relist. The state does not expire by itself, so no retry backoff, however long, can
/// turn a watch that keeps failing green between attempts.
pub const HEALTHY_AFTER_CLEAN: Duration = Duration::from_secs(5);

/// One watch's health (a resource has one watch per namespace when scoped), written by its
/// task alone.
#[derive(Debug)]
pub struct WatchHealth {
    /// 0: no failure yet. `FAILING`: failed, and no list has completed since. Otherwise the
    /// unix milliseconds at which the first list after the last failure completed.
    clean_since_ms: AtomicI64,
    /// What the last failure was, in one line: what `/readyz`, `/explain` and the page say.
    last_failure: Mutex<String>,
}

const FAILING: i64 = -1;

impl WatchHealth {
    fn new() -> Self {
        Self { clean_since_ms: AtomicI64::new(0), last_failure: Mutex::new(String::new()) }
    }

    /// The watch failed, for `why` (one line).
    pub fn failed(&self, why: &str) {
        *self.last_failure.lock() = why.to_owned();
        self.clean_since_ms.store(FAILING, Ordering::Relaxed);
    }

    /// A list completed: a failing watch starts proving itself (a later expiry's relist does
    /// not restart the proof).
    pub fn listed(&self, now_ms: i64) {
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

/// Every watch's health, by resource.
#[derive(Debug, Default)]
pub struct Readiness {
    watches: [Mutex<Vec<Arc<WatchHealth>>>; 4],
}

impl Readiness {
    /// A new watch of `resource`, healthy until it fails; readiness reads every watch.
    pub fn watch(&self, resource: Resource) -> Arc<WatchHealth> {
        let health = Arc::new(WatchHealth::new());
        self.watches[resource as usize].lock().push(health.clone());
        health
    }

    /// Every watch of the resource is healthy (see `HEALTHY_AFTER_CLEAN`); true without any.
    pub fn healthy(&self, resource: Resource) -> bool {
        let now_ms = unix_ms();
        self.watches[resource as usize].lock().iter().all(|w| w.healthy_at(now_ms))
    }

    /// Why the resource's watch is failing: the last failure of one that is not healthy.
    pub fn failure(&self, resource: Resource) -> Option<String> {
        let now_ms = unix_ms();
        let watches = self.watches[resource as usize].lock();
        watches.iter().find(|w| !w.healthy_at(now_ms)).map(|w| w.last_failure.lock().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN_MS: i64 = HEALTHY_AFTER_CLEAN.as_millis() as i64;

    #[test]
    fn a_watch_is_healthy_until_it_fails() {
        let watch = WatchHealth::new();
        assert!(watch.healthy_at(1_000));
        watch.listed(1_000);
        assert!(watch.healthy_at(1_001), "a first list has nothing to prove");
    }

    #[test]
    fn a_failed_watch_stays_failing_through_any_backoff() {
        let watch = WatchHealth::new();
        watch.failed("x");
        assert!(!watch.healthy_at(1_000));
        assert!(!watch.healthy_at(i64::MAX), "no time window turns it green");
    }

    #[test]
    fn a_failed_watch_recovers_once_clean_for_long_enough_after_its_list() {
        let watch = WatchHealth::new();
        watch.failed("x");
        watch.listed(10_000);
        assert!(!watch.healthy_at(10_000));
        assert!(!watch.healthy_at(10_000 + CLEAN_MS - 1));
        assert!(watch.healthy_at(10_000 + CLEAN_MS));
        // A later relist (an expiry) does not restart the proof...
        watch.listed(10_000 + CLEAN_MS);
        assert!(watch.healthy_at(10_000 + CLEAN_MS));
        // ...but a failure does, however long the watch had been clean.
        watch.failed("x");
        assert!(!watch.healthy_at(10_000 + 10 * CLEAN_MS));
        watch.listed(20_000 * CLEAN_MS);
        assert!(!watch.healthy_at(20_000 * CLEAN_MS + 1));
    }

    #[test]
    fn a_resource_is_healthy_only_when_every_namespace_watch_is() {
        let readiness = Readiness::default();
        assert!(readiness.healthy(Resource::Pods), "no watch at all (snapshot mode)");
        let a = readiness.watch(Resource::Pods);
        let b = readiness.watch(Resource::Pods);
        a.failed("refused");
        // Another namespace's relist proves nothing about this one.
        b.listed(unix_ms() - 2 * CLEAN_MS);
        assert!(!readiness.healthy(Resource::Pods));
        assert_eq!(readiness.failure(Resource::Pods).as_deref(), Some("refused"));
        assert_eq!(readiness.failure(Resource::Nodes), None);
        assert!(readiness.healthy(Resource::Nodes));
        a.listed(unix_ms() - 2 * CLEAN_MS);
        assert!(readiness.healthy(Resource::Pods));
    }
}
