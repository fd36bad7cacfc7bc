//! Daemon pods, cached by UID: an event claims the pod for its owner (or the DaemonSet that
//! adopts it) on its target node, and refreshes only that (DaemonSet, node).

use kube::runtime::watcher::Event;

use super::coverage::Verdict;
use super::keyed::Slot;
use super::node_ids::NodeId;
use super::resource::changed;
use super::{ClaimsChanged, Index, Indexed, Leaves, Parting, Resource, Store, Stored};
use crate::k8s::convert::{self, ConvertError};
use crate::k8s::slim::SlimPod;
use crate::model::interner::Interner;
use crate::model::{DaemonSet, Pod, Str, Uid};
use crate::rules::eligibility::selector_matches;

impl Stored for Pod {
    const RESOURCE: Resource = Resource::Pods;
    type Key = Uid;

    fn key(&self) -> &Uid {
        &self.uid
    }

    fn namespace(&self) -> Option<&Str> {
        Some(self.id.namespace())
    }

    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.pods
    }

    fn upsert(self, index: &mut Index) {
        let pod = self;
        // Most pod events are status updates, which leave the compact pod as it was.
        if index.pods.objects.get(&pod.uid) == Some(&pod) {
            return;
        }
        index.generation += 1;
        let old = index.pods.objects.remove(&pod.uid);
        let old_id = old.as_ref().and_then(|(_, o)| index.node_id(o));
        let parting = old.as_ref().and_then(|(slot, o)| index.parting(o, *slot, old_id?));
        // Unclaim and claim before refreshing, so that an update that keeps the
        // pod where it was does not reset when its node became misscheduled. The claim
        // names the slot the pod is about to take: the one the old pod just left, if any.
        let unclaimed = old.as_ref().and_then(|(slot, o)| index.unclaim(o, *slot, old_id));
        let slot = index.pods.objects.vacant();
        let touched = [unclaimed, index.claim(&pod, slot)];
        // Only a pod on its way out (terminal and deleted) departs; one that changed hands
        // or labels is still there.
        let gone = old.filter(|_| !pod.counts_for_status()).map(|(_, o)| Box::new(o));
        // In the store before the refresh, which reads whether the pair's pod is Ready.
        let (stored, _) = index.pods.objects.insert(pod);
        debug_assert_eq!(stored, slot);
        index.refresh_touched(touched.into_iter().flatten(), parting, gone);
    }

    /// A listed pod's upsert finds its UID free in the store, and claims it on its node: the
    /// node's number, its owner's claims there, and the cached node the refresh reads. At
    /// 65,000 nodes each is a trip to memory; warmed a run at a time, they overlap.
    fn warm_upserts(listed: &[Pod], index: &Index) {
        for pod in listed {
            std::hint::black_box(index.pods.objects.slot(&pod.uid));
        }
        for pod in listed {
            index.warm_pair(pod.target_node().map(|node| &**node), pod.controller_uid().map(|owner| &**owner));
        }
    }

    fn remove(index: &mut Index, uid: &Uid) {
        let Some((slot, pod)) = index.pods.objects.remove(uid) else { return };
        index.generation += 1;
        index.contested.remove(uid);
        let id = index.node_id(&pod);
        let parting = id.and_then(|id| index.parting(&pod, slot, id));
        let touched = index.unclaim(&pod, slot, id);
        index.refresh_touched(touched, parting, Some(Box::new(pod)));
    }
}

impl Indexed for SlimPod {
    type Compact = Pod;

    fn convert(&self, interner: &mut Interner) -> Result<Pod, ConvertError> {
        convert::pod(self, interner)
    }

    fn unchanged(&self, index: &Index) -> bool {
        let cached = self.metadata.uid.as_deref().and_then(|uid| index.pods.objects.get(&Uid::parse(uid)));
        cached.is_some_and(|cached| convert::pod_unchanged_but_uid(self, cached))
    }

