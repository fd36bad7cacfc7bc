//! What the index keeps per DaemonSet: skipped nodes, with when each misscheduled one became
//! so, claimed pods by node, and the nodes it lost.

use std::collections::BTreeMap;

use super::Since;
use super::cells::{Cells, Table};
use super::claimed::{Claims, ClaimsMut, Pods, Several};
use super::coverage::{self, Flap, Loss, Pair, Step, Verdict};
use super::keyed::Slot;
use super::node_ids::{NodeId, NodeIds};
use super::per_node::{PerNode, PerNodeMut};
use super::skip_counts::SkipCounts;
use crate::model::{FastMap, Pod, Str, Timestamp};
use crate::rules::eligibility::Skip;
use crate::rules::reason::Reason;

#[derive(Debug, Default)]
pub(super) struct DaemonSetState {
    /// For each node number: whether it is in `skips`, whether that entry is misscheduled,
    /// whether it is in `uncovered`, and the claimed pod there (`Claims`).
    cells: Cells,
    /// Nodes where `shouldRun` is false, why, and for those that have a claimed pod, since
    /// when they are misscheduled. Written only by `set_skip`, which keeps `skip_counts` with
    /// it, and `set_misscheduled`. One table for both: a node is misscheduled only while
    /// skipped, and a drain writes both in most DaemonSets, where two tables were, at 65,000
    /// nodes, two more trips to memory in each. One table per node for every DaemonSet would
    /// gain little: with no skip written for a drain at all (a build that gave wrong answers),
    /// the event mix at 65,000 nodes ran 0.88× the 5,000-node rate, against 0.86× (2026-12-07).
    skips: FastMap<NodeId, Skipped>,
    /// How many `skips` are misscheduled: nodes that exist, are skipped, and have a claimed
    /// pod. Their entries are found by number through the cells; the views sort what they
    /// read by name (`index::view`).
    misscheduled_nodes: usize,
    /// `daemonset_ineligible_nodes`: counts of `skips` by (reason, key).
    pub(super) skip_counts: SkipCounts,
    /// Claimed pods by target node (their slots in the pod store), where the cells say there
    /// are several.
    several: Several,
    /// Nodes that exist and are skipped, whose last pod went while misscheduled (`coverage`).
    pub(super) lost: BTreeMap<Str, Loss>,
    /// `daemonset_node_losses_total`: every loss so far, by (reason, key).
    pub(super) losses: FastMap<(Reason, Str), u64>,
    /// Eligible nodes whose last pod went and that have no pod since: that pod, in case the
    /// node turns out skipped (its stream behind the pods'), which makes it a loss.
    pub(super) departed: BTreeMap<Str, Box<Pod>>,
    /// Nodes whose misscheduled episode ended while its pod stayed (`coverage::Flap`).
    pub(super) flapped: BTreeMap<Str, Flap>,
    /// Nodes the DaemonSet should run on whose first pod is not available, or that have
    /// none (`rules::uncovered`), and since when. Kept once the index is synced: before,
    /// every node of a DaemonSet listed ahead of its pods would pass through here. Hashed by
    /// number, not ordered by name: every pod event looks its node up here, mostly to find
    /// it absent, and a B-tree of thousands of nodes compares a dozen names per lookup.
    uncovered: FastMap<NodeId, Since>,
}

/// A skipped node's entry: why, and since when it is misscheduled, if it is.
#[derive(Debug)]
pub(super) struct Skipped {
    pub(super) skip: Skip,
    misscheduled: Option<Since>,
}

/// The misscheduled nodes of one DaemonSet, read out of its skipped ones.
pub(super) struct Misscheduled<'a> {
    /// The skips, through the misscheduled bits.
    skips: PerNode<'a, Skipped>,
    count: usize,
}

impl<'a> Misscheduled<'a> {
    /// Whether the node numbered `id` is misscheduled; a node without a number is not.
    pub(super) fn has(&self, id: Option<NodeId>) -> bool {
        self.skips.has(id)
    }

    /// Since when the node numbered `id` is misscheduled.
    pub(super) fn at(&self, id: NodeId) -> Option<&'a Since> {
        self.skips.at(id)?.misscheduled.as_ref()
    }

    /// Since when the node named `node` is misscheduled.
    pub(super) fn get(&self, ids: &NodeIds, node: &str) -> Option<&'a Since> {
        self.at(ids.get(node)?)
    }

    /// The misscheduled nodes, each with its name.
    pub(super) fn iter(&self, ids: &'a NodeIds) -> impl Iterator<Item = (&'a Str, &'a Since)> + use<'a> {
        self.skips.iter(ids).filter_map(|(node, skipped)| Some((node, skipped.misscheduled.as_ref()?)))
    }

    pub(super) fn len(&self) -> usize {
        self.count
    }
}

