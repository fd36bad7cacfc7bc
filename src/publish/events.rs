//! `--events`: an Event regarding the DaemonSet for each new notice, so `kubectl describe
//! daemonset` answers the question.
//!
//! Written through core/v1 with both clocks: `eventTime` and the series for events.k8s.io
//! readers, `firstTimestamp`, `lastTimestamp` and `count` for core/v1 ones, which is what
//! `kubectl describe` sorts by (an Event without them is listed before all others).
//! events.k8s.io/v1 refuses the deprecated fields on create, so it cannot carry both.
//!
//! Warning for what needs someone, Normal for what the fix calls expected (a drain, a
//! DaemonSet change) and for a recovery: a pod that may run on its node again, a lost node
//! covered again.
//!
//! Exactly one Event object per (pod or lost node, verdict), across replicas and restarts: its name is
//! derived from them (`Notice::event_name`), so a replica that comes second, or a restarted
//! exporter, gets AlreadyExists from the API server and writes nothing. A true repeat (the
//! pod recovered and relapsed the same way, seen by this process) becomes the Event's
//! series instead, once: a replica that finds the series already past the recovery it saw
//! leaves it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSeries, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::look::Looks;
use super::notice::{self, Notice, Target};
use super::rate_limit::RateLimit;
use super::restore;
use super::transitions::Transitions;
use crate::clock::unix_ms;
use crate::shared::Shared;
use crate::telemetry::{KubeEventResult, Telemetry};

/// The index is looked at on each new generation, at most this often: a verdict that
/// lasts longer than this reaches the DaemonSet, and churn cannot make the publisher spin.
const MIN_LOOK_INTERVAL: Duration = Duration::from_millis(200);
/// Events at once, then per second, across all DaemonSets: a drained node pool must not
/// become a burst of API writes.
const BURST: u32 = 20;
const PER_SECOND: f64 = 2.0;
/// Deferred Events are tried again this soon, when a token is back, if nothing changes first.
const RETRY_DEFERRED: Duration = Duration::from_millis(500);
/// Recoveries waiting for the rate limit, at most: beyond, a mass recovery (a DaemonSet
/// reverted over a whole pool) is told by the metrics and the page alone.
const MAX_PENDING_RECOVERIES: usize = 10_000;
/// The Events' `reportingController`.
pub const CONTROLLER: &str = "misschedule-exporter";

/// The Events' `reportingInstance`: the pod's name (the chart sets POD_NAME from the
/// downward API), else the host's.
fn instance() -> String {
    ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| CONTROLLER.into())
}

/// Publish Events until the task is dropped or the index is gone. `namespaces`: where the
/// exporter watches (all when empty), where an earlier run's Events are read back.
pub async fn run(client: Client, namespaces: Vec<String>, shared: Arc<Shared>, telemetry: Arc<Telemetry>) {
    let mut sender = Sender {
        writer: Writer { client, instance: instance() },
        limit: RateLimit::new(BURST, PER_SECOND, 0.0),
        started: Instant::now(),
        telemetry,
        denied_reported: false,
    };
    let mut looks = Looks::default();
    let mut generations = shared.generations(MIN_LOOK_INTERVAL);
    let mut deferred = false;
    // Recoveries seen and not yet written (throttled): a recovery is seen once, when its
    // subject goes, so it waits here rather than being lost.
    let mut recoveries: VecDeque<Notice> = VecDeque::new();
    let mut restored = false;
    loop {
        // A look with nothing new in the index: a deferred Event's token may be back, or a
        // held notice's or a gone subject's time is up (`settle`).
        let now = unix_ms();
        let due = looks.next_look_ms(now).map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)));
        let again = if deferred { Some(due.map_or(RETRY_DEFERRED, |d| d.min(RETRY_DEFERRED))) } else { due };
        match again {
            Some(again) => tokio::select! {
                generation = generations.next() => if generation.is_none() { return },
                () = tokio::time::sleep(again) => {}
            },
            None => {
                if generations.next().await.is_none() {
                    return;
                }
            }
        }
        // Before the first sync the index is partial: pods would look misscheduled only
        // because their nodes have not been listed yet.
        if !shared.read().synced() {
            continue;
        }
        if !restored {
            restored = true;
            take_back(&sender.writer.client, &namespaces, &shared, &mut looks.transitions, &mut recoveries).await;
        }
        let look = looks.look(&shared.read(), unix_ms());
        let room = MAX_PENDING_RECOVERIES.saturating_sub(recoveries.len());
        recoveries.extend(look.recoveries.into_iter().take(room));
        deferred = false;
        // Recoveries first: they are older news than anything `changed` holds.
        while let Some(recovery) = recoveries.front() {
            if sender.send(recovery, looks.transitions.ended_at(recovery.event_id())).await == Sent::Later {
                deferred = true;
                break;
            }
            recoveries.pop_front();
        }
        if deferred {
            continue;
        }
        for notice in &look.changed {
            if sender.send(notice, looks.transitions.ended_at(notice.event_id())).await == Sent::Later {
                deferred = true;
                break;
            }
            looks.transitions.announced(notice, unix_ms());
        }
    }
}

