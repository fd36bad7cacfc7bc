//! Node events: carry over who changed what, and re-evaluate that node for every DaemonSet.

use super::Index;
use crate::model::Node;
use crate::rules::attribution::{carry_over, selects_label};
use crate::rules::eligibility::should_run;

impl Index {
    pub(super) fn upsert_node(&mut self, mut node: Box<Node>) {
        if let Some(old) = self.nodes.objects.get(&node.name) {
            let daemonsets = &self.daemonsets.objects;
            carry_over(old, &mut node, |key| daemonsets.values().any(|ds| selects_label(&ds.template, key)));
            if *old == node {
                return;
            }
        }
        self.generation += 1;
        let since = self.since();
        for (uid, ds) in &self.daemonsets.objects {
            let state = self.state.entry(uid.clone()).or_default();
            state.set_skip(&node.name, should_run(&node, &ds.template));
            state.refresh(&node.name, true, since);
        }
        self.nodes.objects.insert(node.name.clone(), node);
    }

    pub(super) fn remove_node(&mut self, name: &str) {
        let Some(node) = self.nodes.objects.remove(name) else { return };
        self.generation += 1;
        let since = self.since();
        for state in self.state.values_mut() {
            state.set_skip(&node.name, None);
            state.refresh(&node.name, false, since);
        }
    }
}
