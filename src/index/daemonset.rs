//! DaemonSets, cached by UID: an event re-evaluates that DaemonSet on every node, re-claims
//! its pods when its selector changed, and re-decides adoptions in its namespace.

// The API's own type goes by its group; the bare name is the model's.
use k8s_openapi::api::apps::v1 as apps;

use super::{Index, Indexed, Resource, Store, Stored};
use crate::k8s::convert::{self, ConvertError};
use crate::model::interner::Interner;
use crate::model::{DaemonSet, FastSet, Str};
use crate::rules::eligibility::should_run;

impl Stored for DaemonSet {
    const RESOURCE: Resource = Resource::DaemonSets;
    type Key = Str;

    fn key(&self) -> &Str {
        &self.uid
    }

    fn namespace(&self) -> Option<&Str> {
        Some(&self.id.namespace)
    }

    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.daemonsets
    }

    fn upsert(self, index: &mut Index) {
        let ds = self;
        let old = index.daemonsets.objects.get(&ds.uid);
        if old == Some(&ds) {
            return;
        }
        index.generation += 1;
        let selector_changed = old.is_none_or(|o| o.selector != ds.selector);
        let template_changed = old.is_none_or(|o| o.template != ds.template);
        // Who may adopt orphans changed: a new DaemonSet, a new selector, or a delete begun.
        let adopters_changed =
            selector_changed || old.is_none_or(|o| o.is_synced_by_controller() != ds.is_synced_by_controller());
        let (uid, namespace) = (ds.uid.clone(), ds.id.namespace.clone());
        let (slot, _) = index.daemonsets.objects.insert(ds);
        let ds = index.daemonsets.objects.at(slot);
        let state = index.states.or_default(slot);
        if !ds.is_synced_by_controller() {
            // Being deleted (or refused): its pods go on purpose, and nothing reports on it.
            state.lost.clear();
            state.forget_pending();
        }
        if template_changed {
            for node in index.nodes.objects.values() {
                // Every cached node has a number already: this finds it.
                let id = index.node_ids.assign(&node.name);
                state.set_skip(id, should_run(node, &ds.template));
            }
        }
        if selector_changed {
            // Which pods count is decided afresh: earlier departures no longer say anything.
            state.forget_pending();
            index.reclaim_owned(&uid);
        }
        // Re-adopt before refreshing, so that a node whose adopted pod stays adopted keeps
        // the moment it became misscheduled.
        let readopted = if adopters_changed { index.readopt(&namespace) } else { Vec::new() };
        if template_changed || selector_changed {
            let since = index.since();
            let candidates: FastSet<Str> = index.states.get(slot).map_or_else(FastSet::default, |state| {
                let claimed = state.claimed_nodes(&index.node_ids).map(|(node, _)| node);
                claimed
                    .chain(state.misscheduled().iter(&index.node_ids).map(|(node, _)| node))
                    .chain(state.departed.keys())
                    .cloned()
                    .collect()
            });
            for node in candidates {
                let id = index.node_ids.get(&node);
                index.refresh_pair(slot, (&node, id), since, None);
            }
        }
        index.refresh_touched(readopted, None, None);
        if (template_changed || selector_changed) && index.synced() {
            let since = index.since();
            index.track_uncovered_everywhere(&uid, since);
        }
    }

    fn remove(index: &mut Index, uid: &Str) {
        // Its own pods stay cached until they go, as pods of no DaemonSet.
        let owned = index.owned_pods(uid);
        if !owned.is_empty() {
            index.uncounted_owned.entry(uid.clone()).or_default().extend(owned);
        }
        let Some((slot, ds)) = index.daemonsets.objects.remove(uid) else { return };
        index.states.remove(slot);
        index.generation += 1;
        let readopted = index.readopt(&ds.id.namespace);
        index.refresh_touched(readopted, None, None);
    }
}

impl Indexed for apps::DaemonSet {
    type Compact = DaemonSet;

    fn convert(&self, interner: &mut Interner) -> Result<DaemonSet, ConvertError> {
        convert::daemonset(self, interner)
    }
}
