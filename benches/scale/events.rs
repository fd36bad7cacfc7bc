//! Watch events: the mix applied to a synced index, timed by kind, and the same mix applied
//! by turns to a smaller index beside it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{Index, Indexed};
use misschedule_exporter::k8s::slim::{SlimNode, SlimPod};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cold_start::synced_index;
use crate::synth::{self, Shape};

/// Applies `events` (and drops them) as the watcher applies a batch (`Watch::apply_batch`),
/// adding their count and the time it took to `kind`. Never inlined, so that a profile can
/// keep only the samples under it (the events applied, not the making of them).
#[inline(never)]
pub(crate) fn timed<K: Indexed>(index: &mut Index, events: Vec<Event<K>>, kind: &mut (usize, Duration)) {
    let count = events.len();
    let started = Instant::now();
    index.warm(&events);
    for event in events {
        index.apply(event).unwrap();
    }
    kind.1 += started.elapsed();
    kind.0 += count;
}

/// Events made, then applied, at a time (see `EventMix`).
pub(crate) const EVENT_BATCH: usize = 32;

/// Watch events: 80% pod status updates, 10% node heartbeats, 1% drain taints added or
/// removed, 9% pods deleted and recreated, on pods and nodes picked at random. Drains
/// alternate: one taints a node that is not drained, the next untaints one picked at random
/// among those that are, so that the same share of nodes (1%) stays drained at either size.
/// Flipping random nodes would drift toward half of them drained, which 5,000 nodes reach
/// within their first 10,000 drains and 65,000 never do: the two sizes would be measured in
/// states of their own, one of them with every DaemonSet's tables growing throughout. A
/// heartbeat sends the node as it is. Each is encoded as the API server sends it and decoded
/// into the watcher's shape (untimed); applying it, and dropping it, is timed. The watcher
/// applies at most 64 decoded events at a time, so the allocator reuses what the last batch
/// freed; events are made in small batches to keep that true here.
pub(crate) struct EventMix<'s> {
    shape: &'s Shape,
    /// Whether each node carries the drain taint now, as the events sent it last.
    drained: Vec<bool>,
    /// The nodes `drained` marks, in no order: an undrain picks one of them.
    draining: Vec<usize>,
    /// Drain events so far: odd ones taint, even ones untaint.
    drains: u64,
    nonce: u64,
    /// Every event of this kind (`Options::only`), in place of the mix.
    only: Option<usize>,
}

/// A drain's cost in times an event of another kind, and drains' share (`ByKind::drains`).
pub(crate) struct DrainShare {
    times_lowest: f64,
    times_highest: f64,
    of_time: f64,
    of_events: f64,
}

/// Time spent on each kind of event, to show which kind a bigger cluster makes dearer.
#[derive(Default)]
pub(crate) struct ByKind([(usize, Duration); 4]);

impl ByKind {
    const KINDS: [&str; 4] =
        ["pod status updates", "node heartbeats", "drain taints on or off", "pods deleted and recreated"];
    /// Each kind in a word, as `--only` takes it.
    pub(crate) const NAMES: [&str; 4] = ["updates", "heartbeats", "drains", "recreations"];

    pub(crate) fn count(&self) -> usize {
        self.0.iter().map(|(count, _)| count).sum()
    }

    fn add(&mut self, other: &Self) {
        for ((count, spent), (more, longer)) in self.0.iter_mut().zip(&other.0) {
            *count += more;
            *spent += *longer;
        }
    }

    fn spent(&self) -> Duration {
        self.0.iter().map(|(_, spent)| *spent).sum()
    }

    pub(crate) fn rate(&self) -> f64 {
        self.count() as f64 / self.spent().as_secs_f64()
    }

    /// What a drain cost against each other kind seen, and drains' share of the time and of
    /// the events; `None` without drains or other kinds. Computed where the times are, so
    /// that the prose about drains cannot drift from the figures.
    fn drains(&self) -> Option<DrainShare> {
        const DRAINS: usize = 2;
        let per_event: Vec<(f64, usize)> = self.each().map(|(_, us, count)| (us, count)).collect();
        let (drain_us, drains) = per_event[DRAINS];
        let others = per_event.iter().enumerate().filter(|&(kind, &(_, count))| kind != DRAINS && count > 0);
        let times: Vec<f64> = others.map(|(_, &(us, _))| drain_us / us).collect();
        (drains > 0 && !times.is_empty()).then(|| DrainShare {
            times_lowest: times.iter().copied().fold(f64::INFINITY, f64::min),
            times_highest: times.iter().copied().fold(0.0, f64::max),
            of_time: self.0[DRAINS].1.as_secs_f64() / self.spent().as_secs_f64(),
            of_events: drains as f64 / self.count() as f64,
        })
    }

