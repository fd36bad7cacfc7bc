//! Who owns a node's labels and its taints: one small struct per managedFields entry that
//! owns any (`LabelAndTaintOwner`), with a manager, a time, the label keys in one buffer
//! and a flag for the taints. The rules ask nothing else of managedFields; as
//! `ManagedFieldsEntry`s pruned to a `fieldsV1` tree they cost a node about thirty
//! allocations on every heartbeat. `managed_fields` reads them from the wire; a full object
//! from a test or a tool reads the same way (`owner_of`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::Value;

use super::str_list::StrList;

/// One managedFields entry of a node that owns labels or its taints, down to that.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelAndTaintOwner {
    pub manager: String,
    /// `operation: Update` on the node itself (no subresource): the entry an edit by
    /// `manager` (what-if's `kubectl label` or `kubectl taint`) writes into.
    pub update: bool,
    /// `time` of the entry's last write, in unix seconds (0 when absent).
    pub time: i64,
    /// The keys of the labels it owns, as `fieldsV1` lists them, without their `f:`.
    pub labels: LabelKeys,
    /// `spec.taints` is an atomic list: its one owner is whoever wrote it last.
    pub taints: bool,
}

impl LabelAndTaintOwner {
    pub fn owns_any(&self) -> bool {
        !self.labels.is_empty() || self.taints
    }

    pub fn is_update_by(&self, manager: &str) -> bool {
        self.update && self.manager == manager
    }
}

/// Label keys in one buffer, in key order, each once: a kubelet entry owns about ten,
/// which as strings of their own would cost as many allocations.
pub type LabelKeys = StrList<4>;

/// What a full object's entry owns of labels and taints; `None` if it owns neither.
pub fn owner_of(entry: &ManagedFieldsEntry) -> Option<LabelAndTaintOwner> {
    let fields = &entry.fields_v1.as_ref()?.0;
    let labels = fields
        .get("f:metadata")
        .and_then(|m| m.get("f:labels"))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|labels| labels.keys())
        .filter_map(|k| k.strip_prefix("f:"))
        .collect();
    let owner = LabelAndTaintOwner {
        manager: entry.manager.clone().unwrap_or_default(),
        update: entry.operation.as_deref() == Some("Update")
            && entry.subresource.as_deref().unwrap_or_default().is_empty(),
        time: entry.time.as_ref().map_or(0, |t| t.0.as_second()),
        labels,
        taints: fields.get("f:spec").and_then(|s| s.get("f:taints")).is_some(),
    };
    owner.owns_any().then_some(owner)
}