    /// A delete also reads what the pod's pair keeps of its node (`parting`, `unclaim`,
    /// `refresh_pair`): the node's number, its claims there, the cached node, and the cached
    /// pod's node name, one hop further. A pod listed, new to the store, or deleted earlier in
    /// the batch is converted, which looks its node's name up in the interner (a listed one is
    /// upserted when the list ends: `Stored::warm_upserts`). An update mostly leaves the pod as
    /// it was, and reads no more than the pod. Each kind of lookup runs in a loop of its own:
    /// with the parsing in between, fewer of them overlap. The pods are asked for by their
    /// likely slots before any is looked up (`Keyed::slots_of`): pod status updates
    /// took about an eighth less time, at 5,000 nodes and at 65,000 alike (2026-12-05).
    fn warm(batch: &[Event<Self>], index: &Index) {
        fn node_of(pod: &SlimPod) -> Option<&str> {
            pod.spec.as_ref().and_then(convert::target_node_name)
        }
        let pods: Vec<(bool, &SlimPod, Uid)> = batch
            .iter()
            .filter_map(|event| Some((matches!(event, Event::Delete(_)), changed(event)?)))
            .filter_map(|(delete, pod)| Some((delete, pod, Uid::parse(pod.metadata.uid.as_deref()?))))
            .collect();
        let slots = index.pods.objects.slots_of(pods.iter().map(|(_, _, uid)| uid));
        for (&(_, pod, _), slot) in pods.iter().zip(&slots).filter(|((delete, ..), _)| *delete) {
            std::hint::black_box(slot.map(|slot| index.pods.objects.at(slot).target_node().map(|n| n.len())));
            index.warm_pair(node_of(pod), pod.controller_uid.as_deref());
        }
        let listed = batch.iter().filter_map(|event| match event {
            Event::InitApply(pod) => Some(pod),
            _ => None,
        });
        let deleted_before = |at: usize| pods[..at].iter().any(|(delete, _, uid)| *delete && *uid == pods[at].2);
        let fresh = |at: usize| !pods[at].0 && (slots[at].is_none() || deleted_before(at));
        let converted = pods.iter().enumerate().filter(|&(at, _)| fresh(at)).map(|(_, &(_, pod, _))| pod);
        for pod in listed.chain(converted) {
            std::hint::black_box(node_of(pod).map(|node| index.interner.existing_thin_str(node)));
        }
    }
}

impl Index {
    /// Looks up what a pod's pair reads of its node, and keeps nothing (`Indexed::warm`): the
    /// node's number, the owner's claims there, and the cached node; asks for the number's
    /// entry and the owner's flags there (`prefetch`), which the refresh reads last.
    fn warm_pair(&self, node: Option<&str>, owner: Option<&str>) {
        let id = node.and_then(|node| self.node_ids.get(node));
        let state = owner.and_then(|owner| self.state(owner));
        if let Some(id) = id {
            self.node_ids.prefetch(id);
            if let Some(state) = state {
                state.prefetch(id);
            }
        }
        let claims = id.zip(state).map(|(id, state)| state.claims().get(id));
        std::hint::black_box((claims, node.map(|node| self.nodes.objects.slot(node))));
    }

    /// The number of the node `pod` targets, if it has one.
    pub(super) fn node_id(&self, pod: &Pod) -> Option<NodeId> {
        self.node_ids.get(pod.target_node()?)
    }

    /// Records ownership (or adoption) and the claim of `pod`, which is (or is about to be)
    /// stored in `slot`; returns the (DaemonSet, node) whose claim set grew.
    pub(super) fn claim(&mut self, pod: &Pod, slot: Slot) -> Option<ClaimsChanged> {
        let claimant = match pod.controller_uid() {
            Some(owner) => owner.clone(),
            // Terminating orphans are never adopted.
            None if pod.deletion().is_some() => return None,
            None => {
                self.orphans.entry(pod.id.namespace().clone()).or_default().insert(pod.uid.clone());
                let adopter = self.adopter(pod)?;
                self.adopted_by.insert(pod.uid.clone(), adopter.clone());
                adopter
            }
        };
        let daemonsets = &self.daemonsets.objects;
        let counted = daemonsets.slot(&claimant).and_then(|at| Some((at, counted_node(daemonsets.at(at), pod)?)));
        let Some((ds_slot, node)) = counted else {
            if let Some(owner) = pod.controller_uid() {
                self.uncounted_owned.entry(owner.clone()).or_default().insert(pod.uid.clone());
            }
            return None;
        };
        let id = self.node_ids.assign(node);
        let state = self.states.or_default(ds_slot);
        state.claim(id, slot, self.node_ids.bound());
        Some(ClaimsChanged { owner: ds_slot, node: node.clone(), id })
    }

