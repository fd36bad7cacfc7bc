//! A small copy of the index holding only what one change can move, for what-if to run the
//! change through without writing to the index it was copied from. The admission guard
//! answers from the exporter's own index this way, under a read lock held only for the copy.
//!
//! The copy enters every object by the same `upsert`s as a watch, so eligibility, claiming
//! and the reasons are the index's own, and a change to one node copies one node's worth.

use super::claimed::Pods;
use super::{Config, Index, Stored};
use crate::model::{DaemonSet, Node, Pod, Str};

/// What a change touches, and so what the excerpt must hold.
#[derive(Clone, Copy, Debug)]
pub enum Touched<'a> {
    /// A change to these nodes: they, every DaemonSet, its revisions and its pods on them.
    Nodes(&'a [Str]),
    /// A change to one DaemonSet (which may not exist yet): every node, that DaemonSet, its
    /// revisions and its pods.
    DaemonSet { namespace: &'a str, name: &'a str },
}

impl Touched<'_> {
    fn holds_daemonset(&self, ds: &DaemonSet) -> bool {
        match self {
            Touched::Nodes(_) => true,
            Touched::DaemonSet { namespace, name } => *ds.id.namespace == **namespace && *ds.id.name == **name,
        }
    }
}

impl Index {
    /// A synced copy of the part of the index `touched` names. Orphans are left out: which
    /// DaemonSet adopts one is the controller's next sync, not a change's effect.
    pub fn excerpt(&self, touched: Touched<'_>) -> Index {
        let config = Config { namespace_scopes: 0, ..self.config.clone() };
        let mut copy = Index::new(config);
        copy.now = self.now;
        let nodes: Vec<&Node> = match touched {
            Touched::Nodes(names) => names.iter().filter_map(|n| self.nodes.objects.get(n)).collect(),
            Touched::DaemonSet { .. } => self.nodes.objects.values().collect(),
        };
        for node in nodes {
            node.clone().upsert(&mut copy);
        }
        for ds in self.daemonsets.objects.values().filter(|ds| touched.holds_daemonset(ds)) {
            let owned = |owner: Option<&Str>| owner.is_some_and(|o| **o == *ds.uid);
            for revision in self.revisions.objects.values().filter(|r| owned(r.owner_uid.as_ref())) {
                revision.clone().upsert(&mut copy);
            }
            ds.clone().upsert(&mut copy);
            // A node's pods are the DaemonSet's claims there: a lookup per node, not a scan of
            // the DaemonSet's pods. A pod it owns but does not claim counts nowhere.
            let pods = &self.pods.objects;
            let pods: Vec<&Pod> = match touched {
                Touched::Nodes(names) => {
                    let state = self.state(&ds.uid);
                    let slots = names.iter().filter_map(|n| state?.pods_on(&self.node_ids, n)).flat_map(Pods::slots);
                    slots.map(|slot| pods.at(slot)).collect()
                }
                Touched::DaemonSet { .. } => self.owned_pods(&ds.uid).iter().filter_map(|uid| pods.get(uid)).collect(),
            };
            for pod in pods {
                pod.clone().upsert(&mut copy);
            }
        }
        copy.nodes.synced_scopes.insert(None);
        copy.daemonsets.synced_scopes.insert(None);
        copy.revisions.synced_scopes.insert(None);
        copy.pods.synced_scopes.insert(None);
        copy
    }
}
