//! misschedule-exporter: explains why DaemonSet pods are misscheduled.
//!
//! ```text
//!   source (watch | snapshot) ──events──▶ index ──views──▶ report (metrics | explain | page) ──▶ http
//!        │ decodes k8s (slim shapes)       │ keeps model,    │ asks rules why   (transitions) ──▶ publish (Events)
//!        └──reports to telemetry           │ converted by k8s└─ telemetry: self-metrics, readiness, clock
//! ```
//! `model`, `rules`, `k8s` (shapes and conversion) and `index` are pure: no I/O, driven by the
//! unit tests. `source`, `http` and `publish` are the edges; `main` only wires them.

pub mod allocator;
pub mod http;
pub mod index;
pub mod k8s;
pub mod model;
pub mod publish;
pub mod report;
pub mod rules;
pub mod source;
pub mod telemetry;
