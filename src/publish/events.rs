//! `--events`: a Warning Event (events.k8s.io/v1, reason `Misscheduled`) regarding the
//! DaemonSet and related to the pod, when a pod becomes misscheduled or its verdict
//! changes, so `kubectl describe daemonset` answers the question. kube-runtime's recorder
//! turns repeats of one (DaemonSet, pod, action) within minutes into a series, keeping the
//! first note; so each (key, manager) gets its own recorder, and only a true repeat (a pod
//! that recovers and relapses the same way) becomes a series.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::report::explain::{self, PodRow};
use crate::report::transitions::{RateLimit, Transitions, action, note};
use crate::telemetry::{KubeEventResult, Shared, unix_now};

/// How often the index's generation is compared (cheap when nothing changed); a verdict
/// that lasts longer than this reaches the DaemonSet.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// Events at once, then per second, across all DaemonSets: a drained node pool must not
/// become a burst of API writes.
const BURST: u32 = 20;
const PER_SECOND: f64 = 2.0;

/// The Event's reason: what `kubectl get events --field-selector reason=Misscheduled` finds.
pub const REASON: &str = "Misscheduled";

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
    by_cause: HashMap<(String, String), (Recorder, Instant)>,
}

impl Recorders {
    fn for_row(&mut self, row: &PodRow) -> &Recorder {
        let now = Instant::now();
        self.by_cause.retain(|_, (_, used)| now.duration_since(*used) < RECORDER_IDLE);
        let client = &self.client;
        let entry = self
            .by_cause
            .entry((row.key.clone(), row.manager.clone()))
            .or_insert_with(|| (Recorder::new(client.clone(), reporter()), now));
        entry.1 = now;
        &entry.0
    }
}

/// Publish Events until the task is dropped.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let mut recorders = Recorders { client, by_cause: HashMap::new() };
    let mut transitions = Transitions::default();
    let started = Instant::now();
    let mut limit = RateLimit::new(BURST, PER_SECOND, 0.0);
    let mut looked_at = None;
    let mut deferred = false;
    let mut denied_reported = false;
    let mut ticks = tokio::time::interval(LOOK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let rows = {
            let index = shared.read();
            // Before the first sync the index is partial: pods would look misscheduled
            // only because their nodes have not been listed yet.
            if !index.synced() || (looked_at == Some(index.generation()) && !deferred) {
                continue;
            }
            looked_at = Some(index.generation());
            explain::explain(&index, &[], None, unix_now()).misscheduled
        };
        transitions.retain_current(&rows);
        deferred = false;
        let changed: Vec<PodRow> = transitions.changed(&rows).into_iter().cloned().collect();
        for row in &changed {
            if !limit.try_take(started.elapsed().as_secs_f64()) {
                shared.telemetry.record_kube_event(KubeEventResult::RateLimited);
                deferred = true;
                break;
            }
            let result = publish(recorders.for_row(row), row).await;
            if result == KubeEventResult::Forbidden && !denied_reported {
                tracing::error!(
                    "cannot write Events (RBAC forbids create on events.k8s.io events); --events needs it, \
                     e.g. the chart's events.enabled. The exporter keeps serving; no further Event is tried \
                     for the pods misscheduled now"
                );
                denied_reported = true;
            }
            shared.telemetry.record_kube_event(result);
            // Sent, or failed for good: either way not tried again for this verdict.
            transitions.announced(row);
        }
    }
}

async fn publish(recorder: &Recorder, row: &PodRow) -> KubeEventResult {
    let event = Event {
        type_: EventType::Warning,
        reason: REASON.into(),
        note: Some(note(row)),
        action: action(&row.reason),
        secondary: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(row.namespace.clone()),
            name: Some(row.pod.clone()),
            uid: Some(row.pod_uid.clone()),
            ..ObjectReference::default()
        }),
    };
    let regarding = ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("DaemonSet".into()),
        namespace: Some(row.namespace.clone()),
        name: Some(row.daemonset.clone()),
        uid: Some(row.daemonset_uid.clone()),
        ..ObjectReference::default()
    };
    match recorder.publish(&event, &regarding).await {
        Ok(()) => KubeEventResult::Sent,
        Err(kube::Error::Api(status)) if status.code == 403 => KubeEventResult::Forbidden,
        Err(error) => {
            tracing::warn!(%error, daemonset = %row.daemonset, pod = %row.pod, "cannot write an Event");
            KubeEventResult::Failed
        }
    }
}
