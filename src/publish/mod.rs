//! Writes to the cluster: Events on DaemonSets about their misscheduled pods (`events`).
//! I/O, like `http`; what to write is decided in `report::transitions`.

pub mod events;
