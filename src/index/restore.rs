//! Losses an earlier run told: after a restart the index knows no loss (a lost node looks
//! like one the DaemonSet never wanted), but the exporter's own `NodeLost` Events, while
//! the API server keeps them (an hour by default), say which nodes it saw lose their pod.
//! Each is taken back when the node is still as the Event left it (skipped, without a
//! pod), or reported covered so a `Recovered` can close it. Fed by `publish::restore`.

use super::coverage::{Loss, Verdict};
use super::{Index, Since};
use crate::model::{ObjectRef, Timestamp};
use crate::rules::reason::Reason;

/// A loss one of the exporter's `NodeLost` Events tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastLoss {
    /// The DaemonSet's UID (the Event's `involvedObject`).
    pub daemonset: String,
    pub node: String,
    pub reason: Reason,
    pub key: String,
    pub manager: Option<String>,
    /// When the Event last told it (unix seconds): the latest loss it counts.
    pub at: Timestamp,
}

/// What became of a past loss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restored {
    /// Still lost: the index holds it again.
    Lost,
    /// The DaemonSet (this one) wants the node and has a pod there: the loss ended while no
    /// exporter watched.
    Covered(ObjectRef),
    /// Nothing to say: the DaemonSet or the node is gone, the pod came back while still
    /// skipped (misscheduled, told as such), the index already knew the loss, or the node
    /// is wanted and still without a pod (uncovered, told as such).
    Moot,
}

impl Index {
    /// Take back `past` if it still holds. Counters are not touched: they restarted with
    /// the process, and `increase()` reads them as such.
    pub fn restore_loss(&mut self, past: &PastLoss) -> Restored {
        let Some(slot) = self.daemonsets.objects.slot(past.daemonset.as_str()) else { return Restored::Moot };
        let ds = self.daemonsets.objects.at(slot);
        if !ds.is_synced_by_controller() || !self.nodes.objects.contains_key(past.node.as_str()) {
            return Restored::Moot;
        }
        let id = ds.id.clone();
        let Some(state) = self.states.get_mut(slot) else { return Restored::Moot };
        let skipped = state.skips().get(&self.node_ids, &past.node).is_some();
        let has_pod = state.pods_on(&self.node_ids, &past.node).is_some();
        match (skipped, has_pod) {
            (true, false) if !state.lost.contains_key(past.node.as_str()) => {
                let node = self.interner.str(&past.node);
                let verdict = Verdict {
                    reason: past.reason,
                    key: self.interner.str(&past.key),
                    manager: past.manager.as_deref().map(|m| self.interner.str(m)),
                    deletion_requested: Some(past.at),
                };
                // Not seen live: `at` is when the earlier run told it, the evidence there is.
                let since = Since { at: past.at, observed: false, generation: self.generation };
                state.lost.insert(node, Loss { verdict, since });
                self.generation += 1;
                self.loss_started(since);
                Restored::Lost
            }
            (false, true) => Restored::Covered(id),
            _ => Restored::Moot,
        }
    }
}