    /// When `pod` is the only counted pod of its pair on the node numbered `id`: the pair,
    /// and what the pod leaves there if it goes. Taken before the pod goes or changes: a
    /// loss keeps the verdict the pod had as a misscheduled pod, or the one of the episode
    /// that explains its delete.
    pub(super) fn parting(&self, pod: &Pod, slot: Slot, id: NodeId) -> Option<Parting> {
        let owner = pod.controller_uid().or_else(|| self.adopted_by.get(&pod.uid))?;
        let owner = self.daemonsets.objects.slot(owner)?;
        let node = pod.target_node()?;
        let state = self.states.get(owner)?;
        if *state.claims().get(id)? != [slot] {
            return None;
        }
        let ds = self.daemonsets.objects.at(owner);
        // The controller does not sync a DaemonSet being deleted: its pods go with it.
        if !ds.is_synced_by_controller() {
            return None;
        }
        let requested = pod.deletion().map(|d| d.requested_at());
        // Asked of the flag, in cache where the map's bucket, at 65,000 nodes, is not.
        debug_assert!(state.is_skipped(Some(id)) || !state.misscheduled().has(Some(id)));
        let leaves = if state.misscheduled().has(Some(id)) {
            let classification = self.classify(ds, state.skip_at(id)?, self.nodes.objects.get(node)?, pod);
            Leaves::ForSkip(Verdict::of(classification, requested))
        } else if let Some(flap) = state.flapped.get(node).filter(|flap| flap.explains(&pod.uid, requested)) {
            Leaves::ForSkip(Verdict { deletion_requested: requested, ..flap.verdict.clone() })
        } else {
            Leaves::Eligible
        };
        Some(Parting { owner, id, leaves })
    }

    /// The pods whose controller is `owner`: its claims but the orphans it adopted, and the
    /// ones that count nowhere.
    pub(super) fn owned_pods(&self, owner: &Str) -> Vec<Uid> {
        let claimed =
            self.state(owner).into_iter().flat_map(|state| state.claims().iter().flat_map(|(_, pods)| pods.slots()));
        let claimed = claimed.map(|slot| &self.pods.objects.at(slot).uid);
        let adopted = |uid: &&Uid| self.adopted_by.contains_key(*uid);
        let uncounted = self.uncounted_owned.get(owner).into_iter().flatten();
        claimed.filter(|uid| !adopted(uid)).chain(uncounted).cloned().collect()
    }

    /// Claims `owner`'s own pods afresh, after its selector changed (or it appeared).
    pub(super) fn reclaim_owned(&mut self, owner: &Str) {
        let owned = self.owned_pods(owner);
        self.uncounted_owned.remove(owner);
        if let Some(state) = self.state_mut(owner) {
            state.clear_claims();
        }
        for uid in owned {
            if let Some(slot) = self.pods.objects.slot(&uid) {
                let pod = self.pods.objects.at(slot).clone();
                self.claim(&pod, slot);
            }
        }
    }

    /// Undoes `claim` of `pod`, stored in `slot` until now, whose node is numbered `id`;
    /// returns the (DaemonSet, node) whose claim set shrank.
    pub(super) fn unclaim(&mut self, pod: &Pod, slot: Slot, id: Option<NodeId>) -> Option<ClaimsChanged> {
        let claimant = match pod.controller_uid() {
            Some(owner) => {
                if let Some(uncounted) = self.uncounted_owned.get_mut(owner) {
                    uncounted.remove(&pod.uid);
                    if uncounted.is_empty() {
                        self.uncounted_owned.remove(owner);
                    }
                }
                owner.clone()
            }
            None => {
                if let Some(orphans) = self.orphans.get_mut(pod.id.namespace()) {
                    orphans.remove(&pod.uid);
                    if orphans.is_empty() {
                        self.orphans.remove(pod.id.namespace());
                    }
                }
                self.adopted_by.remove(&pod.uid)?
            }
        };
        let (node, id) = (pod.target_node()?, id?);
        let owner = self.daemonsets.objects.slot(&claimant)?;
        let state = self.states.get_mut(owner)?;
        state.claims().get(id)?;
        state.unclaim(id, slot);
        Some(ClaimsChanged { owner, node: node.clone(), id })
    }
}

/// The node a pod this DaemonSet owns (or adopts) counts on: the selector still matches
/// (else `ClaimPods` releases it), the status sync does not skip it, and it names a
/// target node.
pub(super) fn counted_node<'p>(ds: &DaemonSet, pod: &'p Pod) -> Option<&'p Str> {
    if !selector_matches(&ds.selector, pod.labels()) || !pod.counts_for_status() {
        return None;
    }
    pod.target_node()
}
