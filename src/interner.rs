//! Shares repeated strings, label sets and placements between cached objects.
//!
//! 200,000 daemon pods carry a few hundred distinct label sets and templates;
//! storing each once is most of what keeps the cache small.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::Arc;

use crate::model::{FastSet, Labels, Placement, Str};

/// Interned values are dropped by `collect_garbage` once only the interner holds them.
#[derive(Debug, Default)]
pub struct Interner {
    strings: FastSet<Str>,
    label_sets: FastSet<Labels>,
    placements: FastSet<Arc<Placement>>,
    inserts_since_gc: usize,
}

/// How many new entries trigger a sweep, so that churn (node names, hashes) cannot grow it forever.
const GC_EVERY: usize = 50_000;

impl Interner {
    pub fn str(&mut self, s: &str) -> Str {
        if let Some(existing) = self.strings.get(s) {
            return existing.clone();
        }
        let new: Str = Arc::from(s);
        self.note_insert();
        self.strings.insert(new.clone());
        new
    }

    pub fn labels<'a>(&mut self, pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> Labels {
        let map: BTreeMap<Str, Str> = pairs.into_iter().map(|(k, v)| (self.str(k), self.str(v))).collect();
        intern(&mut self.label_sets, Arc::new(map), &mut self.inserts_since_gc)
    }

    pub fn placement(&mut self, placement: Placement) -> Arc<Placement> {
        intern(&mut self.placements, Arc::new(placement), &mut self.inserts_since_gc)
    }

    fn note_insert(&mut self) {
        self.inserts_since_gc += 1;
        if self.inserts_since_gc >= GC_EVERY {
            self.collect_garbage();
        }
    }

    /// Forget values no cached object refers to any more.
    pub fn collect_garbage(&mut self) {
        self.placements.retain(|p| Arc::strong_count(p) > 1);
        self.label_sets.retain(|l| Arc::strong_count(l) > 1);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.inserts_since_gc = 0;
    }

    pub fn len(&self) -> usize {
        self.strings.len() + self.label_sets.len() + self.placements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn intern<T: Eq + Hash>(set: &mut FastSet<Arc<T>>, value: Arc<T>, inserts: &mut usize) -> Arc<T> {
    if let Some(existing) = set.get(&value) {
        return existing.clone();
    }
    *inserts += 1;
    set.insert(value.clone());
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_allocation() {
        let mut interner = Interner::default();
        let a = interner.str("node-a");
        let b = interner.str("node-a");
        assert!(Arc::ptr_eq(&a, &b));
        let (k, v) = ("app".to_string(), "agent".to_string());
        let l1 = interner.labels([(&k, &v)]);
        let l2 = interner.labels([(&k, &v)]);
        assert!(Arc::ptr_eq(&l1, &l2));
    }

    #[test]
    fn garbage_collection_drops_only_unreferenced_values() {
        let mut interner = Interner::default();
        let kept = interner.str("kept");
        drop(interner.str("dropped"));
        interner.collect_garbage();
        assert_eq!(interner.len(), 1);
        assert!(Arc::ptr_eq(&kept, &interner.str("kept")));
    }
}
