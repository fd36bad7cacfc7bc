//! Orphan pods (no controller ownerReference): the DaemonSet controller adopts one into the
//! DaemonSet that selects it, so it counts there; one that several select counts nowhere.

use super::keyed::Slot;
use super::{ClaimsChanged, Index};
use crate::model::{Pod, Str};
use crate::rules::eligibility::selector_matches;

impl Index {
    /// `ClaimPods` adopts an orphan into the DaemonSet being synced. When exactly one live
    /// DaemonSet in its namespace selects it, that one adopts it; when several do, it
    /// depends on which syncs first, so no count includes it.
    pub(super) fn adopter(&mut self, pod: &Pod) -> Option<Str> {
        let mut selecting = self.daemonsets.objects.values().filter(|ds| {
            ds.is_synced_by_controller()
                && ds.id.namespace == *pod.id.namespace()
                && selector_matches(&ds.selector, pod.labels())
        });
        let first = selecting.next()?;
        let Some(second) = selecting.next() else { return Some(first.uid.clone()) };
        if self.contested.insert(pod.uid.clone()) {
            tracing::warn!(
                namespace = %pod.id.namespace(),
                pod = %pod.id,
                daemonsets = %format_args!("{}, {}", first.id.name, second.id.name),
                "orphan pod selected by more than one DaemonSet: the first to sync adopts it, so no count includes it until then"
            );
        }
        None
    }

    /// Re-decides every orphan in `namespace` after its DaemonSets changed; returns the
    /// (DaemonSet, node) pairs to refresh.
    pub(super) fn readopt(&mut self, namespace: &Str) -> Vec<ClaimsChanged> {
        let Some(orphans) = self.orphans.get(namespace) else { return Vec::new() };
        let pods = &self.pods.objects;
        let orphans: Vec<(Slot, Pod)> =
            orphans.iter().filter_map(|uid| pods.slot(uid)).map(|slot| (slot, pods.at(slot).clone())).collect();
        let mut touched = Vec::new();
        for (slot, pod) in orphans {
            touched.extend(self.unclaim(&pod, slot, self.node_id(&pod)));
            touched.extend(self.claim(&pod, slot));
        }
        touched
    }
}
