//! Read views: one DaemonSet's results, classified at read time so scrapes cost what the
//! misscheduled nodes cost, not the cluster.

use super::claimed::Pods;
use super::coverage::Verdict;
use super::daemonset_state::DaemonSetState;
use super::failed_create::EventsRead;
use super::uncovered::first_pod;
use super::{Index, Since};
use crate::model::{DaemonSet, Node, Pod, Str, Timestamp};
use crate::rules::arrival::arrived_misscheduled;
use crate::rules::eligibility::{Skip, SkipReason};
use crate::rules::reason::{Classification, Reason, classify};
use crate::rules::uncovered::{Uncovered, missing_reason, pod_reason};

impl Index {
    /// DaemonSets sorted by namespace and name. Those the controller does not sync (being
    /// deleted, or with a refused selector) get no status from it and are left out.
    pub fn daemonsets(&self) -> Vec<DaemonSetView<'_>> {
        let mut views: Vec<_> = self
            .daemonsets
            .objects
            .slotted()
            .filter(|(_, ds)| ds.is_synced_by_controller())
            .filter_map(|(slot, ds)| Some(DaemonSetView { index: self, ds, state: self.states.get(slot)? }))
            .collect();
        views.sort_by(|a, b| a.ds.id.cmp(&b.ds.id));
        views
    }

    /// The DaemonSet `namespace/name`, when the controller syncs it.
    pub fn daemonset(&self, namespace: &str, name: &str) -> Option<DaemonSetView<'_>> {
        self.daemonsets().into_iter().find(|v| *v.ds.id.namespace == *namespace && *v.ds.id.name == *name)
    }

    /// Whether the node exists.
    pub fn has_node(&self, name: &str) -> bool {
        self.nodes.objects.contains_key(name)
    }

    /// Every node's name, sorted.
    pub fn node_names(&self) -> Vec<&Str> {
        let mut names: Vec<&Str> = self.nodes.objects.keys().collect();
        names.sort();
        names
    }

    /// The verdict for `pod` of `ds` on `node`, which `ds` skips as `skip`.
    pub(super) fn classify(&self, ds: &DaemonSet, skip: &Skip, node: &Node, pod: &Pod) -> Classification {
        let origin = self.revision_of(ds, pod).map(|r| &*r.placement);
        classify(skip, node, &ds.template, pod, origin, &self.config.conventions)
    }
}

/// One DaemonSet's results.
#[derive(Clone, Copy)]
pub struct DaemonSetView<'a> {
    pub(super) index: &'a Index,
    pub ds: &'a DaemonSet,
    pub(super) state: &'a DaemonSetState,
}

/// Count each misscheduled node once, under its first (oldest) pod's reason.
pub fn nodes_by_reason(pods: &[MisscheduledPod<'_>]) -> [u32; Reason::ALL.len()] {
    let mut counts = [0; Reason::ALL.len()];
    for pod in pods.iter().filter(|p| p.counts_node) {
        counts[pod.classification.reason.index()] += 1;
    }
    counts
}

/// A misscheduled pod and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MisscheduledPod<'a> {
    pub pod: &'a Pod,
    pub node: &'a Str,
    pub classification: Classification,
    /// When the pod became misscheduled (unix seconds).
    pub since: Timestamp,
    /// The first pod on its node: its reason is the node's reason.
    pub counts_node: bool,
    /// Tells this episode of the pod's node being misscheduled from an earlier one.
    pub episode: u64,
    /// `since` is when the index saw the episode begin, live, not a bound inferred from a
    /// relist.
    pub observed: bool,
}

impl MisscheduledPod<'_> {
    /// The pod was created after its node's episode began, as the index saw it live
    /// (`rules::arrival`): it came misscheduled, and the index's node may be behind. Asked
    /// by the Event publisher only, so a scrape does not pay for it.
    pub fn arrived(&self) -> bool {
        self.observed && arrived_misscheduled(self.pod.created(), self.since)
    }
}

/// What a node without a pod says when the controller's `FailedCreate` Events could not be read.
pub const EVENTS_REFUSED: &str = "FailedCreate Events not readable: grant list and watch on events";

