//! The DaemonSet controller's `FailedCreate` Events, watched with a field selector so the
//! API server sends only those: a handful, where the exporter's own watches send
//! thousands of objects. Optional: readiness never waits for it, and when RBAC refuses
//! Events the index is told once (nodes without a pod then say so) and the watch keeps
//! retrying with kube's backoff, in case the grant comes later.

use std::pin::pin;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::api::ListParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};

use crate::index::{FailedCreateEvent, Index};
use crate::shared::Shared;

/// Only the DaemonSet controller's refusals to create a pod (`RealPodControl.createPods`).
pub const FIELD_SELECTOR: &str = "involvedObject.kind=DaemonSet,reason=FailedCreate";

/// Watch `FailedCreate` Events in `namespace` (all when `None`) into the index, forever.
pub async fn run(client: Client, namespace: Option<String>, shared: Arc<Shared>) {
    let api: Api<CoreEvent> = match &namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    let config = watcher::Config::default().fields(FIELD_SELECTOR);
    let mut stream = pin!(watcher::watcher(api, config).default_backoff());
    let mut listing: Vec<FailedCreateEvent> = Vec::new();
    let mut refused = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(event)) => listing.extend(read(&event)),
            Ok(Event::InitDone) => {
                if refused {
                    tracing::info!("FailedCreate Events readable again");
                    refused = false;
                }
                shared.update(|index| index.reset_failed_creates(&listing));
                listing.clear();
            }
            Ok(Event::Apply(event)) => {
                if let Some(event) = read(&event) {
                    shared.update(|index| index.apply_failed_create(&event));
                }
            }
            Ok(Event::Delete(event)) => {
                if let Some(uid) = event.metadata.uid.as_deref() {
                    shared.update(|index| index.delete_failed_create(uid));
                }
            }
            Err(error) if forbidden(&error) => {
                if !refused {
                    tracing::warn!(
                        %error,
                        "cannot list Events: nodes where a DaemonSet cannot create its pod are shown without the controller's FailedCreate reason; grant list and watch on events"
                    );
                    refused = true;
                }
                shared.update(|index| index.failed_creates_refused());
            }
            Err(error) => tracing::debug!(%error, "FailedCreate Events watch failed; retrying"),
        }
    }
}

/// One list of the `FailedCreate` Events into `index`, for a one-shot answer: refused is
/// said (nodes without a pod then say so), any other failure leaves them unread.
pub async fn list_into(index: &mut Index, client: &Client, namespaces: &[String]) {
    let apis: Vec<Api<CoreEvent>> = if namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        namespaces.iter().map(|namespace| Api::namespaced(client.clone(), namespace)).collect()
    };
    let mut events = Vec::new();
    for api in apis {
        let mut params = ListParams::default().fields(FIELD_SELECTOR).limit(500);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(status)) if status.is_forbidden() => {
                    index.failed_creates_refused();
                    return;
                }
                Err(error) => {
                    tracing::debug!(%error, "cannot list FailedCreate Events: left unread");
                    return;
                }
            };
            events.extend(page.items.iter().filter_map(read));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    index.reset_failed_creates(&events);
}

fn forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.is_forbidden(),
        watcher::Error::WatchError(status) => status.is_forbidden(),
        _ => false,
    }
}

/// The parts the index keeps; `None` for an Event that names no DaemonSet UID.
fn read(event: &CoreEvent) -> Option<FailedCreateEvent> {
    let daemonset = event.involved_object.uid.clone().filter(|uid| !uid.is_empty())?;
    // The legacy recorder the controller uses sets lastTimestamp; events.k8s.io writers
    // set the series or eventTime instead.
    let at = event
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    let first = event.first_timestamp.as_ref().map(|t| t.0).or_else(|| event.event_time.as_ref().map(|t| t.0));
    Some(FailedCreateEvent {
        uid: event.metadata.uid.clone()?,
        daemonset,
        message: event.message.clone().unwrap_or_default(),
        at: at.as_second(),
        first: first.unwrap_or(at).as_second(),
    })
}
