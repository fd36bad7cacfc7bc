//! Cold start: the four initial lists, paged and decoded as the watcher reads them, into an
//! index, timed apart from the API server's work of encoding them.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use misschedule_exporter::index::{Index, Indexed};
use misschedule_exporter::k8s::slim::{SlimNode, SlimPod};
use misschedule_exporter::source::decode::{Wire, decode};
use misschedule_exporter::source::watch::MAX_BATCH;
use serde::{Deserialize, Serialize};

use crate::rss;
use crate::synth::Shape;

/// One page of a list response, as the API server sends it.
#[derive(Serialize, Deserialize)]
pub(crate) struct Page<T> {
    items: Vec<T>,
}

/// Time spent on one initial list: decoding the JSON, and building the index from it.
#[derive(Default, Clone, Copy)]
pub(crate) struct ColdStart {
    pub(crate) decode: Duration,
    pub(crate) index: Duration,
    /// RSS after the list was applied, before the purge that follows it.
    pub(crate) rss_before_purge: u64,
}

impl ColdStart {
    pub(crate) fn total(self) -> Duration {
        self.decode + self.index
    }
}

impl std::ops::AddAssign for ColdStart {
    fn add_assign(&mut self, other: Self) {
        self.decode += other.decode;
        self.index += other.index;
        self.rss_before_purge = other.rss_before_purge;
    }
}

/// Apply one resource's initial list, page by page: the page's JSON (full API
/// objects, `A`) is produced untimed, as that is the API server's work; decoding
/// into the shape the watcher uses (`W`), the way kube's client decodes it, and
/// applying are timed.
pub(crate) fn initial_list<A, W>(index: &mut Index, objects: impl Iterator<Item = A>, page_size: usize) -> ColdStart
where
    A: Serialize,
    W: Indexed + Wire,
{
    let mut spent = ColdStart::default();
    let mut objects = objects.peekable();
    let started = Instant::now();
    index.apply(Event::<W>::Init).unwrap();
    spent.index += started.elapsed();
    while objects.peek().is_some() {
        let page = Page { items: objects.by_ref().take(page_size).collect::<Vec<A>>() };
        let bytes = serde_json::to_vec(&page).unwrap();
        drop(page);
        let started = Instant::now();
        // As the exporter's own list call reads a page.
        let page: Page<W> = decode::<W, _>(&bytes, "a page", |_| None).unwrap();
        drop(bytes);
        let decoded = Instant::now();
        // In batches, each warmed first, as the watcher applies them (`Watch::apply_batch`).
        let mut items = page.items.into_iter().map(Event::InitApply).peekable();
        while items.peek().is_some() {
            let batch: Vec<_> = items.by_ref().take(MAX_BATCH).collect();
            index.warm(&batch);
            batch.into_iter().for_each(|event| index.apply(event).unwrap());
        }
        spent.decode += decoded - started;
        spent.index += decoded.elapsed();
    }
    let started = Instant::now();
    index.apply(Event::<W>::InitDone).unwrap();
    spent.index += started.elapsed();
    // As the watcher does after each list: its garbage goes back to the kernel at once.
    spent.rss_before_purge = rss();
    let started = Instant::now();
    assert!(misschedule_exporter::allocator::purge(), "jemalloc refused the purge");
    spent.index += started.elapsed();
    spent
}

/// An index of `shape` built from its four initial lists, in the watcher's order: nodes,
/// DaemonSets, revisions, pods. `after_each(list)` runs after each, numbered 0 to 3.
pub(crate) fn synced_index(shape: &Shape, mut after_each: impl FnMut(usize)) -> (Index, ColdStart) {
    let mut index = Index::default();
    index.set_now(1_780_000_000);
    let mut cold = initial_list::<Node, SlimNode>(&mut index, (0..shape.nodes).map(|i| shape.node(i)), 500);
    after_each(0);
    cold += initial_list::<DaemonSet, DaemonSet>(&mut index, (0..shape.daemonsets).map(|j| shape.daemonset(j)), 500);
    after_each(1);
    cold += initial_list::<ControllerRevision, ControllerRevision>(
        &mut index,
        (0..shape.daemonsets).flat_map(|j| [shape.revision(j, 1), shape.revision(j, 2)]),
        500,
    );
    after_each(2);
    cold += initial_list::<Pod, SlimPod>(&mut index, shape.pod_slots().map(|(j, i)| shape.pod(j, i, 0)), 500);
    after_each(3);
    (index, cold)
}
