//! A set of labels: pairs sorted by key, in one allocation of exactly their size.
//!
//! A node's labels are its own (its hostname is among them), so whatever a map keeps beside
//! the pairs is paid once per node. A B-tree holds 11 pairs per leaf: a node with 14 labels
//! took two leaves and an internal node, about 1 KiB more than the pairs themselves
//! (docs/benchmarks.md, "Where a node's bytes go"). Each pair is a `Label`, which the
//! interner shares: nodes of a pool repeat each other's pairs but for the hostname.

use std::sync::Arc;

use super::Str;

/// One label, a key and its value, behind a thin pointer: 8 bytes where the two `Str`s are
/// 32. `Interner::labels` shares one per distinct pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label(Arc<(Str, Str)>);

impl Label {
    pub(crate) fn new(key: Str, value: Str) -> Self {
        Self(Arc::new((key, value)))
    }

    pub fn key(&self) -> &Str {
        &self.0.0
    }

    pub fn value(&self) -> &Str {
        &self.0.1
    }

    /// Held by nothing but the interner.
    pub(crate) fn is_unshared(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSet(Box<[Label]>);

impl LabelSet {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|label| (**label.key()).cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Str> {
        self.find(key).ok().map(|at| self.0[at].value())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Str, &Str)> + Clone {
        self.0.iter().map(|label| (label.key(), label.value()))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Str> {
        self.0.iter().map(Label::key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// As a map collects: sorted by key, and a key given twice keeps its last value.
impl FromIterator<Label> for LabelSet {
    fn from_iter<I: IntoIterator<Item = Label>>(labels: I) -> Self {
        let mut labels: Vec<Label> = labels.into_iter().collect();
        // Stable: among equal keys the last given stays last, and is the one kept.
        labels.sort_by(|a, b| a.key().cmp(b.key()));
        let mut kept: Vec<Label> = Vec::with_capacity(labels.len());
        for label in labels {
            match kept.last_mut() {
                Some(last) if last.key() == label.key() => *last = label,
                _ => kept.push(label),
            }
        }
        Self(kept.into_boxed_slice())
    }
}

/// Pairs of its own, shared with no other set (tests, and sets built outside the interner).
impl FromIterator<(Str, Str)> for LabelSet {
    fn from_iter<I: IntoIterator<Item = (Str, Str)>>(pairs: I) -> Self {
        pairs.into_iter().map(|(key, value)| Label::new(key, value)).collect()
    }
}

const _: () = assert!(std::mem::size_of::<Label>() == 8);

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> LabelSet {
        pairs.iter().map(|(k, v)| (Str::from(*k), Str::from(*v))).collect()
    }

    #[test]
    fn reads_like_a_sorted_map() {
        let labels = set(&[("zone", "a"), ("disk", "ssd"), ("arch", "amd64"), ("disk", "hdd")]);
        assert_eq!(labels.len(), 3, "a key given twice is kept once");
        assert_eq!(labels.get("disk").map(|v| &**v), Some("hdd"), "the last value wins, as in a map");
        assert!(labels.contains_key("arch") && labels.contains_key("zone") && !labels.contains_key("gpu"));
        assert_eq!(labels.get(""), None);
        let keys: Vec<&str> = labels.keys().map(|k| &**k).collect();
        assert_eq!(keys, ["arch", "disk", "zone"]);
        assert!(LabelSet::default().is_empty() && LabelSet::default().get("x").is_none());
        assert_eq!(labels, set(&[("arch", "amd64"), ("disk", "hdd"), ("zone", "a")]));
    }
}
