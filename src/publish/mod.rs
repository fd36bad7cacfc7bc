//! Writes to the cluster: Kubernetes Events on DaemonSets, so `kubectl describe daemonset`
//! says why. What an Event says, built from the index (`notice`), which notices are new
//! (`transitions`), which wait for the index to catch up (`settle`), what one look at the
//! index calls for (`look`) and how fast Events may be written (`rate_limit`) are pure;
//! `events` sends them, after `restore` has read back the losses an earlier run told.

pub mod events;
pub mod look;
pub mod notice;
pub mod rate_limit;
pub mod restore;
pub mod settle;
pub mod transitions;
