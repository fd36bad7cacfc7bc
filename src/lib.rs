//! misschedule-exporter: explains why DaemonSet pods are misscheduled.
//!
//! ```text
//!   source (watch | list | snapshot) ──events──▶ index ──views──▶ report (metrics | explain | page) ──▶ http
//!        │ decodes k8s (slim shapes)              │ model, rules     └─▶ publish (Events on DaemonSets)
//!        └── writes through shared ──────────────▶ shared: the index's lock, its generations, readiness
//!                                                  telemetry: self-metrics, read from shared at scrape time
//! ```
//! `model`, `rules`, `k8s` (shapes and conversion), `index` and `report` are pure: no I/O,
//! driven by the unit tests. `source`, `http` and `publish` are the edges; `cli` holds what
//! the two binaries share, `once` the one-shot answer both give (`explain`, the plugin),
//! and `main` only wires them.

pub mod allocator;
pub mod cli;
pub mod clock;
pub mod guard;
pub mod http;
pub mod index;
pub mod k8s;
pub mod model;
pub mod once;
pub mod publish;
pub mod report;
pub mod rules;
pub mod shared;
pub mod source;
pub mod telemetry;
pub mod whatif;
