//! misschedule-exporter: explains why DaemonSet pods are misscheduled.
//!
//! The pure core (`model`, `eligibility`, `reason`, `index`) holds no I/O and
//! is what the unit tests drive; `watch`, `snapshot` and `server` (with `tls`, `auth` and
//! `token_review`) are the edges.

pub mod auth;
pub mod convert;
pub mod eligibility;
pub mod explain;
pub mod index;
pub mod interner;
pub mod metrics;
pub mod model;
pub mod reason;
pub mod reload;
pub mod resources;
pub mod server;
pub mod snapshot;
pub mod tls;
pub mod token_review;
pub mod validation;
pub mod watch;
