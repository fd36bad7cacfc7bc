//! At start, with `--events`: read back the losses an earlier run told in its own `NodeLost`
//! Events (`index::restore`), so a restart neither forgets a node that is still without its
//! agent nor leaves a `NodeLost` open forever for one covered again while no exporter ran.
//!
//! Why Events: they are the one record an earlier run left, they say exactly what it told
//! (the verdict is in the annotations), and they expire with the API server's event TTL, as
//! the memory of a loss should. A loss told and already closed by a `Recovered` as new as it
//! is not taken back.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};

use super::notice::{Kind, MANAGED_BY, Notice, Subject, Target, Verdict};
use crate::index::{PastLoss, Restored};
use crate::model::Str;
use crate::rules::reason::Reason;
use crate::shared::Shared;

/// The losses the exporter's Events in `namespaces` (all when empty) tell and no later
/// `Recovered` closed.
pub async fn past_losses(client: &Client, namespaces: &[String]) -> Result<Vec<PastLoss>, kube::Error> {
    let apis: Vec<Api<Event>> = if namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        namespaces.iter().map(|namespace| Api::namespaced(client.clone(), namespace)).collect()
    };
    let ours = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let (mut lost, mut recovered) = (Vec::new(), HashMap::new());
    for api in &apis {
        for event in list(api, &ours, Kind::NodeLost).await? {
            lost.extend(past_loss(&event));
        }
        for event in list(api, &ours, Kind::Recovered).await? {
            if let Some(loss) = past_loss(&event).filter(|_| recovers_a_loss(&event)) {
                let at = recovered.entry(identity(&loss)).or_insert(loss.at);
                *at = (*at).max(loss.at);
            }
        }
    }
    lost.retain(|loss| recovered.get(&identity(loss)).is_none_or(|closed| *closed < loss.at));
    Ok(lost)
}

/// Take each past loss back into the index. Returns how many are lost still, and the
/// recoveries to tell, each with when the loss it closes was last told (unix ms), which
/// makes an earlier `Recovered` of the same verdict a repeat to count.
pub fn restore(shared: &Shared, past: &[PastLoss]) -> (usize, Vec<(Notice, i64)>) {
    shared.update(|index| {
        let (mut lost, mut recoveries) = (0, Vec::new());
        for loss in past {
            match index.restore_loss(loss) {
                Restored::Lost => lost += 1,
                Restored::Covered(id) => recoveries.push((recovery(loss, id), loss.at * 1000)),
                Restored::Moot => {}
            }
        }
        (lost, recoveries)
    })
}

async fn list(api: &Api<Event>, ours: &str, kind: Kind) -> Result<Vec<Event>, kube::Error> {
    let params = ListParams::default().labels(ours).fields(&format!("reason={}", kind.reason()));
    Ok(api.list(&params).await?.items)
}

/// The verdict in an Event's annotations (`Notice::annotations`), with when it last told
/// it; `None` for one that is not a loss's or lacks a part.
fn past_loss(event: &Event) -> Option<PastLoss> {
    let annotations = event.metadata.annotations.as_ref()?;
    let get = |name: &str| annotations.get(&format!("misschedule.io/{name}")).cloned();
    let at = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))?;
    Some(PastLoss {
        daemonset: event.involved_object.uid.clone()?,
        node: get("node")?,
        reason: Reason::from_name(&get("reason")?)?,
        key: get("key")?,
        manager: get("manager"),
        at: at.as_second(),
    })
}

/// A `Recovered` of a lost node, not of a misscheduled pod (the same annotations).
fn recovers_a_loss(event: &Event) -> bool {
    let annotations = event.metadata.annotations.as_ref();
    let of = annotations.and_then(|a| a.get("misschedule.io/recovered")).map(String::as_str);
    of == Some(Kind::NodeLost.reason())
}

fn identity(loss: &PastLoss) -> (String, String, Reason, String, Option<String>) {
    (loss.daemonset.clone(), loss.node.clone(), loss.reason, loss.key.clone(), loss.manager.clone())
}

/// The `Recovered` that closes `loss`: the notice `NodeLost`'s own recovery would be, so it
/// has the same name on every replica.
fn recovery(loss: &PastLoss, id: crate::model::ObjectRef) -> Notice {
    let node: Str = loss.node.as_str().into();
    Notice {
        kind: Kind::NodeLost,
        subject: Subject::Node { daemonset: loss.daemonset.as_str().into(), node: node.clone() },
        verdict: Verdict::Skip {
            reason: loss.reason,
            key: loss.key.as_str().into(),
            manager: loss.manager.as_deref().map(Str::from),
        },
        regarding: Target { id, uid: loss.daemonset.clone() },
        related: None,
        node,
        orphan: false,
        episode: 0,
        of: None,
        said: None,
        announce: true,
        index_may_be_behind: false,
    }
    .recovery()
}
