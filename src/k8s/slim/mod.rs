//! The shapes the exporter watches: Pods and Nodes with only the fields
//! classification reads. serde skips everything else while parsing (containers,
//! all of a pod's status but its phase, a pod's annotations and managedFields and
//! most of a node's, owner references but their UID, node images…), which is most
//! of each object's JSON, so lists decode several times faster and nothing large is
//! ever allocated.
//!
//! They are ordinary `kube::Resource`s: the watcher and the snapshot reader
//! decode straight into them. `meta` reads the metadata both share; `pod` and `node`
//! the rest of each.

mod meta;
mod node;
mod pod;

pub use self::node::{NodeTaintsSpec, SlimNode};
pub use self::pod::{
    PodAffinity, PodFieldRequirement, PodNodeAffinity, PodNodeSelector, PodNodeSelectorTerm, PodPhase, PodPlacement,
    PodToleration, SlimPod, is_terminal_phase,
};
