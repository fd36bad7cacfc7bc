//! Node events: re-evaluate that node for every DaemonSet.

use super::Index;
use crate::model::Node;
use crate::rules::eligibility::should_run;

impl Index {
    pub(super) fn upsert_node(&mut self, node: Node) {
        if self.nodes.objects.get(&node.name) == Some(&node) {
            return;
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
