//! The four watched resources, and how each enters the index: the wire types decode into a
//! compact model type (`Indexed`), which the index stores under its key (`Stored`). Each
//! kind's implementations are in its own file (`node.rs`, `daemonset.rs`, `revision.rs`,
//! `pod.rs`).

use kube::runtime::watcher::Event;

use super::{Index, Store};
use crate::k8s::convert::{self, ConvertError};
use crate::model::Str;
use crate::model::interner::Interner;

/// The four watched resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Nodes,
    DaemonSets,
    ControllerRevisions,
    Pods,
}

impl Resource {
    pub const ALL: [Resource; 4] =
        [Resource::Nodes, Resource::DaemonSets, Resource::ControllerRevisions, Resource::Pods];

    /// The API kind, for messages.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Nodes => "Node",
            Resource::DaemonSets => "DaemonSet",
            Resource::ControllerRevisions => "ControllerRevision",
            Resource::Pods => "Pod",
        }
    }

    /// The API resource name, as the `resource` label spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Nodes => "nodes",
            Resource::DaemonSets => "daemonsets",
            Resource::ControllerRevisions => "controllerrevisions",
            Resource::Pods => "pods",
        }
    }
}

/// A compact model type the index stores: its store, its key, and the index's own
/// bookkeeping when one comes or goes.
pub trait Stored: Sized {
    const RESOURCE: Resource;
    /// Nodes are keyed by name, everything else by UID; read from the metadata's spelling.
    type Key: Clone + Eq + std::hash::Hash + std::fmt::Debug + for<'a> From<&'a str>;
    fn key(&self) -> &Self::Key;
    /// `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&Str>;
    fn store(index: &mut Index) -> &mut Store<Self>;
    fn upsert(self, index: &mut Index);
    fn remove(index: &mut Index, key: &Self::Key);

    /// Looks up what `upsert` of each of `listed` will read, and changes nothing: a finished
    /// list upserts its objects a run at a time, each run after this (see `Indexed::warm`).
    fn warm_upserts(_listed: &[Self], _index: &Index) {}
}

/// A wire type the watchers and the snapshot reader decode and the index takes.
pub trait Indexed: kube::Resource<DynamicType = ()> + Sized {
    type Compact: Stored;
    const RESOURCE: Resource = <Self::Compact as Stored>::RESOURCE;

    fn convert(&self, interner: &mut Interner) -> Result<Self::Compact, ConvertError>;

    /// Whether the index already holds exactly what `convert` would produce, so the event
    /// can be skipped without converting. `false` when unsure.
    fn unchanged(&self, _index: &Index) -> bool {
        false
    }

    /// Looks up the cached objects of a batch of events, which `unchanged` (or a delete)
    /// will read, and changes nothing. Done for all of them before any is applied, in a loop
    /// that does nothing else, the lookups overlap in the CPU; applied one after another,
    /// each waits on memory in turn (at 2.6M daemon pods, three trips: the table's control
    /// bytes, its bucket, the object).
    fn warm(_batch: &[Event<Self>], _index: &Index) {}

    /// The cache key, straight from the metadata (a delete needs nothing more): nodes are
    /// cached by name, everything else by UID.
    fn raw_key(&self) -> Result<&str, ConvertError> {
        let meta = self.meta();
        let (key, field) = match Self::RESOURCE {
            Resource::Nodes => (meta.name.as_deref(), "metadata.name"),
            _ => (meta.uid.as_deref(), "metadata.uid"),
        };
        key.filter(|k| !k.is_empty()).ok_or_else(|| ConvertError {
            kind: Self::RESOURCE.kind(),
            name: convert::describe(meta),
            problem: format!("missing {field}"),
        })
    }
}

/// The object a watch event applies or deletes; `None` for the markers of a relist.
pub(super) fn changed<K>(event: &Event<K>) -> Option<&K> {
    match event {
        Event::Apply(obj) | Event::Delete(obj) => Some(obj),
        Event::Init | Event::InitApply(_) | Event::InitDone => None,
    }
}
