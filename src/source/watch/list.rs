//! How a watch lists, first and at each relist: streamed where the server can
//! (`stream_list` says what its events mean), else in pages.

use std::pin::pin;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use kube::api::WatchParams;
use kube::runtime::watcher::Event;

use super::apply::MAX_BATCH;
use super::{Endpoint, Listed, Watch};
use crate::source::call_error::CallError;
use crate::source::request::{self, PageBuffers};
use crate::source::stream_list::{self, Initial, ListMode};
use crate::telemetry::ListedBy;

impl Watch {
    /// List into the index (Init, InitApply…, InitDone), streamed or in pages as `mode`
    /// says; the list's resourceVersion. In `Auto`, a server that cannot stream turns
    /// `mode` to `Pages`, said once in the log.
    pub(super) async fn list<K>(
        &self,
        endpoint: &Endpoint,
        scope: Option<&str>,
        idle: Duration,
        progress: &mut Option<Instant>,
        mode: &mut ListMode,
    ) -> Result<String, CallError>
    where
        K: Listed,
    {
        if *mode != ListMode::Pages {
            match self.stream::<K>(endpoint, scope, idle, progress).await {
                Ok(resource_version) => {
                    self.complete::<K>(scope, ListedBy::Stream);
                    return Ok(resource_version);
                }
                Err(error) if *mode == ListMode::Auto && stream_list::cannot_stream(&error) => {
                    tracing::info!(resource = K::RESOURCE.as_str(), namespace = scope.unwrap_or("*"), %error, "listing in pages from now on");
                    *mode = ListMode::Pages;
                }
                Err(error) => return Err(error),
            }
        }
        let resource_version = self.pages::<K>(endpoint, scope, idle, progress).await?;
        self.complete::<K>(scope, ListedBy::Pages);
        Ok(resource_version)
    }

    /// A list has all its objects: count it, then let the index take it in. Counted first,
    /// so that whoever sees the index synced (readiness) also sees the list counted.
    fn complete<K: Listed>(&self, scope: Option<&str>, listed_by: ListedBy) {
        self.telemetry.record_list(K::RESOURCE, listed_by);
        self.apply(scope, Event::<K>::InitDone);
    }

    /// A streaming list: a watch from "now" that sends every object first, applied as the
    /// list's objects until the bookmark that ends them (`complete` then ends the list). `NoStreaming` where the server
    /// answered as to a plain watch (its objects so far are dropped by the next `Init`).
    async fn stream<K>(
        &self,
        endpoint: &Endpoint,
        scope: Option<&str>,
        idle: Duration,
        progress: &mut Option<Instant>,
    ) -> Result<String, CallError>
    where
        K: Listed,
    {
        let params = WatchParams { send_initial_events: true, bookmarks: true, ..endpoint.watch.clone() };
        // An empty resourceVersion with NotOlderThan: a consistent read, as fresh as etcd.
        let events =
            request::watch::<K>(&self.client, &endpoint.url_path, &params, "", self.config.ask(), idle).await?;
        let mut events = pin!(events);
        self.apply(scope, Event::<K>::Init);
        // The objects there to take at once are applied together, and only then is the
        // clock read for `progress`: applying each on its own, with its clock reads, was a
        // tenth of the exporter's CPU to ready (perf). Those taken when the list fails go
        // with it, as the next `Init` drops those applied.
        let mut batch = Vec::new();
        loop {
            let ready = events.next().now_or_never();
            if ready.is_none() || batch.len() == MAX_BATCH {
                self.apply_list_batch(scope, &mut batch, progress);
            }
            let next = match ready {
                Some(next) => next,
                None => tokio::time::timeout(idle, events.next()).await.map_err(|_| CallError::Stalled(idle))?,
            };
            let event = match next {
                None => {
                    return Err(CallError::Cut(
                        "the streamed list ended before its initial-events-end bookmark".into(),
                    ));
                }
                Some(event) => event?,
            };
            match stream_list::initial(event)? {
                Initial::Object(object) => batch.push(Event::InitApply(object)),
                Initial::End(resource_version) => {
                    self.apply_batch(scope, &mut batch);
                    *progress = Some(Instant::now());
                    return Ok(resource_version);
                }
                Initial::Ignored(why) => {
                    *progress = Some(Instant::now());
                    return Err(CallError::NoStreaming(why.into()));
                }
            }
        }
    }

    /// Apply the list's objects taken so far, if any, and note that the list progressed.
    fn apply_list_batch<K: Listed>(
        &self,
        scope: Option<&str>,
        batch: &mut Vec<Event<K>>,
        progress: &mut Option<Instant>,
    ) {
        if !batch.is_empty() {
            self.apply_batch(scope, batch);
            *progress = Some(Instant::now());
        }
    }

    /// List every page into the index (Init, InitApply…; `complete` ends it); the list's
    /// resourceVersion.
    async fn pages<K>(
        &self,
        endpoint: &Endpoint,
        scope: Option<&str>,
        idle: Duration,
        progress: &mut Option<Instant>,
    ) -> Result<String, CallError>
    where
        K: Listed,
    {
        self.apply(scope, Event::<K>::Init);
        let mut params = endpoint.list.clone();
        let mut buffers = PageBuffers::default();
        let mut batch = Vec::new();
        loop {
            let (url_path, ask) = (&endpoint.url_path, self.config.ask());
            let page = request::list_page::<K>(&self.client, url_path, &params, ask, idle, &mut buffers).await?;
            *progress = Some(Instant::now());
            let mut objects = page.items.into_iter().map(Event::InitApply).peekable();
            while objects.peek().is_some() {
                batch.extend(objects.by_ref().take(MAX_BATCH));
                self.apply_batch(scope, &mut batch);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params.continue_token = Some(token),
                None => return Ok(page.metadata.resource_version.unwrap_or_default()),
            }
        }
    }
}
