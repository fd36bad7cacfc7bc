//! One watch call: its events taken as they come, and applied in batches of those that are
//! there to take at once.

use std::pin::{Pin, pin};
use std::time::Instant;

use futures::{FutureExt, Stream, StreamExt};
use kube::api::WatchEvent;
use kube::runtime::watcher::Event;

use super::apply::MAX_BATCH;
use super::{Cursor, Endpoint, Listed, Watch};
use crate::clock::unix_ms;
use crate::source::call_error::CallError;
use crate::source::request;

impl Watch {
    /// One watch call: apply its events until the server closes it (`Ok`) or it fails.
    pub(super) async fn call<K>(
        &self,
        endpoint: &Endpoint,
        scope: Option<&str>,
        cursor: &mut Cursor<'_>,
    ) -> Result<(), CallError>
    where
        K: Listed,
    {
        let (version, idle) = (&cursor.resource_version, cursor.silence.limit());
        let events =
            request::watch::<K>(&self.client, &endpoint.url_path, &endpoint.watch, version, self.config.ask(), idle)
                .await?;
        let mut events = pin!(events);
        // Events already decoded are applied together (see `Watch::apply_batch`); whatever
        // ends the call, those taken before it are applied before it returns.
        let mut batch = Vec::new();
        let ended = self.take_events(endpoint, events.as_mut(), scope, cursor, &mut batch).await;
        self.apply_batch(scope, &mut batch);
        ended
    }

    /// Takes the events of one watch call into `batch`, applying it whenever no more are
    /// there to take at once, until the server closes the watch (`Ok`) or it fails.
    async fn take_events<K: Listed>(
        &self,
        endpoint: &Endpoint,
        mut events: Pin<&mut impl Stream<Item = Result<WatchEvent<K>, CallError>>>,
        scope: Option<&str>,
        cursor: &mut Cursor<'_>,
        batch: &mut Vec<Event<K>>,
    ) -> Result<(), CallError> {
        // Last heard, and nudges since; one timer for the nudge or the stall, whichever is first.
        // `heard` is read from the clock before a wait, not at every event: clock reads were
        // 2% of the exporter's CPU to ready on a streamed list (perf), one per event of them.
        let (mut heard, mut nudges, mut heard_since) = (Instant::now(), 0, false);
        loop {
            let ready = if batch.is_empty() { None } else { events.next().now_or_never() };
            if ready.is_none() && !batch.is_empty() {
                self.apply_batch(scope, batch);
            }
            if ready.is_none() && std::mem::take(&mut heard_since) {
                (heard, nudges) = (Instant::now(), 0);
            }
            let (limit, every) = (cursor.silence.limit(), cursor.silence.nudge_every());
            let (stall_at, nudge_at) = (heard + limit, heard + every * (nudges + 1));
            let next = match ready {
                Some(next) => next,
                None => tokio::select! {
                    // An event that is there is taken before the timer is armed: arming and
                    // dropping it for each event of a streamed list cost more than the wait.
                    biased;
                    next = events.next() => next,
                    () = tokio::time::sleep_until(stall_at.min(nudge_at).into()) => {
                        if nudge_at >= stall_at {
                            return Err(CallError::Stalled(limit));
                        }
                        self.nudge::<K>(endpoint, every);
                        nudges += 1;
                        continue;
                    }
                },
            };
            heard_since = true;
            let (event, version) = match next {
                None => return Ok(()),
                Some(Err(error)) => return Err(error),
                // The index never reads a resource version: taken, not copied.
                Some(Ok(WatchEvent::Added(mut object) | WatchEvent::Modified(mut object))) => {
                    let version = object.meta_mut().resource_version.take();
                    (Some(Event::Apply(object)), version)
                }
                Some(Ok(WatchEvent::Deleted(mut object))) => {
                    let version = object.meta_mut().resource_version.take();
                    (Some(Event::Delete(object)), version)
                }
                Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                    cursor.silence.bookmark(cursor.started.elapsed());
                    (None, Some(bookmark.metadata.resource_version))
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    return Err(CallError::WatchStatus { code: status.code, message: status.message });
                }
            };
            cursor.progressed = true;
            if let Some(health) = cursor.proof.take() {
                health.listed(unix_ms());
            }
            if let Some(version) = version.filter(|v| !v.is_empty()) {
                cursor.resource_version = version;
            }
            if let Some(event) = event {
                batch.push(event);
                if batch.len() == MAX_BATCH {
                    self.apply_batch(scope, batch);
                }
            }
        }
    }
}
