//! Where a watch's events reach the shared index: each applied, counted and timed, and an
//! object the index cannot read left out and counted.

use std::time::Instant;

use kube::runtime::watcher::Event;

use super::Watch;
use crate::clock::unix_ms;
use crate::index::Indexed;
use crate::telemetry::EventType;

impl Watch {
    /// Apply one event to the index, counting it. An object that cannot be read is left
    /// out and counted; the watch goes on.
    pub(super) fn apply<K: Indexed>(&self, scope: Option<&str>, event: Event<K>) {
        let resource = K::RESOURCE;
        let kind = EventType::of(&event);
        let now_ms = unix_ms();
        self.telemetry.record_event(resource, kind, now_ms);
        if kind == EventType::InitDone {
            // Before the index takes in the list, too: the pages jemalloc keeps for its decay
            // second and what the index builds at once were most of an initial sync's peak.
            crate::allocator::purge();
        }
        let applying = Instant::now();
        let result = self.shared.update(|index| {
            index.set_now(now_ms / 1000);
            index.apply_scoped(scope, event)
        });
        self.telemetry.apply_duration.observe(applying.elapsed().as_secs_f64());
        if kind == EventType::InitDone {
            // The list's pages and decoded objects are garbage now: give them back at once.
            crate::allocator::purge();
        }
        if let Err(error) = result {
            self.telemetry.record_invalid(resource);
            tracing::warn!(resource = resource.as_str(), %error, "ignoring object the exporter cannot read");
        }
    }
}
