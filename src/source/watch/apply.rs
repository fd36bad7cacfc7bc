//! Where a watch's events reach the shared index: each applied, counted and timed, and an
//! object the index cannot read left out and counted.

use std::time::Instant;

use kube::runtime::watcher::Event;

use super::Watch;
use crate::clock::unix_ms;
use crate::index::Indexed;
use crate::k8s::convert::ConvertError;
use crate::telemetry::EventType;

/// Events taken from a watch or a list before they are applied, at most: enough for their
/// lookups to overlap, few enough that no reader of the index waits long on the lock.
pub const MAX_BATCH: usize = 64;

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
            self.reject::<K>(error);
        }
    }

    /// Apply the events of one watch call that were there to take at once, in order, as
    /// `apply` would one by one, under one lock: the index looks up each event's cached
    /// object before applying any (`Index::warm`), so that those trips to memory overlap.
    /// Each event is counted; each is timed at the batch's mean. The batch is left empty
    /// with its buffer kept for the next: taken anew, each of a list's batches grew from
    /// nothing, moving the decoded objects (hundreds of bytes each) at every doubling.
    pub(super) fn apply_batch<K: Indexed>(&self, scope: Option<&str>, batch: &mut Vec<Event<K>>) {
        if batch.len() < 2 {
            return batch.drain(..).for_each(|event| self.apply(scope, event));
        }
        let (resource, now_ms, count) = (K::RESOURCE, unix_ms(), batch.len());
        // Counted by runs of one kind: a streamed list's batch is all of one.
        for run in batch.chunk_by(|a, b| EventType::of(a) == EventType::of(b)) {
            self.telemetry.record_events(resource, EventType::of(&run[0]), run.len() as u64, now_ms);
        }
        let applying = Instant::now();
        let rejected: Vec<_> = self.shared.update(|index| {
            index.set_now(now_ms / 1000);
            index.warm(batch);
            batch.drain(..).filter_map(|event| index.apply_scoped(scope, event).err()).collect()
        });
        let each = applying.elapsed().as_secs_f64() / count as f64;
        (0..count).for_each(|_| self.telemetry.apply_duration.observe(each));
        rejected.into_iter().for_each(|error| self.reject::<K>(error));
    }

    fn reject<K: Indexed>(&self, error: ConvertError) {
        self.telemetry.record_invalid(K::RESOURCE);
        tracing::warn!(resource = K::RESOURCE.as_str(), %error, "ignoring object the exporter cannot read");
    }
}
