//! The uncovered nodes: where a DaemonSet should run and its first pod is not available,
//! or there is none (`rules::uncovered` names why). Found once when the index first syncs,
//! then moved by each event through `Index::refresh_pair` and the node and DaemonSet
//! impls; the clock moves the generation when a reason moves with time.

use super::daemonset_state::DaemonSetState;
use super::keyed::{Keyed, Slot};
use super::node_ids::NodeIds;
use super::{Index, Since};
use crate::model::{Node, Pod, Str, Timestamp};
use crate::rules::uncovered::is_available;

impl Index {
    /// A digest of every DaemonSet's uncovered nodes by reason: it moves when a reason
    /// does. Costs what the uncovered nodes cost, none when there are none.
    pub(super) fn uncovered_reasons(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        if self.states.values().all(|s| s.uncovered().is_empty()) {
            return 0;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for view in self.daemonsets() {
            if !view.state.uncovered().is_empty() {
                (&view.ds.uid, view.uncovered_nodes_by_reason()).hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    /// Every DaemonSet's uncovered nodes, from scratch: once, when the index first syncs.
    /// One pass over the pods finds the nodes whose pods are not available (few); the nodes
    /// with no pod at all are looked for only where a DaemonSet counts fewer than it wants.
    pub(super) fn find_uncovered(&mut self) {
        // When they became uncovered is not known: the pods' own status says.
        let since = Since { observed: false, ..self.since() };
        let daemonsets = &self.daemonsets.objects;
        let min_ready = |owner: Slot| daemonsets.at(owner).min_ready_seconds;
        let unavailable: Vec<(Slot, Str)> = self
            .pods
            .objects
            .values()
            .filter_map(|pod| {
                let owner = pod.controller_uid().or_else(|| self.adopted_by.get(&pod.uid))?;
                let owner = daemonsets.slot(owner)?;
                if is_available(pod.health(), pod.health_since(), min_ready(owner), self.now) {
                    return None;
                }
                Some((owner, pod.target_node()?.clone()))
            })
            .collect();
        for (owner, node) in unavailable {
            let min_ready = min_ready(owner);
            let Some(state) = self.states.get_mut(owner) else { continue };
            let Some(pods) = state.pods_on(&self.node_ids, &node) else { continue };
            let covered = first_pod_available(Some(&*pods), &self.pods.objects, min_ready, self.now);
            let id = self.node_ids.get(&node);
            state.track_uncovered(id, self.node_ids.is_cached(id), |_| covered, since);
        }
        for state in self.states.values_mut() {
            track_missing(state, &self.nodes.objects, &self.node_ids, since);
        }
    }

    /// The nodes whose pods became available by the clock alone: Ready for longer than
    /// their DaemonSet's `minReadySeconds` now. Once a second, over those DaemonSets'
    /// uncovered nodes only.
    pub(super) fn mature_uncovered(&mut self) {
        for (slot, ds) in self.daemonsets.objects.slotted() {
            let Some(state) = self.states.get_mut(slot) else { continue };
            let min_ready = ds.min_ready_seconds;
            if min_ready == 0 || state.uncovered().is_empty() {
                continue;
            }
            let before = state.uncovered().len();
            let (pods, now) = (&self.pods.objects, self.now);
            state.retain_uncovered(|claims, id| !first_pod_available(claims.get(id).as_deref(), pods, min_ready, now));
            if state.uncovered().len() != before {
                self.generation += 1;
            }
        }
    }

    /// One DaemonSet's uncovered nodes, from scratch: its placement or selector changed,
    /// which can move any node.
    pub(super) fn track_uncovered_everywhere(&mut self, uid: &Str, since: Since) {
        let Some(slot) = self.daemonsets.objects.slot(uid) else { return };
        let min_ready = self.daemonsets.objects.at(slot).min_ready_seconds;
        let Some(state) = self.states.get_mut(slot) else { return };
        state.uncovered_mut().clear();
        let pods = &self.pods.objects;
        let claimed: Vec<(Str, bool)> = state
            .claimed_nodes(&self.node_ids)
            .map(|(node, claimed)| (node.clone(), first_pod_available(Some(&*claimed), pods, min_ready, self.now)))
            .collect();
        for (node, covered) in claimed {
            let id = self.node_ids.get(&node);
            state.track_uncovered(id, self.node_ids.is_cached(id), |_| covered, since);
        }
        track_missing(state, &self.nodes.objects, &self.node_ids, since);
    }
}

/// The pod `updateDaemonSetStatus` looks at on a node: the oldest claimed one, in the
/// order `DaemonSetView::pods_on` lists them.
pub(super) fn first_pod<'p>(claimed: Option<&[Slot]>, pods: &'p Keyed<Pod>) -> Option<&'p Pod> {
    let pods = claimed.into_iter().flatten().map(|&slot| pods.at(slot));
    pods.min_by(|a, b| (a.created(), &a.id).cmp(&(b.created(), &b.id)))
}

/// `updateDaemonSetStatus` counts a node available when its oldest daemon pod is
/// (`podutil.IsPodAvailable`).
pub(super) fn first_pod_available(
    claimed: Option<&[Slot]>,
    pods: &Keyed<Pod>,
    min_ready_seconds: u32,
    now: Timestamp,
) -> bool {
    first_pod(claimed, pods).is_some_and(|pod| is_available(pod.health(), pod.health_since(), min_ready_seconds, now))
}

/// The eligible nodes where the DaemonSet has no pod: uncovered. Scans the nodes only when
/// it counts fewer eligible nodes with a pod than it wants, rare once synced.
fn track_missing(state: &mut DaemonSetState, nodes: &Keyed<Node>, ids: &NodeIds, since: Since) {
    let wanted = nodes.len().saturating_sub(state.skips().len());
    if state.scheduled_nodes(ids) >= wanted {
        return;
    }
    let missing: Vec<Str> = nodes.keys().filter(|node| state.pods_on(ids, node).is_none()).cloned().collect();
    for node in missing {
        state.track_uncovered(ids.get(&node), true, |_| false, since);
    }
}
