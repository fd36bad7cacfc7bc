//! One answer, read once: what `misschedule-exporter explain` and `kubectl misschedule` do
//! without a watch. The cluster is listed (or the snapshot loaded) for the namespaces
//! asked, and the answer names what was read; a namespace or DaemonSet that is not there
//! is an error, never an empty answer.

use kube::Client;

use crate::index::Index;
use crate::report::explain::{self, Explanation, Selection};
use crate::report::scope::{Origin, ScopeError};
use crate::source::list::{self, ListError};
use crate::source::snapshot::{Snapshot, SnapshotError};

/// An index read once, and what it was read from.
pub struct Reading {
    pub index: Index,
    pub origin: Origin,
    /// Misscheduled pods outside the one namespace read, from the DaemonSets' status:
    /// lists of one namespace cannot count them.
    misscheduled_elsewhere: Option<usize>,
}

impl Reading {
    /// Nodes cluster-wide and the rest of `namespaces` (all when empty) from `server`.
    pub async fn cluster(
        mut index: Index,
        client: &Client,
        server: &str,
        namespaces: Vec<String>,
        pod_selector: &str,
    ) -> Result<Self, ListError> {
        list::list_into(&mut index, client, &namespaces, pod_selector).await?;
        let misscheduled_elsewhere = match namespaces.as_slice() {
            [only] => list::misscheduled_elsewhere(client, only).await,
            _ => None,
        };
        Ok(Self { index, origin: Origin::read_once(format!("cluster {server}"), namespaces), misscheduled_elsewhere })
    }

    /// The snapshot's nodes and the rest of `namespaces` (all when empty). A namespace the
    /// snapshot holds nothing of is an error.
    pub fn snapshot(mut index: Index, snapshot: Snapshot, namespaces: Vec<String>) -> Result<Self, SnapshotError> {
        snapshot.check_namespaces(&namespaces)?;
        let source = format!("snapshot {}", snapshot.files());
        snapshot.load_into(&mut index, &namespaces)?;
        Ok(Self { index, origin: Origin::read_once(source, namespaces), misscheduled_elsewhere: None })
    }

    /// The answer for `selection`, naming what it looked at.
    pub fn explain(&self, selection: &Selection, now: i64) -> Result<Explanation, ScopeError> {
        self.origin.check(selection)?;
        let mut explanation = explain::explain(&self.index, selection, &self.origin, now);
        if let Some(looked_at) = &mut explanation.looked_at {
            looked_at.check()?;
            if looked_at.misscheduled_elsewhere.is_none() && selection.daemonset().is_none() {
                looked_at.misscheduled_elsewhere = self.misscheduled_elsewhere;
            }
        }
        Ok(explanation)
    }
}
