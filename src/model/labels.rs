//! A set of labels: pairs sorted by key, in one allocation of exactly their size.
//!
//! A node's labels are its own (its hostname is among them), so whatever a map keeps beside
//! the pairs is paid once per node. A B-tree holds 11 pairs per leaf: a node with 14 labels
//! took two leaves and an internal node, about 1 KiB more than the pairs themselves
//! (docs/benchmarks.md, "Where a node's bytes go").

use super::Str;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSet(Box<[(Str, Str)]>);

impl LabelSet {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Str> {
        self.find(key).ok().map(|at| &self.0[at].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Str, &Str)> + Clone {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Str> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// As a map collects: sorted by key, and a key given twice keeps its last value.
impl FromIterator<(Str, Str)> for LabelSet {
    fn from_iter<I: IntoIterator<Item = (Str, Str)>>(pairs: I) -> Self {
        let mut pairs: Vec<(Str, Str)> = pairs.into_iter().collect();
        // Stable: among equal keys the last given stays last, and is the one kept.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(Str, Str)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match kept.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => kept.push(pair),
            }
        }
        Self(kept.into_boxed_slice())
    }
}

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
