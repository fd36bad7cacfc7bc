//! DaemonSet events: re-evaluate that DaemonSet on every node, re-claim its pods when its
//! selector changed, and re-decide adoptions in its namespace.

use super::Index;
use super::pod::counted_node;
use crate::model::{DaemonSet, FastSet, Str};
use crate::rules::eligibility::should_run;

impl Index {
    pub(super) fn upsert_daemonset(&mut self, ds: Box<DaemonSet>) {
        let old = self.daemonsets.objects.get(&ds.uid);
        if old == Some(&ds) {
            return;
        }
        self.generation += 1;
        let selector_changed = old.is_none_or(|o| o.selector != ds.selector);
        let template_changed = old.is_none_or(|o| o.template != ds.template);
        // Who may adopt orphans changed: a new DaemonSet, a new selector, or a delete begun.
        let adopters_changed =
            selector_changed || old.is_none_or(|o| o.is_synced_by_controller() != ds.is_synced_by_controller());
        let (uid, namespace) = (ds.uid.clone(), ds.id.namespace.clone());
        self.daemonsets.objects.insert(uid.clone(), ds);
        let ds = &self.daemonsets.objects[&uid];
        let state = self.state.entry(uid.clone()).or_default();
        if template_changed {
            for node in self.nodes.objects.values() {
                state.set_skip(&node.name, should_run(node, &ds.template));
            }
        }
        if selector_changed {
            state.claimed.clear();
            for pod_uid in self.owned_pods.get(&uid).into_iter().flatten() {
                if let Some(pod) = self.pods.objects.get(pod_uid)
                    && let Some(node) = counted_node(ds, pod)
                {
                    state.claim(node, &pod.uid, self.nodes.objects.len());
                }
            }
        }
        // Re-adopt before refreshing, so that a node whose adopted pod stays adopted keeps
        // the moment it became misscheduled.
        let readopted = if adopters_changed { self.readopt(&namespace) } else { Vec::new() };
        if template_changed || selector_changed {
            let since = self.since();
            let nodes = &self.nodes.objects;
            if let Some(state) = self.state.get_mut(&uid) {
                let candidates: FastSet<Str> = state.claimed.keys().chain(state.misscheduled.keys()).cloned().collect();
                for node in candidates {
                    state.refresh(&node, nodes.contains_key(&node), since);
                }
            }
        }
        self.refresh_touched(readopted);
    }

    pub(super) fn remove_daemonset(&mut self, uid: &str) {
        self.state.remove(uid);
        let Some(ds) = self.daemonsets.objects.remove(uid) else { return };
        self.generation += 1;
        let readopted = self.readopt(&ds.id.namespace);
        self.refresh_touched(readopted);
    }
}
