//! Pod events: claim the pod for its owner (or the DaemonSet that adopts it) on its target
//! node, and refresh only that (DaemonSet, node).

use super::Index;
use crate::model::{DaemonSet, Pod, Str, Uid};
use crate::rules::eligibility::selector_matches;

impl Index {
    pub(super) fn upsert_pod(&mut self, pod: Box<Pod>) {
        // Most pod events are status updates, which leave the compact pod as it was.
        if self.pods.objects.get(&pod.uid) == Some(&pod) {
            return;
        }
        self.generation += 1;
        let old = self.pods.objects.remove(&pod.uid);
        // Unclaim and claim before refreshing, so that an update that keeps the
        // pod where it was does not reset when its node became misscheduled.
        let touched = [old.as_ref().and_then(|o| self.unclaim(o)), self.claim(&pod)];
        self.refresh_touched(touched.into_iter().flatten());
        self.pods.objects.insert(pod.uid.clone(), pod);
    }

    pub(super) fn remove_pod(&mut self, uid: &Uid) {
        let Some(pod) = self.pods.objects.remove(uid) else { return };
        self.generation += 1;
        self.contested.remove(uid);
        let touched = self.unclaim(&pod);
        self.refresh_touched(touched);
    }

    /// Records ownership (or adoption) and the claim; returns the (DaemonSet, node)
    /// whose claim set grew.
    pub(super) fn claim(&mut self, pod: &Pod) -> Option<(Str, Str)> {
        let claimant = match &pod.controller_uid {
            Some(owner) => {
                self.owned_pods.entry(owner.clone()).or_default().insert(pod.uid.clone());
                owner.clone()
            }
            // Terminating orphans are never adopted.
            None if pod.deletion.is_some() => return None,
            None => {
                self.orphans.entry(pod.id.namespace.clone()).or_default().insert(pod.uid.clone());
                let adopter = self.adopter(pod)?;
                self.adopted_by.insert(pod.uid.clone(), adopter.clone());
                adopter
            }
        };
        let node = counted_node(self.daemonsets.objects.get(&claimant)?, pod)?;
        let state = self.state.entry(claimant.clone()).or_default();
        state.claim(node, &pod.uid, self.nodes.objects.len());
        Some((claimant, node.clone()))
    }

    /// Undoes `claim`; returns the (DaemonSet, node) whose claim set shrank.
    pub(super) fn unclaim(&mut self, pod: &Pod) -> Option<(Str, Str)> {
        let claimant = match &pod.controller_uid {
            Some(owner) => {
                if let Some(owned) = self.owned_pods.get_mut(owner) {
                    owned.remove(&pod.uid);
                    if owned.is_empty() {
                        self.owned_pods.remove(owner);
                    }
                }
                owner.clone()
            }
            None => {
                if let Some(orphans) = self.orphans.get_mut(&pod.id.namespace) {
                    orphans.remove(&pod.uid);
                    if orphans.is_empty() {
                        self.orphans.remove(&pod.id.namespace);
                    }
                }
                self.adopted_by.remove(&pod.uid)?
            }
        };
        let node = pod.target_node.as_ref()?;
        let state = self.state.get_mut(&claimant)?;
        let pods = state.claimed.get_mut(node)?;
        pods.retain(|uid| *uid != pod.uid);
        if pods.is_empty() {
            state.claimed.remove(node);
        }
        Some((claimant, node.clone()))
    }
}

/// The node a pod this DaemonSet owns (or adopts) counts on: the selector still matches
/// (else `ClaimPods` releases it), the status sync does not skip it, and it names a
/// target node.
pub(super) fn counted_node<'p>(ds: &DaemonSet, pod: &'p Pod) -> Option<&'p Str> {
    if !selector_matches(&ds.selector, &pod.labels) || !pod.counts_for_status() {
        return None;
    }
    pod.target_node.as_ref()
}
