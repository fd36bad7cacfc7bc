//! The DaemonSet controller's `FailedCreate` Events: why it cannot make a pod. The Event
//! names the DaemonSet, not the node (the refusal is the same for every node it tries),
//! so the index keeps the last one per DaemonSet and the view lends it to each node that
//! has no pod. Fed by `source::failed_creates` when the exporter may read Events.

use super::Index;
use crate::model::{Str, Timestamp};
use crate::rules::uncovered::create_detail;

/// Whether the `FailedCreate` Events could be read: what a node without a pod can say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventsRead {
    /// Not read at all (a snapshot, or not yet listed).
    #[default]
    No,
    /// The API server refused to list them (RBAC).
    Refused,
    /// Listed and watched.
    Watching,
}

/// A DaemonSet's last `FailedCreate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedCreate {
    /// `rules::uncovered::create_detail` of the Event's message.
    pub detail: Str,
    /// When the controller last wrote it (unix seconds).
    pub at: Timestamp,
    /// When it first did: the node has been refused since then at least.
    pub first: Timestamp,
}

/// One `FailedCreate` Event as the source reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedCreateEvent {
    /// The Event's own UID: a delete names it.
    pub uid: String,
    /// The DaemonSet's UID (`involvedObject.uid`).
    pub daemonset: String,
    pub message: String,
    /// When the controller last wrote it, and first (unix seconds).
    pub at: Timestamp,
    pub first: Timestamp,
}

impl Index {
    /// A `FailedCreate` Event was written or updated (the recorder counts repeats on one).
    pub fn apply_failed_create(&mut self, event: &FailedCreateEvent) {
        let detail = self.interner.str(&create_detail(&event.message));
        let daemonset = self.interner.str(&event.daemonset);
        let newer = self.failed_create_events.get(&daemonset).is_none_or(|(_, last)| last.at <= event.at);
        if newer {
            let uid = self.interner.str(&event.uid);
            self.failed_create_events
                .insert(daemonset, (uid, FailedCreate { detail, at: event.at, first: event.first.min(event.at) }));
            self.generation += 1;
        }
    }

    /// A `FailedCreate` Event expired (the API server keeps Events an hour by default).
    pub fn delete_failed_create(&mut self, event_uid: &str) {
        let before = self.failed_create_events.len();
        self.failed_create_events.retain(|_, (uid, _)| &**uid != event_uid);
        if self.failed_create_events.len() != before {
            self.generation += 1;
        }
    }

    /// A relist: exactly these Events exist.
    pub fn reset_failed_creates(&mut self, events: &[FailedCreateEvent]) {
        self.failed_create_events.clear();
        for event in events {
            self.apply_failed_create(event);
        }
        self.events_read = EventsRead::Watching;
        self.generation += 1;
    }

    /// The API server refused to list Events: what was read is kept, and said to be old.
    pub fn failed_creates_refused(&mut self) {
        if self.events_read != EventsRead::Refused {
            self.events_read = EventsRead::Refused;
            self.generation += 1;
        }
    }

    /// The last `FailedCreate` of the DaemonSet with UID `daemonset`, if one is known.
    pub(super) fn failed_create(&self, daemonset: &Str) -> Option<&FailedCreate> {
        self.failed_create_events.get(daemonset).map(|(_, last)| last)
    }

    pub fn events_read(&self) -> EventsRead {
        self.events_read
    }
}