    /// Each kind, its µs per event and its count.
    pub(crate) fn each(&self) -> impl Iterator<Item = (&'static str, f64, usize)> + '_ {
        Self::KINDS
            .into_iter()
            .zip(&self.0)
            .map(|(kind, (count, spent))| (kind, spent.as_secs_f64() * 1e6 / (*count).max(1) as f64, *count))
    }
}

impl<'s> EventMix<'s> {
    pub(crate) fn new(shape: &'s Shape, only: Option<usize>) -> Self {
        let drained: Vec<bool> = (0..shape.nodes).map(|i| shape.draining(i)).collect();
        let draining = (0..shape.nodes).filter(|&i| drained[i]).collect();
        Self { shape, drained, draining, drains: 0, nonce: 1, only }
    }

    /// The node the next drain event flips, from the node `picked` at random: a taint goes
    /// to the first node from there on that is not drained, and an untaint to a drained
    /// node that `picked` chooses too.
    fn flip_drain(&mut self, picked: usize) -> usize {
        self.drains += 1;
        let nodes = self.drained.len();
        let free = (picked..picked + nodes).map(|i| i % nodes).find(|&i| !self.drained[i]);
        match free {
            Some(i) if self.drains % 2 == 1 || self.draining.is_empty() => {
                self.draining.push(i);
                self.drained[i] = true;
                i
            }
            // Every node drained, or an untaint's turn: `draining` holds some node.
            _ => {
                let i = self.draining.swap_remove(picked % self.draining.len());
                self.drained[i] = false;
                i
            }
        }
    }

    /// Node `i` as it is now: with the drain taint where `drained` says so.
    fn node(&self, i: usize) -> Node {
        let mut node = self.shape.node(i);
        let taints = node.spec.as_mut().unwrap().taints.get_or_insert_default();
        let has = taints.iter().any(|t| t.key == synth::DRAIN_TAINT);
        if has && !self.drained[i] {
            taints.retain(|t| t.key != synth::DRAIN_TAINT);
        } else if !has && self.drained[i] {
            let taint = serde_json::json!({"key": synth::DRAIN_TAINT, "value": "1", "effect": "NoSchedule"});
            taints.push(serde_json::from_value(taint).unwrap());
        }
        node
    }

    /// The kind of the event numbered `nonce`, as `ByKind::KINDS` numbers them.
    fn kind(&self, nonce: u64) -> usize {
        self.only.unwrap_or(match nonce % 100 {
            0..=79 => 0,
            80..=89 => 1,
            90 => 2,
            _ => 3,
        })
    }