/// A node the DaemonSet should run on without an available pod, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UncoveredNode<'a> {
    pub node: &'a Str,
    /// Its first pod (the one the controller counts), when it has one.
    pub pod: Option<&'a Pod>,
    pub reason: Uncovered,
    /// In the scheduler's or the kubelet's words; none when they say nothing.
    pub detail: Option<&'a str>,
    /// When the node became uncovered (unix seconds).
    pub since: Timestamp,
    /// Tells this episode of the node being uncovered from an earlier one.
    pub episode: u64,
}

/// A node the DaemonSet stopped covering, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostNode<'a> {
    pub node: &'a Str,
    pub verdict: &'a Verdict,
    /// When coverage ended (unix seconds).
    pub since: Timestamp,
    /// Tells this loss from an earlier one of the same node.
    pub episode: u64,
}

impl<'a> DaemonSetView<'a> {
    /// `desiredNumberScheduled`: nodes where `shouldRun` is true.
    pub fn eligible_nodes(&self) -> usize {
        self.index.nodes.objects.len().saturating_sub(self.state.skips().len())
    }

    /// Skipped nodes by (reason, key), sorted.
    pub fn ineligible_nodes(&self) -> Vec<(SkipReason, &'a Str, u32)> {
        let mut rows: Vec<_> = self.state.skip_counts.iter().collect();
        rows.sort();
        rows
    }

    /// `currentNumberScheduled`: nodes where `shouldRun` is true that have a counted pod.
    pub fn scheduled_nodes(&self) -> usize {
        self.state.scheduled_nodes(&self.index.node_ids)
    }

