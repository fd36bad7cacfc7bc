//! Nodes, cached by name: an event carries over who changed what, and re-evaluates that
//! node for every DaemonSet.

use kube::runtime::watcher::Event;

use super::claimed::Claims;
use super::coverage::{Flap, Verdict};
use super::keyed::Slot;
use super::node_ids::NodeId;
use super::resource::changed;
use super::{Index, Indexed, Resource, Store, Stored, first_pod_available};
use crate::k8s::convert::{self, ConvertError};
use crate::k8s::slim::SlimNode;
use crate::model::interner::Interner;
use crate::model::{Node, Str};
use crate::rules::attribution::{carry_over, selects_label};
use crate::rules::eligibility::should_run;

impl Stored for Node {
    const RESOURCE: Resource = Resource::Nodes;
    type Key = Str;

    fn key(&self) -> &Str {
        &self.name
    }

    fn namespace(&self) -> Option<&Str> {
        None
    }

    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.nodes
    }

    fn upsert(self, index: &mut Index) {
        let mut node = self;
        if let Some(old) = index.nodes.objects.get(&node.name) {
            let daemonsets = &index.daemonsets.objects;
            carry_over(old, &mut node, |key| daemonsets.values().any(|ds| selects_label(&ds.template, key)));
            if *old == node {
                return;
            }
        }
        index.generation += 1;
        let since = index.since();
        let id = index.node_ids.assign(&node.name);
        index.prefetch_pairs(id);
        let flaps = index.flaps(&node, id);
        let synced = index.synced();
        let mut departed = Vec::new();
        for (slot, ds) in index.daemonsets.objects.slotted() {
            // Every cached DaemonSet has its state (`DaemonSet::upsert`).
            let Some(state) = index.states.get_mut(slot) else { continue };
            state.set_skip(id, should_run(&node, &ds.template));
            if synced {
                let (pods, now) = (&index.pods.objects, index.now);
                let covered =
                    |claims: Claims| first_pod_available(claims.get(id).as_deref(), pods, ds.min_ready_seconds, now);
                state.track_uncovered(Some(id), true, covered, since);
            }
            state.refresh((&node.name, Some(id)), true, since, None);
            if state.departed.contains_key(&node.name) {
                departed.push(slot);
            }
        }
        for (slot, flap) in flaps {
            if let Some(state) = index.states.get_mut(slot) {
                state.flapped.insert(node.name.clone(), flap);
            }
        }
        let name = node.name.clone();
        index.nodes.objects.insert(node);
        index.node_ids.set_cached(id, true);
        for slot in departed {
            index.refresh_pair(slot, (&name, Some(id)), since, None);
        }
    }

    fn remove(index: &mut Index, name: &Str) {
        let Some((_, node)) = index.nodes.objects.remove(name) else { return };
        index.generation += 1;
        let since = index.since();
        let id = index.node_ids.get(&node.name);
        if let Some(id) = id {
            index.node_ids.set_cached(id, false);
        }
        for state in index.states.values_mut() {
            if let Some(id) = id {
                state.set_skip(id, None);
            }
            state.uncovered_mut().remove(id);
            state.refresh((&node.name, id), false, since, None);
        }
    }
}

impl Index {
    /// Asks for what the loop over DaemonSets reads of the node numbered `id` in each
    /// (`prefetch`): first the cells, then the table a drain writes, then the
    /// first pod each claim names.
    fn prefetch_pairs(&self, id: NodeId) {
        for state in self.states.values() {
            state.prefetch(id);
        }
        for state in self.states.values() {
            state.warm_skips(id);
        }
        for state in self.states.values() {
            if let Some(&[first, ..]) = state.claims().get(id).as_deref() {
                self.pods.objects.prefetch(first);
            }
        }
    }

    /// The misscheduled episodes `new` ends while their pod stays, for skips the controller
    /// deletes for: the pod may be gone already, on a pod stream behind this one
    /// (`coverage::Flap`). Read before `new` replaces the node, for the verdict it had; `id`
    /// is its number.
    fn flaps(&self, new: &Node, id: NodeId) -> Vec<(Slot, Flap)> {
        let Some(old) = self.nodes.objects.get(&new.name) else { return Vec::new() };
        let mut flaps = Vec::new();
        for (slot, ds) in self.daemonsets.objects.slotted() {
            let Some(state) = self.states.get(slot) else { continue };
            // Asked of the flag, in cache where, at 65,000 nodes, the maps' buckets are not.
            if !state.misscheduled().has(Some(id)) {
                continue;
            }
            let (Some(since), Some(skip)) = (state.misscheduled().at(id), state.skip_at(id)) else {
                continue;
            };
            let pods = state.claims().get(id);
            let pods = pods.as_deref().unwrap_or_default();
            let (&[pod], false) = (pods, skip.should_continue_running()) else { continue };
            let pod = self.pods.objects.at(pod);
            if should_run(new, &ds.template).is_some() {
                continue;
            }
            let classification = self.classify(ds, skip, old, pod);
            let verdict = Verdict::of(classification, pod.deletion().map(|d| d.requested_at()));
            flaps.push((slot, Flap { pod: pod.uid.clone(), verdict, from: since.at, to: self.now }));
        }
        flaps
    }
}

impl Indexed for SlimNode {
    type Compact = Node;

    fn convert(&self, interner: &mut Interner) -> Result<Node, ConvertError> {
        convert::node(self, interner)
    }

    fn unchanged(&self, index: &Index) -> bool {
        let cached = self.metadata.name.as_deref().and_then(|name| index.nodes.objects.get(name));
        cached.is_some_and(|cached| convert::node_unchanged(self, cached))
    }

    /// Asks for each node by its likely slot, then looks each up (`Keyed::slots_of`):
    /// heartbeats took about a sixth less time, at 5,000 nodes and at 65,000 alike (2026-12-05).
    fn warm(batch: &[Event<Self>], index: &Index) {
        let names = batch.iter().filter_map(|event| changed(event)?.metadata.name.as_deref());
        std::hint::black_box(index.nodes.objects.slots_of(names));
    }
}
