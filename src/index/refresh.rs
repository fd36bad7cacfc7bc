//! A (DaemonSet, node) pair refreshed after a change: its misscheduled episode, its uncovered
//! entry and its loss, and what a pod that left it leaves behind.

use super::claimed::Claims;
use super::coverage::Verdict;
use super::keyed::Slot;
use super::node_ids::NodeId;
use super::uncovered::first_pod_available;
use super::{Index, Since};
use crate::model::{Pod, Str};

impl Index {
    /// Refresh each (DaemonSet, node) a pod change touched. `parting`: the pair whose last
    /// pod the change took (`Index::parting`); `gone`: that pod as it was, kept when it left
    /// an eligible node with no pod.
    pub(super) fn refresh_touched(
        &mut self,
        touched: impl IntoIterator<Item = ClaimsChanged>,
        parting: Option<Parting>,
        gone: Option<Box<Pod>>,
    ) {
        let since = self.since();
        let (mut parting, mut gone) = (parting, gone);
        for ClaimsChanged { owner, node, id } in touched {
            let leaves = parting.take_if(|p| p.owner == owner && p.id == id).map(|p| p.leaves);
            let verdict = match (leaves, self.states.get_mut(owner)) {
                // The pod left and nothing replaced it.
                (Some(leaves), Some(state)) if state.claims().get(id).is_none() => {
                    // The episode's pod is gone either way: explained now, or never.
                    state.flapped.remove(&node);
                    match leaves {
                        Leaves::ForSkip(verdict) => Some(verdict),
                        Leaves::Eligible => {
                            state.departed.extend(gone.take().map(|pod| (node.clone(), pod)));
                            None
                        }
                    }
                }
                _ => None,
            };
            self.refresh_pair(owner, (&node, Some(id)), since, verdict);
        }
    }

    /// Refresh the pair of the DaemonSet in slot `owner` and the node numbered `id`. `verdict`:
    /// the change took the pair's last pod for a skip. Without one, a node that turned out
    /// skipped after its pod went is a loss with the verdict that pod has there now.
    pub(super) fn refresh_pair(
        &mut self,
        owner: Slot,
        (node, id): (&Str, Option<NodeId>),
        since: Since,
        verdict: Option<Verdict>,
    ) {
        let verdict = verdict.or_else(|| self.departed_verdict(owner, (node, id)));
        // Every cached node has a number (`NodeIds`), which knows whether it is cached.
        let node_exists = self.node_ids.is_cached(id);
        let synced = self.synced();
        let min_ready = self.daemonsets.objects.at(owner).min_ready_seconds;
        let Some(state) = self.states.get_mut(owner) else { return };
        if synced {
            let (pods, now) = (&self.pods.objects, self.now);
            let covered =
                |claims: Claims| first_pod_available(id.and_then(|id| claims.get(id)).as_deref(), pods, min_ready, now);
            state.track_uncovered(id, node_exists, covered, since);
        }
        if state.refresh((node, id), node_exists, since, verdict) {
            self.loss_started(since);
        }
    }

    /// The verdict of the pod that left `node` while it was eligible, now that the
    /// DaemonSet skips the node and still has no pod there.
    fn departed_verdict(&self, owner: Slot, (node, id): (&Str, Option<NodeId>)) -> Option<Verdict> {
        let (pod, skip) = self.states.get(owner)?.departed_into_skip(node, id)?;
        let ds = Some(self.daemonsets.objects.at(owner)).filter(|ds| ds.is_synced_by_controller())?;
        let classification = self.classify(ds, skip, self.nodes.objects.get(node)?, pod);
        Some(Verdict::of(classification, pod.deletion().map(|d| d.requested_at())))
    }

    /// A loss was recorded at `since`: it is due to be forgotten after the retention.
    pub(super) fn loss_started(&mut self, since: Since) {
        let due = since.at.saturating_add(self.config.lost_retention);
        self.next_loss_expiry = Some(self.next_loss_expiry.map_or(due, |next| next.min(due)));
    }
}

/// A (DaemonSet, node) pair whose claimed pods changed, with the DaemonSet's slot in its store
/// and the node's number: a pod event reads them once, not once for each thing it refreshes.
pub(super) struct ClaimsChanged {
    pub(super) owner: Slot,
    pub(super) node: Str,
    pub(super) id: NodeId,
}

/// The last pod of a (DaemonSet, node) pair, about to go or move; the DaemonSet by its slot.
pub(super) struct Parting {
    pub(super) owner: Slot,
    pub(super) id: NodeId,
    pub(super) leaves: Leaves,
}

/// What the last pod of a pair leaves behind, as far as the index can tell yet.
pub(super) enum Leaves {
    /// The controller took it for a skip: a loss with this verdict, unless a pod replaces it.
    ForSkip(Verdict),
    /// It leaves a node the DaemonSet should run on, as far as the index knows.
    Eligible,
}