    /// The nodes this DaemonSet should run on without an available pod, by node name.
    pub fn uncovered_nodes(&self) -> Vec<UncoveredNode<'a>> {
        let now = self.index.now;
        let mut out = Vec::with_capacity(self.state.uncovered().len());
        let failed_create = self.index.failed_create(&self.ds.uid);
        let missing_detail = match (failed_create, self.index.events_read()) {
            (Some(failed), _) => Some(&*failed.detail),
            (None, EventsRead::Refused) => Some(EVENTS_REFUSED),
            (None, _) => None,
        };
        for (node, since) in by_node(self.state.uncovered().iter(&self.index.node_ids)) {
            // The one pod the controller counts there, without sorting every claimed one.
            let pod = first_pod(self.state.pods_on(&self.index.node_ids, node).as_deref(), &self.index.pods.objects);
            let (reason, evidence) = match pod {
                Some(pod) => {
                    let entered = pod.health_since().max(pod.created());
                    let reason = pod_reason(pod.health(), entered, pod.deletion().is_some(), now);
                    // Ready, not yet for minReadySeconds (or the index is not yet told it
                    // matured): on its way.
                    (reason.unwrap_or(Uncovered::Starting), entered)
                }
                None => {
                    let reason = missing_reason(failed_create.map(|f| f.at), since.at, since.observed, now);
                    // Refused since its first FailedCreate at least.
                    (reason, failed_create.map_or(since.at, |f| f.first))
                }
            };
            let detail = match pod {
                Some(pod) => pod.detail().map(|d| &**d),
                None => missing_detail,
            };
            let at = if since.observed { since.at } else { evidence.min(since.at) };
            out.push(UncoveredNode { node, pod, reason, detail, since: at, episode: since.generation });
        }
        out
    }

    /// Uncovered nodes by reason, indexed by `Uncovered::index`.
    pub fn uncovered_nodes_by_reason(&self) -> [u32; Uncovered::ALL.len()] {
        let mut counts = [0; Uncovered::ALL.len()];
        for node in self.uncovered_nodes() {
            counts[node.reason.index()] += 1;
        }
        counts
    }

    /// The nodes this DaemonSet lost (`coverage`), by node name.
    pub fn lost_nodes(&self) -> Vec<LostNode<'a>> {
        self.state
            .lost
            .iter()
            .map(|(node, loss)| LostNode {
                node,
                verdict: &loss.verdict,
                since: loss.started(),
                episode: loss.since.generation,
            })
            .collect()
    }

    /// `daemonset_node_losses_total`: losses so far by (reason, key), sorted.
    pub fn losses(&self) -> Vec<(Reason, &'a Str, u64)> {
        let mut rows: Vec<_> = self.state.losses.iter().map(|((r, k), n)| (*r, k, *n)).collect();
        rows.sort();
        rows
    }

    /// Whether the DaemonSet skips `node` (`shouldRun` is false there).
    pub fn skips(&self, node: &str) -> bool {
        self.skip(node).is_some()
    }

    /// Why the DaemonSet skips `node` (`NodeShouldRunDaemonPod`); `None` when it should run there.
    pub fn skip(&self, node: &str) -> Option<&'a Skip> {
        self.state.skips().get(&self.index.node_ids, node).map(|skipped| &skipped.skip)
    }

    /// The pods the DaemonSet counts on `node`, oldest first, terminating ones included.
    pub fn pods_on(&self, node: &str) -> Vec<&'a Pod> {
        let pods = &self.index.pods.objects;
        let on = self.state.pods_on(&self.index.node_ids, node).into_iter().flat_map(Pods::slots);
        let mut on: Vec<&Pod> = on.map(|slot| pods.at(slot)).collect();
        on.sort_by(|a, b| (a.created(), &a.id).cmp(&(b.created(), &b.id)));
        on
    }

    /// Whether `node` is one the DaemonSet should run on without an available pod.
    pub fn is_uncovered(&self, node: &str) -> bool {
        self.state.uncovered().get(&self.index.node_ids, node).is_some()
    }

    /// Whether the DaemonSet counts a pod on `node`.
    pub fn has_pod(&self, node: &str) -> bool {
        self.state.pods_on(&self.index.node_ids, node).is_some()
    }

    pub fn misscheduled_node_count(&self) -> usize {
        self.state.misscheduled().len()
    }

    /// Misscheduled nodes by reason, indexed by `Reason::index`; sums to the node count.
    pub fn misscheduled_nodes_by_reason(&self) -> [u32; Reason::ALL.len()] {
        nodes_by_reason(&self.misscheduled_pods())
    }

    /// Every claimed pod on a misscheduled node, by node; on each node the oldest
    /// pod (the one the controller looks at first) comes first and decides the node's reason.
    pub fn misscheduled_pods(&self) -> Vec<MisscheduledPod<'a>> {
        self.misscheduled_among(by_node(self.state.misscheduled().iter(&self.index.node_ids)).into_iter())
    }

    /// `misscheduled_pods` on `nodes` only: what a change to a few nodes can move costs
    /// those nodes, not every misscheduled one (thousands at 65,000 nodes).
    pub fn misscheduled_pods_on<'n>(&self, nodes: &'n [Str]) -> Vec<MisscheduledPod<'a>> {
        let misscheduled = |node: &'n Str| Some((node, self.state.misscheduled().get(&self.index.node_ids, node)?));
        self.misscheduled_among(nodes.iter().filter_map(misscheduled))
    }

    fn misscheduled_among<'n>(&self, nodes: impl Iterator<Item = (&'n Str, &'a Since)>) -> Vec<MisscheduledPod<'a>> {
        let index = self.index;
        let mut out = Vec::new();
        for (node_name, since) in nodes {
            let (Some(node), Some(skip)) = (index.nodes.objects.get(node_name), self.skip(node_name)) else {
                continue;
            };
            for (i, pod) in self.pods_on(node_name).into_iter().enumerate() {
                let classification = index.classify(self.ds, skip, node, pod);
                let at = if since.observed {
                    since.at
                } else {
                    classification.evidence_since.map_or(since.at, |e| e.min(since.at))
                };
                out.push(MisscheduledPod {
                    pod,
                    node: &node.name,
                    classification,
                    since: at,
                    counts_node: i == 0,
                    episode: since.generation,
                    observed: since.observed,
                });
            }
        }
        out
    }
}

/// A per-node map's entries by node name: the order every view gives (the maps are hashed).
fn by_node<'a, V>(entries: impl Iterator<Item = (&'a Str, &'a V)>) -> Vec<(&'a Str, &'a V)> {
    let mut entries: Vec<_> = entries.collect();
    entries.sort_unstable_by_key(|(node, _)| *node);
    entries
}
