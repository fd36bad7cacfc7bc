//! Writes to the cluster: Kubernetes Events on DaemonSets, so `kubectl describe daemonset`
//! says why. What an Event says, built from the index (`notice`), which notices are new
//! (`transitions`) and how fast they may be written (`rate_limit`) are pure; `events` sends them,
//! after `restore` has read back the losses an earlier run told.

pub mod events;
pub mod notice;
pub mod rate_limit;
pub mod restore;
pub mod transitions;