    /// Applies about `count` more events to `index` (a recreation is two, and a batch is
    /// not cut in the middle of one), timed by kind into `by_kind`.
    pub(crate) fn apply(&mut self, index: &mut Index, count: usize, by_kind: &mut ByKind) {
        let shape = self.shape;
        let mut applied = 0usize;
        while applied < count {
            let (mut updates, mut heartbeats, mut drains, mut recreations) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..EVENT_BATCH.min(count - applied) {
                self.nonce += 1;
                let nonce = self.nonce;
                let (j, i) = shape.pod_slot(nonce.wrapping_mul(2_654_435_761));
                match self.kind(nonce) {
                    0 => updates.push(Event::Apply(decoded::<SlimPod>(&shape.pod(j, i, nonce)))),
                    1 => heartbeats.push(Event::Apply(decoded::<SlimNode>(&self.node(i)))),
                    2 => {
                        let i = self.flip_drain(i);
                        drains.push(Event::Apply(decoded::<SlimNode>(&self.node(i))));
                    }
                    _ => {
                        let pod = shape.pod(j, i, nonce);
                        recreations.push(Event::Delete(decoded::<SlimPod>(&pod)));
                        recreations.push(Event::Apply(decoded::<SlimPod>(&pod)));
                    }
                }
            }
            applied += updates.len() + heartbeats.len() + drains.len() + recreations.len();
            timed(index, heartbeats, &mut by_kind.0[1]);
            timed(index, drains, &mut by_kind.0[2]);
            timed(index, updates, &mut by_kind.0[0]);
            timed(index, recreations, &mut by_kind.0[3]);
        }
    }
}

/// Events applied alternately to `index` (`events` goes on with its mix) and to an index of
/// `nodes` nodes built beside it, in blocks, `count` each: this host's speed drifts by tens of
/// percent between runs minutes apart, so a ratio of two runs says more about the host than
/// the index. Each block starts with the caches warm for the other index, as a block of a
/// run of its own does not; blocks of 50,000 events make that a small share.
pub(crate) fn alternating(index: &mut Index, events: &mut EventMix<'_>, nodes: usize, count: usize) -> String {
    const BLOCK: usize = 50_000;
    let shape = events.shape;
    let small_shape = Shape { nodes, ..*shape };
    let (mut small, _) = synced_index(&small_shape, |_| {});
    let mut small_events = EventMix::new(&small_shape, events.only);
    let (mut large_kinds, mut small_kinds) = (ByKind::default(), ByKind::default());
    // Each pair of blocks' ratio too: their spread says how far one run's ratio can be
    // trusted on this host.
    let mut ratios = Vec::new();
    let mut done = 0;
    while done < count {
        let block = BLOCK.min(count - done);
        let (mut large_block, mut small_block) = (ByKind::default(), ByKind::default());
        events.apply(index, block, &mut large_block);
        small_events.apply(&mut small, block, &mut small_block);
        ratios.push(large_block.rate() / small_block.rate());
        large_kinds.add(&large_block);
        small_kinds.add(&small_block);
        done += block;
    }
    ratios.sort_by(f64::total_cmp);
    let quartile = |q: usize| ratios.get(ratios.len().saturating_sub(1) * q / 4).copied().unwrap_or(f64::NAN);
    let ratio = large_kinds.rate() / small_kinds.rate();
    let only = events.only.map_or(String::new(), |kind| format!(" Only {} here (`--only`).", ByKind::KINDS[kind]));
    let mut out = format!(
        "Events alternating: {count} events each, in blocks of {BLOCK}, applied by turns to the index of {} nodes and to one of {nodes} nodes built beside it in the same process, both with {} DaemonSets.{only}\n\n",
        shape.nodes, shape.daemonsets
    );
    out += &format!(
        "| measure | {} nodes | {nodes} nodes | speed at {} ÷ at {nodes} | target | met |\n|---|---|---|---|---|---|\n",
        shape.nodes, shape.nodes
    );
    out += &format!(
        "| watch events applied, per second | {:.0} | {:.0} | {ratio:.2}× | ≥ 0.9× | {} |\n",
        large_kinds.rate(),
        small_kinds.rate(),
        if ratio >= 0.9 { "yes" } else { "**no**" }
    );
    out += &format!(
        "| the same, each pair of blocks: lowest, quartiles, highest ({} pairs) | | | {:.2}× {:.2}× {:.2}× {:.2}× {:.2}× | | |\n",
        ratios.len(),
        quartile(0),
        quartile(1),
        quartile(2),
        quartile(3),
        quartile(4)
    );
    for ((kind, large, count), (_, small, _)) in large_kinds.each().zip(small_kinds.each()) {
        if count == 0 {
            continue;
        }
        out += &format!("| of which: {kind}, µs per event | {large:.2} | {small:.2} | {:.2}× | | |\n", small / large);
    }
    for (size, kinds) in [(shape.nodes, &large_kinds), (nodes, &small_kinds)] {
        if let Some(drains) = kinds.drains() {
            out += &format!(
                "\nAt {size} nodes a drain cost {:.0} to {:.0} times an event of another kind, and drains, {:.1}% of the events, took {:.0}% of the time.\n",
                drains.times_lowest,
                drains.times_highest,
                drains.of_events * 100.0,
                drains.of_time * 100.0
            );
        }
    }
    out
}

/// `object` as the watcher gets it: encoded by the API server, decoded into shape `W`.
pub(crate) fn decoded<W: DeserializeOwned>(object: &impl Serialize) -> W {
    serde_json::from_slice(&serde_json::to_vec(object).unwrap()).unwrap()
}