impl DaemonSetState {
    pub(super) fn skips(&self) -> PerNode<'_, Skipped> {
        PerNode::new(&self.skips, &self.cells, Table::Skips)
    }

    /// Why the DaemonSet skips the node numbered `id`, if it does.
    pub(super) fn skip_at(&self, id: NodeId) -> Option<&Skip> {
        self.skips().at(id).map(|skipped| &skipped.skip)
    }

    pub(super) fn misscheduled(&self) -> Misscheduled<'_> {
        let skips = PerNode::new(&self.skips, &self.cells, Table::Misscheduled);
        Misscheduled { skips, count: self.misscheduled_nodes }
    }

    pub(super) fn uncovered(&self) -> PerNode<'_, Since> {
        PerNode::new(&self.uncovered, &self.cells, Table::Uncovered)
    }

    fn skips_mut(&mut self) -> PerNodeMut<'_, Skipped> {
        PerNodeMut::new(&mut self.skips, &mut self.cells, Table::Skips)
    }

    pub(super) fn uncovered_mut(&mut self) -> PerNodeMut<'_, Since> {
        PerNodeMut::new(&mut self.uncovered, &mut self.cells, Table::Uncovered)
    }

    /// The claimed pods, by node number.
    pub(super) fn claims(&self) -> Claims<'_> {
        Claims::new(&self.cells, &self.several)
    }

    fn claims_mut(&mut self) -> ClaimsMut<'_> {
        ClaimsMut::new(&mut self.cells, &mut self.several)
    }

    /// Takes every claim away, ahead of claiming the DaemonSet's pods afresh.
    pub(super) fn clear_claims(&mut self) {
        self.claims_mut().clear();
    }

    /// The heap bytes of the cells and of the nodes with several pods (`footprint`).
    pub(super) fn claims_bytes(&self) -> usize {
        self.cells.bytes() + self.several.heap_bytes()
    }

    /// Keeps the uncovered nodes `keep` says to, given the claims and each node's number.
    pub(super) fn retain_uncovered(&mut self, mut keep: impl FnMut(Claims<'_>, NodeId) -> bool) {
        let several = &self.several;
        let uncovered = PerNodeMut::new(&mut self.uncovered, &mut self.cells, Table::Uncovered);
        uncovered.retain(|cells, id| keep(Claims::new(cells, several), id));
    }

    /// The slots of the pods claimed on `node`, if any.
    pub(super) fn pods_on(&self, ids: &NodeIds, node: &str) -> Option<Pods<'_>> {
        self.claims().get(ids.get(node)?)
    }

    /// The nodes with a claimed pod, by name.
    pub(super) fn claimed_nodes<'a>(&'a self, ids: &'a NodeIds) -> impl Iterator<Item = (&'a Str, Pods<'a>)> {
        self.claims().iter().filter_map(|(id, pods)| Some((ids.name(id)?, pods)))
    }

    /// `currentNumberScheduled`: cached nodes it does not skip that have a claimed pod. Asked
    /// by number: each is a flag, where a name would be looked up in the 65,000-node tables.
    pub(super) fn scheduled_nodes(&self, ids: &NodeIds) -> usize {
        self.claims().iter().filter(|&(id, _)| ids.is_cached(Some(id)) && !self.is_skipped(Some(id))).count()
    }

    /// Asks for what a refresh of the node numbered `id` reads first (`prefetch`): its cell.
    /// At 65,000 nodes the cells are 256 KiB per DaemonSet, and a node's cell in 40
    /// DaemonSets falls out of cache between two changes of that node.
    pub(super) fn prefetch(&self, id: NodeId) {
        self.cells.prefetch(id);
    }

    /// Looks the node numbered `id` up in `skips`, ahead of a node event that writes it in
    /// most DaemonSets (a drain). At 65,000 nodes its bucket is a trip to memory; looked up
    /// in every DaemonSet before any is written, the trips overlap (drains alone 10% faster
    /// there, 2026-12-05). Pod events, which rarely write it, do not ask.
    pub(super) fn warm_skips(&self, id: NodeId) {
        self.skips().warm(id);
    }

    /// Records the pod in `slot` claimed on `node`, in a cluster whose node numbers are
    /// below `bound`.
    pub(super) fn claim(&mut self, node: NodeId, slot: Slot, bound: usize) {
        self.claims_mut().push(node, slot, bound);
    }

    /// Forgets the pod in `slot` claimed on `node`, if it is there.
    pub(super) fn unclaim(&mut self, node: NodeId, slot: Slot) {
        self.claims_mut().remove(node, slot);
    }

    /// Records whether (and why) the DaemonSet skips the cached node numbered `id`; returns
    /// whether that changed.
    pub(super) fn set_skip(&mut self, id: NodeId, skip: Option<Skip>) -> bool {
        // Not skipped before or now: `skips` has no entry to compare, and its bucket is a trip
        // to memory at 65,000 nodes (a DaemonSet that tolerates every taint, on a drain).
        if !self.is_skipped(Some(id)) && skip.is_none() {
            return false;
        }
        // Compared before anything is cloned: most calls leave the skip as it was.
        if self.skip_at(id) == skip.as_ref() {
            return false;
        }
        if let Some(new) = &skip {
            self.skip_counts.add(new);
        }
        let old = match skip {
            // Another reason keeps the misscheduled episode, as the pair stays skipped.
            Some(skip) => match self.skips_mut().at_mut(id) {
                Some(skipped) => Some(std::mem::replace(&mut skipped.skip, skip)),
                None => self.skips_mut().replace(id, Skipped { skip, misscheduled: None }).map(|old| old.skip),
            },
            None => {
                // Not skipped any more is not misscheduled either.
                self.set_misscheduled(id, None);
                self.skips_mut().remove(Some(id)).map(|old| old.skip)
            }
        };
        if let Some(old) = old {
            self.skip_counts.remove(&old);
        }
        true
    }

    /// Records since when the skipped node numbered `id` is misscheduled, or that it is not
    /// (`None`); an episode under way keeps its start.
    fn set_misscheduled(&mut self, id: NodeId, since: Option<Since>) {
        let was = self.misscheduled().has(Some(id));
        if was == since.is_some() {
            return;
        }
        let Some(skipped) = self.skips_mut().at_mut(id) else {
            debug_assert!(false, "{id:?} misscheduled but not skipped");
            return;
        };
        skipped.misscheduled = since;
        self.cells.set(id, Table::Misscheduled, !was);
        if was {
            self.misscheduled_nodes -= 1;
        } else {
            self.misscheduled_nodes += 1;
        }
    }

    /// Recompute the pair (this DaemonSet, `node`) after a change. `id`: the node's number,
    /// looked up once by a caller that refreshes it for every DaemonSet. `parting`: the change
    /// took the pair's last pod while it was misscheduled, and that pod's verdict. Returns
    /// whether a loss started.
    pub(super) fn refresh(
        &mut self,
        (node, id): (&Str, Option<NodeId>),
        node_exists: bool,
        since: Since,
        parting: Option<Verdict>,
    ) -> bool {
        let pair = Pair {
            node_exists,
            skipped: self.is_skipped(id),
            has_pod: id.is_some_and(|id| self.claims().get(id).is_some()),
        };
        if let Some(id) = id {
            let misscheduled = pair.node_exists && pair.skipped && pair.has_pod;
            self.set_misscheduled(id, misscheduled.then_some(since));
        }
        if pair.has_pod || !pair.node_exists {
            self.departed.remove(node);
        }
        if !pair.node_exists {
            self.flapped.remove(node);
        }
        match coverage::step(self.lost.contains_key(node), parting.is_some(), pair) {
            Step::Start => {
                let Some(verdict) = parting else { return false };
                self.departed.remove(node);
                self.flapped.remove(node);
                *self.losses.entry((verdict.reason, verdict.key.clone())).or_default() += 1;
                self.lost.insert(node.clone(), Loss { verdict, since });
                true
            }
            Step::End => {
                self.lost.remove(node);
                false
            }
            Step::Keep => false,
        }
    }

    /// Whether `node` is uncovered: it exists, the DaemonSet should run there, and its
    /// first pod is not available (`covered` says false) or there is none. `covered` is
    /// asked only where the node is eligible: it reads the pod, at 65,000 nodes a cache
    /// miss for each DaemonSet a node event re-evaluates.
    pub(super) fn track_uncovered(
        &mut self,
        id: Option<NodeId>,
        node_exists: bool,
        covered: impl FnOnce(Claims<'_>) -> bool,
        since: Since,
    ) {
        match id {
            // A cached node has a number: `node_exists` and no `id` does not happen.
            Some(id) if node_exists && !self.is_skipped(Some(id)) && !covered(self.claims()) => {
                self.uncovered_mut().insert_new(id, since);
            }
            _ => {
                self.uncovered_mut().remove(id);
            }
        }
    }

    /// Whether the node numbered `id` is in `skips`; a node without a number is not cached,
    /// and so not skipped.
    pub(super) fn is_skipped(&self, id: Option<NodeId>) -> bool {
        self.skips().has(id)
    }

    /// What the departed pod's absence means now: `Some` when it was the controller's
    /// delete for a skip, that is when the node, still without a pod, is now skipped.
    pub(super) fn departed_into_skip(&self, node: &Str, id: Option<NodeId>) -> Option<(&Pod, &Skip)> {
        // The flag first: a pod that just left an eligible node is departed, and `skips`
        // would be read only to find the node absent.
        if !self.is_skipped(id) {
            return None;
        }
        let (pod, id) = (self.departed.get(node)?, id?);
        let skip = self.skip_at(id)?;
        self.claims().get(id).is_none().then_some((&**pod, skip))
    }

    /// Forgets what the index kept for losses it has yet to see: the DaemonSet is not
    /// synced any more (its pods go on purpose), or its selector changed.
    pub(super) fn forget_pending(&mut self) {
        self.departed.clear();
        self.flapped.clear();
    }

    /// Forget the losses recorded `retention` seconds before `now` or earlier; returns
    /// whether any went.
    pub(super) fn expire_losses(&mut self, now: Timestamp, retention: Timestamp) -> bool {
        let before = self.lost.len();
        self.lost.retain(|_, loss| loss.expires_at(retention) > now);
        self.lost.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skipped_bits_follow_the_skips() {
        let mut state = DaemonSetState::default();
        let id = NodeId::at(9);
        let skip = Skip::NodeSelector { key: Str::from("pool") };
        assert!(!state.is_skipped(Some(id)), "beyond the column: not skipped");
        assert!(state.set_skip(id, Some(skip.clone())));
        assert!(state.is_skipped(Some(id)) && !state.is_skipped(Some(NodeId::at(8))) && !state.is_skipped(None));
        assert_eq!((state.skip_at(id), state.skip_counts.iter().count()), (Some(&skip), 1));
        assert!(!state.set_skip(id, Some(skip)), "the same skip again changes nothing");
        let taint = Skip::Taint { key: Str::from("drain"), no_execute: false };
        assert!(state.set_skip(id, Some(taint.clone())), "another skip replaces it");
        assert_eq!((state.skip_at(id), state.skip_counts.iter().count()), (Some(&taint), 1));
        assert!(state.set_skip(id, None));
        assert!(!state.is_skipped(Some(id)) && state.skips().is_empty() && state.skip_counts.is_empty());
    }

    /// A misscheduled node is one of the skipped ones: its episode keeps its start while the
    /// reason changes, and ends with the skip.
    #[test]
    fn a_misscheduled_episode_lives_and_ends_with_its_skip() {
        let mut state = DaemonSetState::default();
        let (node, id) = (Str::from("n9"), NodeId::at(9));
        let at = |second| Since { at: second, observed: true, generation: second as u64 };
        state.claim(id, Slot::at(0), 10);
        state.refresh((&node, Some(id)), true, at(1), None);
        assert_eq!(state.misscheduled().len(), 0, "eligible with a pod: not misscheduled");

        state.set_skip(id, Some(Skip::Taint { key: Str::from("drain"), no_execute: false }));
        state.refresh((&node, Some(id)), true, at(2), None);
        state.set_skip(id, Some(Skip::NodeSelector { key: Str::from("pool") }));
        state.refresh((&node, Some(id)), true, at(3), None);
        let misscheduled = state.misscheduled();
        assert_eq!((misscheduled.len(), misscheduled.at(id)), (1, Some(&at(2))), "another reason, the same episode");

        state.set_skip(id, None);
        assert!(!state.misscheduled().has(Some(id)) && state.misscheduled().at(id).is_none());
        assert_eq!(state.misscheduled().len(), 0, "not skipped, so not misscheduled");
        state.set_skip(id, Some(Skip::NodeName));
        assert_eq!(state.misscheduled().at(id), None, "a new skip starts with no episode until a refresh");
        state.refresh((&node, Some(id)), true, at(4), None);
        assert_eq!((state.misscheduled().len(), state.misscheduled().at(id)), (1, Some(&at(4))));
        state.refresh((&node, Some(id)), false, at(5), None);
        assert_eq!(state.misscheduled().len(), 0, "a node that went is not misscheduled");
    }
}
