//! Nodes, cached by name: an event carries over who changed what, and re-evaluates that
//! node for every DaemonSet.

use super::{Index, Indexed, Resource, Store, Stored};
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

    fn upsert(self: Box<Self>, index: &mut Index) {
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
        for (uid, ds) in &index.daemonsets.objects {
            let state = index.state.entry(uid.clone()).or_default();
            state.set_skip(&node.name, should_run(&node, &ds.template));
            state.refresh(&node.name, true, since, None);
        }
        index.nodes.objects.insert(node.name.clone(), node);
    }

    fn remove(index: &mut Index, name: &Str) {
        let Some(node) = index.nodes.objects.remove(name) else { return };
        index.generation += 1;
        let since = index.since();
        for state in index.state.values_mut() {
            state.set_skip(&node.name, None);
            state.refresh(&node.name, false, since, None);
        }
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
}
