//! The four watched resources, and how each enters the index: the wire types decode into a
//! compact model type (`Indexed`), which the index stores under its key (`Stored`).

// The API's own types go by their group (`apps::DaemonSet`); bare names are the model's.
use k8s_openapi::api::apps::v1::{self as apps, ControllerRevision};

use super::{Index, Store};
use crate::k8s::convert::{self, ConvertError};
use crate::k8s::slim::{SlimNode, SlimPod};
use crate::model::interner::Interner;
use crate::model::{DaemonSet, Node, Pod, Revision, Str, Uid};

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
    /// Nodes are keyed by name, everything else by UID.
    type Key: Clone + Eq + std::hash::Hash + std::fmt::Debug;
    fn key(&self) -> &Self::Key;
    /// The key as the metadata spells it.
    fn parse_key(raw: &str) -> Self::Key;
    /// `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&Str>;
    fn store(index: &mut Index) -> &mut Store<Self>;
    fn upsert(self: Box<Self>, index: &mut Index);
    fn remove(index: &mut Index, key: &Self::Key);
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

// --- the model types ---------------------------------------------------------

impl Stored for Node {
    const RESOURCE: Resource = Resource::Nodes;
    type Key = Str;
    fn parse_key(raw: &str) -> Str {
        Str::from(raw)
    }
    fn key(&self) -> &Self::Key {
        &self.name
    }
    fn namespace(&self) -> Option<&Str> {
        None
    }
    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.nodes
    }
    fn upsert(self: Box<Self>, index: &mut Index) {
        index.upsert_node(self);
    }
    fn remove(index: &mut Index, key: &Self::Key) {
        index.remove_node(key);
    }
}

impl Stored for DaemonSet {
    const RESOURCE: Resource = Resource::DaemonSets;
    type Key = Str;
    fn parse_key(raw: &str) -> Str {
        Str::from(raw)
    }
    fn key(&self) -> &Self::Key {
        &self.uid
    }
    fn namespace(&self) -> Option<&Str> {
        Some(&self.id.namespace)
    }
    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.daemonsets
    }
    fn upsert(self: Box<Self>, index: &mut Index) {
        index.upsert_daemonset(self);
    }
    fn remove(index: &mut Index, key: &Self::Key) {
        index.remove_daemonset(key);
    }
}

impl Stored for Revision {
    const RESOURCE: Resource = Resource::ControllerRevisions;
    type Key = Str;
    fn parse_key(raw: &str) -> Str {
        Str::from(raw)
    }
    fn key(&self) -> &Self::Key {
        &self.uid
    }
    fn namespace(&self) -> Option<&Str> {
        Some(&self.id.namespace)
    }
    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.revisions
    }
    fn upsert(self: Box<Self>, index: &mut Index) {
        index.upsert_revision(self);
    }
    fn remove(index: &mut Index, key: &Self::Key) {
        index.remove_revision(key);
    }
}

impl Stored for Pod {
    const RESOURCE: Resource = Resource::Pods;
    type Key = Uid;
    fn parse_key(raw: &str) -> Uid {
        Uid::parse(raw)
    }
    fn key(&self) -> &Self::Key {
        &self.uid
    }
    fn namespace(&self) -> Option<&Str> {
        Some(&self.id.namespace)
    }
    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.pods
    }
    fn upsert(self: Box<Self>, index: &mut Index) {
        index.upsert_pod(self);
    }
    fn remove(index: &mut Index, key: &Self::Key) {
        index.remove_pod(key);
    }
}

// --- the watched wire types --------------------------------------------------

impl Indexed for SlimNode {
    type Compact = Node;
    fn convert(&self, interner: &mut Interner) -> Result<Node, ConvertError> {
        convert::node(self, interner)
    }
    fn unchanged(&self, index: &Index) -> bool {
        let cached = self.metadata.name.as_deref().and_then(|name| index.nodes.objects.get(name));
        cached.is_some_and(|cached| convert::node_unchanged(self, cached))
    }
}

impl Indexed for SlimPod {
    type Compact = Pod;
    fn convert(&self, interner: &mut Interner) -> Result<Pod, ConvertError> {
        convert::pod(self, interner)
    }
    fn unchanged(&self, index: &Index) -> bool {
        let cached = self.metadata.uid.as_deref().and_then(|uid| index.pods.objects.get(&Uid::parse(uid)));
        cached.is_some_and(|cached| convert::pod_unchanged_but_uid(self, cached))
    }
}

impl Indexed for apps::DaemonSet {
    type Compact = DaemonSet;
    fn convert(&self, interner: &mut Interner) -> Result<DaemonSet, ConvertError> {
        convert::daemonset(self, interner)
    }
}

impl Indexed for ControllerRevision {
    type Compact = Revision;
    fn convert(&self, interner: &mut Interner) -> Result<Revision, ConvertError> {
        convert::revision(self, interner)
    }
}
