//! The log of a watch's failures: one error line when a burst of them begins, one info line
//! when its relist completes, debug lines between.

use std::time::{Duration, Instant};

use crate::index::Resource;
use crate::shared::HEALTHY_AFTER_CLEAN;
use crate::source::progress::Failure;
use crate::source::retry::Attempt;

/// The log of one watch's failures: a burst of them (a watch failing again and again until
/// it recovers) is one error line when it starts and one info line when a relist
/// completes, however many attempts it takes; the attempts between are debug lines.
pub struct Burst {
    resource: Resource,
    pub namespace: String,
    /// When the burst began, and its failures so far.
    since: Option<(Instant, u32)>,
    /// The burst's relist completed and was logged; later ones in the burst are not.
    resynced: bool,
}

impl Burst {
    pub fn new(resource: Resource, namespace: &str) -> Self {
        Self { resource, namespace: namespace.to_owned(), since: None, resynced: false }
    }

    pub fn failed(&mut self, attempt: Attempt, failure: Failure, error: &str, retry_in: Duration) {
        let resource = self.resource.as_str();
        let namespace = self.namespace.as_str();
        let reason = failure.as_str();
        // A watch that ran clean long enough to be healthy again ended the last burst.
        let recovered = attempt.watched.is_some_and(|w| w >= HEALTHY_AFTER_CLEAN);
        match &mut self.since {
            Some((_, failures)) if !recovered => {
                *failures += 1;
                tracing::debug!(resource, namespace, reason, %error, ?retry_in, "watch failed again");
            }
            _ => {
                self.since = Some((Instant::now(), 1));
                self.resynced = false;
                tracing::error!(
                    resource, namespace, reason, %error, ?retry_in,
                    "watch failed; serving the last known state and relisting with backoff (logged once until it recovers)"
                );
            }
        }
    }

    /// A list completed, `took` after the attempt began.
    pub fn listed(&mut self, took: Duration) {
        let (resource, namespace) = (self.resource.as_str(), self.namespace.as_str());
        match self.since {
            None => tracing::info!(resource, namespace, ?took, "cache synced"),
            Some((since, failures)) if !self.resynced => {
                self.resynced = true;
                tracing::info!(resource, namespace, failures, after = ?since.elapsed(), "cache resynced after failures");
            }
            Some(_) => tracing::debug!(resource, namespace, ?took, "cache resynced"),
        }
    }
}
