//! `daemonset_ineligible_nodes`: one DaemonSet's skipped nodes, counted by (reason, key).

use std::hash::{Hash, Hasher};

use hashbrown::{Equivalent, HashMap};

use crate::model::Str;
use crate::rules::eligibility::{Skip, SkipReason};

/// Counts keyed by (reason, shared key), asked with the skip's borrowed key: a node change
/// counts a skip for every DaemonSet, and cloning the key to ask would be an atomic write
/// each time, which waits on every cache miss before it. The key is cloned only for a new
/// row.
#[derive(Debug, Default)]
pub(super) struct SkipCounts(HashMap<(SkipReason, Str), u32, foldhash::fast::RandomState>);

/// A row's key, borrowed. Hashes as the owned tuple does: a tuple hashes its fields in
/// order, and `Str` hashes as its `str`.
struct Query<'a>(SkipReason, &'a str);

impl Hash for Query<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<(SkipReason, Str)> for Query<'_> {
    fn equivalent(&self, (reason, key): &(SkipReason, Str)) -> bool {
        self.0 == *reason && self.1 == &**key
    }
}

impl SkipCounts {
    pub(super) fn add(&mut self, skip: &Skip) {
        match self.0.get_mut(&Query(skip.reason(), skip.key())) {
            Some(count) => *count += 1,
            None => {
                self.0.insert((skip.reason(), skip.shared_key()), 1);
            }
        }
    }

    pub(super) fn remove(&mut self, skip: &Skip) {
        let query = Query(skip.reason(), skip.key());
        let Some(count) = self.0.get_mut(&query) else { return };
        *count -= 1;
        if *count == 0 {
            self.0.remove(&query);
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (SkipReason, &Str, u32)> {
        self.0.iter().map(|((reason, key), count)| (*reason, key, *count))
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_found_by_its_key_whichever_string_holds_it() {
        let mut counts = SkipCounts::default();
        let taint = |key: &str| Skip::Taint { key: Str::from(key), no_execute: false };
        counts.add(&taint("drain"));
        counts.add(&taint("drain"));
        counts.add(&Skip::NodeSelector { key: Str::from("drain") });
        let rows = |counts: &SkipCounts| {
            let mut rows: Vec<_> = counts.iter().map(|(r, k, n)| (r, k.to_string(), n)).collect();
            rows.sort();
            rows
        };
        let drain = String::from("drain");
        assert_eq!(rows(&counts), [(SkipReason::NodeSelector, drain.clone(), 1), (SkipReason::Taint, drain, 2)]);
        counts.remove(&taint("drain"));
        counts.remove(&Skip::NodeSelector { key: Str::from("drain") });
        assert_eq!(rows(&counts), [(SkipReason::Taint, String::from("drain"), 1)]);
        counts.remove(&taint("drain"));
        counts.remove(&taint("drain"));
        assert!(counts.is_empty(), "a count never seen is not counted below zero");
    }
}
