//! Who owns a node's labels and its taints: one small struct per managedFields entry that
//! owns any (`LabelAndTaintOwner`), with a manager, a time, the label keys in one buffer
//! and a flag for the taints. The rules ask nothing else of managedFields; as
//! `ManagedFieldsEntry`s pruned to a `fieldsV1` tree they cost a node about thirty
//! allocations on every heartbeat. `managed_fields` reads them from the wire; a full object
//! from a test or a tool reads the same way (`owner_of`).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::Value;
use smallvec::SmallVec;

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

/// Label keys back to back in one buffer: a kubelet entry owns about ten, which as
/// strings of their own would cost as many allocations.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LabelKeys {
    text: String,
    /// Where each key ends in `text`; it starts where the one before ends.
    ends: SmallVec<[u32; 4]>,
}

impl LabelKeys {
    pub fn iter(&self) -> impl Iterator<Item = &str> + Clone {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| &self.text[start as usize..end as usize])
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Appends a key, `false` when the buffer would pass `u32::MAX` bytes.
    pub(super) fn push(&mut self, key: &str) -> bool {
        let Ok(end) = u32::try_from(self.text.len() + key.len()) else {
            return false;
        };
        self.text.push_str(key);
        self.ends.push(end);
        true
    }

    /// The API server writes fields in key order, each once; anything else (a hand-written
    /// snapshot) is put in order as a map reads it, and as `owner_of` reads a full object.
    pub(super) fn into_key_order(self) -> Self {
        let ascending = self.iter().zip(self.iter().skip(1)).all(|(a, b)| a < b);
        if ascending { self } else { self.edited(&[], |_| false) }
    }

    /// The keys with `add`'s put in and `remove`'s taken out, in key order, each once: as the
    /// API server writes an edited entry.
    pub fn edited(&self, add: &[&str], remove: impl Fn(&str) -> bool) -> Self {
        let mut keys: Vec<&str> = self.iter().filter(|key| !remove(key)).collect();
        keys.extend_from_slice(add);
        keys.sort_unstable();
        keys.dedup();
        keys.into_iter().collect()
    }
}

impl<'a> FromIterator<&'a str> for LabelKeys {
    fn from_iter<I: IntoIterator<Item = &'a str>>(keys: I) -> Self {
        let mut list = Self::default();
        for key in keys {
            // Past 4 GiB of keys: not an object the API server would keep.
            if !list.push(key) {
                break;
            }
        }
        list
    }
}

impl fmt::Debug for LabelKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_keeps_the_keys_in_order_each_once() {
        let keys: LabelKeys = ["b", "d"].into_iter().collect();
        let edited = keys.edited(&["c", "a", "b"], |key| key == "d");
        assert_eq!(edited.iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(keys.edited(&[], |_| true).is_empty());
    }
}
