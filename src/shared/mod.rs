//! What the watch tasks, the HTTP edge, the Event publisher and the collectors share: the
//! index behind one lock, each new generation of it on a channel, and readiness.
//!
//! Writers go through [`Shared::update`], which publishes the index's generation once the
//! lock is released, so readers wait on [`Shared::generations`] instead of polling. The index is
//! only ever mutated through methods that leave it consistent, and parking_lot's locks do
//! not poison, so a panic elsewhere cannot take `/metrics` down with it.

mod readiness;

use std::time::Duration;

use parking_lot::{RwLock, RwLockReadGuard};
use tokio::sync::watch;
use tokio::time::Instant;

pub use self::readiness::{HEALTHY_AFTER_CLEAN, Readiness, WatchHealth};
use crate::index::{Index, Resource};

#[derive(Debug)]
pub struct Shared {
    index: RwLock<Index>,
    generation: watch::Sender<u64>,
    pub readiness: Readiness,
}

impl Shared {
    pub fn new(index: Index) -> Self {
        let (generation, _) = watch::channel(index.generation());
        Self { index: RwLock::new(index), generation, readiness: Readiness::default() }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read()
    }

    /// The index itself, once nothing else shares it (the scale bench times events on it
    /// without the lock).
    pub fn into_index(self) -> Index {
        self.index.into_inner()
    }

    /// Change the index, then tell the subscribers if its generation moved.
    pub fn update<R>(&self, change: impl FnOnce(&mut Index) -> R) -> R {
        let (result, generation) = {
            let mut index = self.index.write();
            let result = change(&mut index);
            (result, index.generation())
        };
        // Most events move nothing (status updates): skip the channel's lock for them.
        if *self.generation.borrow() != generation {
            self.generation.send_replace(generation);
        }
        result
    }

    /// Each new generation of the index from now on, at most one per `spacing`.
    pub fn generations(&self, spacing: Duration) -> Generations {
        Generations { receiver: self.generation.subscribe(), spacing, last: None }
    }

    /// Readiness: the resources that have not listed yet or whose watch is failing.
    pub fn not_ready(&self) -> Vec<Resource> {
        let index = self.read();
        Resource::ALL.into_iter().filter(|&r| !index.is_synced(r) || !self.readiness.healthy(r)).collect()
    }

    /// Each resource that is not ready, and why, one line each: `nodes: not listed yet`,
    /// or the watch's last failure (`nodes: nodes is forbidden: …; grant …`).
    pub fn problems(&self) -> Vec<String> {
        let synced = {
            let index = self.read();
            Resource::ALL.map(|r| index.is_synced(r))
        };
        let lines = Resource::ALL
            .into_iter()
            .zip(synced)
            .filter_map(|(resource, synced)| {
                let name = resource.as_str();
                match (synced, self.readiness.failure(resource)) {
                    (true, None) => None,
                    (false, None) => Some(format!("{name}: not listed yet")),
                    (true, Some(why)) => Some(format!("{name}: watch failing, serving the last list: {why}")),
                    (false, Some(why)) => Some(format!("{name}: cannot list: {why}")),
                }
            })
            .collect();
        said_once(lines)
    }
}

/// Lines whose advice (what follows their last `; `) a later line repeats, without it: every
/// resource refused for one token needs the same grant, said once, last.
fn said_once(mut lines: Vec<String>) -> Vec<String> {
    let advice = |line: &str| line.rfind("; ").map(|at| line[at..].to_owned());
    for i in 0..lines.len() {
        if let Some(tail) = advice(&lines[i]).filter(|tail| lines[i + 1..].iter().any(|l| l.ends_with(tail.as_str()))) {
            let kept = lines[i].len() - tail.len();
            lines[i].truncate(kept);
        }
    }
    lines
}

/// New generations of the index, coalesced: a reader that redoes work per generation (the
/// Event publisher, `--watch`) sees only the latest, and at most one per `spacing`, so churn
/// cannot make it spin.
#[derive(Debug)]
pub struct Generations {
    receiver: watch::Receiver<u64>,
    spacing: Duration,
    last: Option<Instant>,
}

impl Generations {
    /// The current generation at once on the first call; after that, the next one not yet
    /// seen, no sooner than `spacing` after the last. `None` once the index is gone.
    pub async fn next(&mut self) -> Option<u64> {
        if let Some(last) = self.last {
            tokio::time::sleep_until(last + self.spacing).await;
            self.receiver.changed().await.ok()?;
        }
        self.last = Some(Instant::now());
        Some(*self.receiver.borrow_and_update())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Config;

    #[test]
    fn the_same_advice_is_said_once_last() {
        let lines = said_once(vec![
            "nodes: nodes is forbidden (HTTP 403); grant it".into(),
            "pods: not listed yet".into(),
            "pods: pods is forbidden (HTTP 403); grant it".into(),
            "revisions: HTTP 500: oops; try later".into(),
        ]);
        assert_eq!(lines[0], "nodes: nodes is forbidden (HTTP 403)");
        assert_eq!(lines[1], "pods: not listed yet");
        assert_eq!(lines[2], "pods: pods is forbidden (HTTP 403); grant it");
        assert_eq!(lines[3], "revisions: HTTP 500: oops; try later");
    }

    #[tokio::test(start_paused = true)]
    async fn readers_wake_on_each_new_generation_coalesced_and_spaced() {
        let shared = Shared::new(Index::new(Config::default()));
        let mut generations = shared.generations(Duration::from_millis(200));
        let first = generations.next().await.unwrap();
        // A change that moves nothing wakes nobody.
        shared.update(|_| ());
        let started = Instant::now();
        let quiet = tokio::time::timeout(Duration::from_secs(5), generations.next()).await;
        assert!(quiet.is_err(), "woken without a new generation");
        // Three changes in a row are one wake, no sooner than the spacing.
        let mut generations = shared.generations(Duration::from_millis(200));
        assert_eq!(generations.next().await, Some(first));
        let started_burst = Instant::now();
        for _ in 0..3 {
            shared.update(|index| index.relist::<k8s_openapi::api::apps::v1::DaemonSet>([]).unwrap());
        }
        let latest = shared.read().generation();
        assert_eq!(generations.next().await, Some(latest));
        assert!(started_burst.elapsed() >= Duration::from_millis(200));
        assert!(started.elapsed() >= Duration::from_secs(5));
    }

    #[test]
    fn problems_name_each_resource_until_its_first_list_even_an_empty_one() {
        use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
        let shared = Shared::new(Index::new(Config::default()));
        assert_eq!(shared.problems().len(), 4);
        assert_eq!(shared.problems()[0], "nodes: not listed yet");
        shared.update(|index| index.relist::<crate::k8s::slim::SlimNode>([]).unwrap());
        shared.update(|index| index.relist::<DaemonSet>([]).unwrap());
        shared.update(|index| index.relist::<ControllerRevision>([]).unwrap());
        assert_eq!(shared.problems(), ["pods: not listed yet"]);
        let watch = shared.readiness.watch(Resource::Pods);
        watch.failed("pods is forbidden (HTTP 403); grant it");
        assert_eq!(shared.problems(), ["pods: cannot list: pods is forbidden (HTTP 403); grant it"]);
        shared.update(|index| index.relist::<crate::k8s::slim::SlimPod>([]).unwrap());
        assert_eq!(
            shared.problems(),
            ["pods: watch failing, serving the last list: pods is forbidden (HTTP 403); grant it"]
        );
        assert!(shared.read().synced(), "four empty lists make a synced index");
    }
}
