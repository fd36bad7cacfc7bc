//! What-if: which daemon pods a change to nodes or DaemonSets would delete, strand as
//! misscheduled, bring back or create, before anyone makes it.
//!
//! ```text
//!   kubectl syntax ──edit──▶ the nodes as they would be ─┐
//!   DaemonSet manifests ─────────────────────────────────┴─▶ simulate: the index before and
//!                                                             after, diffed by `effect`
//! ```
//! The change goes through the same `Index::apply`, eligibility, claiming and reasons as
//! the exporter's watches, on the caller's own index: what-if and the exporter cannot
//! disagree. Pure; the plugin reads the cluster or a snapshot and prints the `Answer`.

pub mod edit;
pub mod effect;
pub mod selector;
pub mod simulate;
pub mod text;

use serde::{Deserialize, Serialize};

pub use self::effect::Effect;
use crate::k8s::convert::ConvertError;

#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error("{0}")]
    Manifest(String),
    #[error(transparent)]
    Invalid(#[from] ConvertError),
}

/// The answer: what was looked at, each pair the change moves, and desired counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub looked_at: LookedAt,
    pub changes: Vec<Row>,
    pub desired: Vec<Desired>,
    /// Pods on pairs the change moves that are already being deleted: no change, since
    /// the controller acts there only once they are gone.
    #[serde(default)]
    pub terminating: Vec<Terminating>,
}

impl Answer {
    /// Whether some pod would be deleted or left misscheduled (`--exit-code`).
    pub fn disrupts(&self) -> bool {
        self.changes.iter().any(|row| row.effect.disrupts())
    }
}

/// What the answer covers, so that "nothing changes" is never said of what was not checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookedAt {
    /// The change, as given (`label n1 gpu-`).
    pub change: String,
    /// `cluster SERVER` or `snapshot FILE, ...`.
    pub source: String,
    /// The namespace of the DaemonSets; none means all.
    pub namespace: Option<String>,
    pub daemonset: Option<String>,
    /// How many DaemonSets and nodes were checked.
    pub daemonsets: usize,
    pub nodes: usize,
}

/// One pair the change moves, with the pod there (empty for `create`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub namespace: String,
    pub daemonset: String,
    pub node: String,
    pub pod: String,
    pub effect: Effect,
    /// `delete`, `misschedule`: the reason the misscheduled pod would get; `recover`: the
    /// one it has; `create`: why the node was skipped until now, or `daemonset_created`.
    pub reason: String,
    pub key: String,
}

impl Row {
    fn concerns(&self, desired: &Desired) -> bool {
        self.namespace == desired.namespace && self.daemonset == desired.daemonset
    }
}

/// `desiredNumberScheduled` of a DaemonSet, before and after (0 before for a new one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    pub namespace: String,
    pub daemonset: String,
    pub before: usize,
    pub after: usize,
}

/// A pod already terminating on a pair the change moves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminating {
    pub namespace: String,
    pub daemonset: String,
    pub node: String,
    pub pod: String,
}
