//! `--events`: an Event (events.k8s.io/v1) regarding the DaemonSet for each new notice, so
//! `kubectl describe daemonset` answers the question. kube-runtime's recorder turns repeats
//! of one (DaemonSet, reason, action) within minutes into a series, keeping the first note;
//! so each verdict's (key, manager) gets its own recorder, and only a true repeat (a pod that
//! recovers and relapses the same way) becomes a series.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::notice::{self, Notice, Target};
use super::rate_limit::RateLimit;
use super::transitions::Transitions;
use crate::model::Str;
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

pub fn reporter() -> Reporter {
    Reporter {
        controller: "misschedule-exporter".into(),
        // The pod's name (the chart sets POD_NAME from the downward API), when known.
        instance: std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()),
    }
}

/// kube-runtime's recorder keeps a repeat's cache entry this long; an idle recorder is dropped after it.
const RECORDER_IDLE: Duration = Duration::from_secs(7 * 60);

/// One recorder per (key, manager), so a different cause is a new Event, not a series.
struct Recorders {
    client: Client,
    by_cause: HashMap<(Str, Option<Str>), (Recorder, Instant)>,
}

impl Recorders {
    fn for_notice(&mut self, notice: &Notice) -> &Recorder {
        let now = Instant::now();
        self.by_cause.retain(|_, (_, used)| now.duration_since(*used) < RECORDER_IDLE);
        let client = &self.client;
        let cause = (notice.verdict.key.clone(), notice.verdict.manager.clone());
        let entry = self.by_cause.entry(cause).or_insert_with(|| (Recorder::new(client.clone(), reporter()), now));
        entry.1 = now;
        &entry.0
    }
}

/// Publish Events until the task is dropped or the index is gone.
pub async fn run(client: Client, shared: Arc<Shared>, telemetry: Arc<Telemetry>) {
    let mut recorders = Recorders { client, by_cause: HashMap::new() };
    let mut transitions = Transitions::default();
    let started = Instant::now();
    let mut limit = RateLimit::new(BURST, PER_SECOND, 0.0);
    let mut generations = shared.generations(MIN_LOOK_INTERVAL);
    let mut deferred = false;
    let mut denied_reported = false;
    loop {
        if deferred {
            tokio::select! {
                generation = generations.next() => if generation.is_none() { return },
                () = tokio::time::sleep(RETRY_DEFERRED) => {}
            }
        } else if generations.next().await.is_none() {
            return;
        }
        let notices = {
            let index = shared.read();
            // Before the first sync the index is partial: pods would look misscheduled
            // only because their nodes have not been listed yet.
            if !index.synced() {
                continue;
            }
            notice::misscheduled(&index)
        };
        transitions.retain_current(&notices);
        deferred = false;
        let changed: Vec<Notice> = transitions.changed(&notices).into_iter().cloned().collect();
        for notice in &changed {
            if !limit.try_take(started.elapsed().as_secs_f64()) {
                telemetry.record_kube_event(KubeEventResult::RateLimited);
                deferred = true;
                break;
            }
            let result = publish(recorders.for_notice(notice), notice).await;
            if result == KubeEventResult::Forbidden && !denied_reported {
                tracing::error!(
                    "cannot write Events (RBAC forbids create on events.k8s.io events); --events needs it, \
                     e.g. the chart's events.enabled. The exporter keeps serving; no further Event is tried \
                     for the pods misscheduled now"
                );
                denied_reported = true;
            }
            telemetry.record_kube_event(result);
            // Sent, or failed for good: either way not tried again for this verdict.
            transitions.announced(notice);
        }
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

async fn publish(recorder: &Recorder, notice: &Notice) -> KubeEventResult {
    let event = Event {
        type_: EventType::Warning,
        reason: notice.kind.reason().into(),
        note: Some(notice.note()),
        action: notice.action().into(),
        secondary: notice.related.as_ref().map(|pod| reference("v1", "Pod", pod)),
    };
    let regarding = reference("apps/v1", "DaemonSet", &notice.regarding);
    match recorder.publish(&event, &regarding).await {
        Ok(()) => KubeEventResult::Sent,
        Err(kube::Error::Api(status)) if status.code == 403 => KubeEventResult::Forbidden,
        Err(error) => {
            tracing::warn!(%error, daemonset = %notice.regarding.id.name, node = %notice.node, "cannot write an Event");
            KubeEventResult::Failed
        }
    }
}
