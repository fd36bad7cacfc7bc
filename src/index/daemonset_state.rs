//! What the index keeps per DaemonSet: skipped nodes, claimed pods by node, and the
//! misscheduled nodes with when each became so.

use std::collections::BTreeMap;

use smallvec::SmallVec;

use crate::model::{FastMap, Str, Timestamp, Uid};
use crate::rules::eligibility::{Skip, SkipReason};

/// When a (DaemonSet, node) pair became misscheduled, as the index saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Since {
    pub(super) at: Timestamp,
    /// The index saw the transition happen live (all caches synced, not replaying a relist),
    /// so `at` is the real moment rather than an upper bound.
    pub(super) observed: bool,
}

#[derive(Debug, Default)]
pub(super) struct DaemonSetState {
    /// Nodes where `shouldRun` is false, and why.
    pub(super) skips: FastMap<Str, Skip>,
    /// `daemonset_ineligible_nodes`: counts of `skips` by (reason, key).
    pub(super) skip_counts: FastMap<(SkipReason, Str), u32>,
    /// Claimed pods by target node: almost always one, kept inline.
    pub(super) claimed: FastMap<Str, SmallVec<[Uid; 1]>>,
    /// Nodes that exist, are skipped, and have a claimed pod.
    pub(super) misscheduled: BTreeMap<Str, Since>,
}

impl DaemonSetState {
    /// Records a claimed pod on `node`, in a cluster of `nodes` nodes.
    pub(super) fn claim(&mut self, node: &Str, pod: &Uid, nodes: usize) {
        // The map grows to about one entry per node the DaemonSet should run on. Sized for
        // that when it first fills, it is not rehashed while an initial list claims them:
        // each rehash rereads every node name, cold at this size.
        if self.claimed.len() == self.claimed.capacity() {
            let should_run_on = nodes.saturating_sub(self.skips.len());
            self.claimed.reserve(should_run_on.saturating_sub(self.claimed.len()));
        }
        self.claimed.entry(node.clone()).or_default().push(pod.clone());
    }

    pub(super) fn set_skip(&mut self, node: &Str, skip: Option<Skip>) -> bool {
        let old = match skip.clone() {
            Some(s) => self.skips.insert(node.clone(), s),
            None => self.skips.remove(node),
        };
        if old == skip {
            return false;
        }
        if let Some(old) = old {
            let key = (old.reason(), old.shared_key());
            if let Some(count) = self.skip_counts.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.skip_counts.remove(&key);
                }
            }
        }
        if let Some(new) = skip {
            *self.skip_counts.entry((new.reason(), new.shared_key())).or_default() += 1;
        }
        true
    }

    pub(super) fn refresh(&mut self, node: &Str, node_exists: bool, since: Since) {
        let misscheduled =
            node_exists && self.skips.contains_key(node) && self.claimed.get(node).is_some_and(|pods| !pods.is_empty());
        if misscheduled {
            self.misscheduled.entry(node.clone()).or_insert(since);
        } else {
            self.misscheduled.remove(node);
        }
    }
}