/// Once, at the first sync: the losses an earlier run told, taken back into the index, and
/// the recoveries it could not tell queued.
async fn take_back(
    client: &Client,
    namespaces: &[String],
    shared: &Shared,
    transitions: &mut Transitions,
    recoveries: &mut VecDeque<Notice>,
) {
    match restore::past_losses(client, namespaces).await {
        Ok(past) => {
            let (lost, covered) = restore::restore(shared, &past);
            tracing::info!(told = past.len(), lost, covered = covered.len(), "read back the losses earlier runs told");
            for (recovery, lost_at_ms) in covered {
                transitions.ended_before(recovery.event_id(), lost_at_ms);
                recoveries.push_back(recovery);
            }
        }
        Err(error) => tracing::warn!(
            %error,
            "cannot read back the losses earlier runs told in Events (list on events): lost nodes are known from what this run sees"
        ),
    }
}

/// What became of one Event this round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    /// Written, written before, or failed for good: not tried again for this verdict.
    Settled,
    /// No token, or the API server throttles or is unavailable: this round stops here and
    /// the Event is tried again in a later one.
    Later,
}

/// Writes Events within the rate limit and counts what became of each.
struct Sender {
    writer: Writer,
    limit: RateLimit,
    started: Instant,
    telemetry: Arc<Telemetry>,
    denied_reported: bool,
}

impl Sender {
    async fn send(&mut self, notice: &Notice, ended_ms: Option<i64>) -> Sent {
        if !self.limit.try_take(self.started.elapsed().as_secs_f64()) {
            self.telemetry.record_kube_event(KubeEventResult::RateLimited);
            return Sent::Later;
        }
        let result = self.writer.write(notice, ended_ms).await;
        if result == KubeEventResult::Forbidden && !self.denied_reported {
            tracing::error!(
                "cannot write Events (RBAC forbids create on core events); --events needs it, \
                 e.g. the chart's events.enabled. The exporter keeps serving; no Event is tried again \
                 for what is known now"
            );
            self.denied_reported = true;
        }
        self.telemetry.record_kube_event(result);
        if result == KubeEventResult::Unavailable { Sent::Later } else { Sent::Settled }
    }
}

fn reference(api_version: &str, kind: &str, target: &Target) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: Some(target.id.namespace.to_string()),
        name: Some(target.id.name.to_string()),
        uid: Some(target.uid.clone()),
        ..ObjectReference::default()
    }
}

/// A Node is cluster-scoped; the name is enough to find it.
fn node_reference(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        ..ObjectReference::default()
    }
}

/// Writes Events with the exporter's identity.
struct Writer {
    client: Client,
    instance: String,
}

impl Writer {
    /// Write `notice`'s Event. `ended_ms`: when this process saw the same verdict end
    /// before, which makes an existing Event of that name a repeat to count.
    async fn write(&self, notice: &Notice, ended_ms: Option<i64>) -> KubeEventResult {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &notice.regarding.id.namespace);
        let name = notice.event_name();
        let now = now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([(notice::MANAGED_BY.0.to_owned(), notice::MANAGED_BY.1.to_owned())].into()),
                annotations: Some(notice.annotations()),
                ..ObjectMeta::default()
            },
            event_time: Some(now.clone()),
            first_timestamp: Some(Time(now.0)),
            last_timestamp: Some(Time(now.0)),
            count: Some(1),
            type_: Some(notice.event_type().into()),
            reason: Some(notice.kind.reason().into()),
            action: Some(notice.action().into()),
            message: Some(notice.note()),
            involved_object: reference("apps/v1", "DaemonSet", &notice.regarding),
            related: Some(match &notice.related {
                Some(pod) => reference("v1", "Pod", pod),
                None => node_reference(&notice.node),
            }),
            reporting_component: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            source: Some(EventSource { component: Some(CONTROLLER.into()), host: None }),
            ..Event::default()
        };
        let result = match events.create(&PostParams::default(), &event).await {
            Ok(_) => Ok(KubeEventResult::Sent),
            Err(kube::Error::Api(status)) if status.code == 409 => match ended_ms {
                // Another replica, or this exporter before a restart, wrote it.
                None => Ok(KubeEventResult::Exists),
                Some(ended_ms) => repeat(&events, &name, ended_ms, now).await,
            },
            Err(error) => Err(error),
        };
        result.unwrap_or_else(|error| failed(&error, notice))
    }
}

/// Count a repeat on the existing Event `name`, unless a replica already did since the
/// verdict ended at `ended_ms`. The patch carries the resourceVersion it read, so two
/// replicas racing count it once.
async fn repeat(
    events: &Api<Event>,
    name: &str,
    ended_ms: i64,
    now: MicroTime,
) -> Result<KubeEventResult, kube::Error> {
    let existing = events.get(name).await?;
    let last_seen =
        existing.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).or(existing.event_time.as_ref());
    if last_seen.is_some_and(|t| t.0.as_millisecond() >= ended_ms) {
        return Ok(KubeEventResult::Exists);
    }
    let count = existing.series.as_ref().and_then(|s| s.count).map_or(2, |n| n + 1);
    let patch = json!({
        "metadata": {"resourceVersion": existing.metadata.resource_version},
        "lastTimestamp": Time(now.0),
        "count": count,
        "series": EventSeries { count: Some(count), last_observed_time: Some(now) },
    });
    match events.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(KubeEventResult::Sent),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(KubeEventResult::Exists),
        Err(error) => Err(error),
    }
}

fn failed(error: &kube::Error, notice: &Notice) -> KubeEventResult {
    match error {
        kube::Error::Api(status) if status.code == 403 => KubeEventResult::Forbidden,
        kube::Error::Api(status) if status.code == 429 || status.code >= 500 => KubeEventResult::Unavailable,
        error => {
            tracing::warn!(%error, daemonset = %notice.regarding.id.name, node = %notice.node, "cannot write an Event");
            KubeEventResult::Failed
        }
    }
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}
