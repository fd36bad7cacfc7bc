//! A store's objects, in a hash table of pointers: each object carries its own key.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

use super::Stored;

/// A map from each object's key to the object, keyed by what `Stored::key` reads: a bucket
/// holds the box alone, 8 bytes, where a map would hold the key beside it again (a UID is
/// 24 bytes, a name 16). With 2.6M pods in 4M buckets that is 100 MB. A lookup reads the
/// object it finds, as it would anyway; a control byte first sorts out all but 1 in 128
/// other buckets it probes.
#[derive(Debug)]
pub struct Keyed<T: Stored> {
    table: HashTable<Box<T>>,
    hasher: foldhash::fast::RandomState,
}

impl<T: Stored> Default for Keyed<T> {
    fn default() -> Self {
        Self { table: HashTable::new(), hasher: foldhash::fast::RandomState::default() }
    }
}

impl<T: Stored> Keyed<T> {
    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&T>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.table.find(self.hash(key), |obj| obj.key().borrow() == key).map(|obj| &**obj)
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Stores `obj` under its key; returns the object it replaced.
    pub fn insert(&mut self, obj: Box<T>) -> Option<Box<T>> {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(obj.key());
        match self.table.entry(hash, |old| old.key() == obj.key(), |old| hasher.hash_one(old.key())) {
            hashbrown::hash_table::Entry::Occupied(mut old) => Some(std::mem::replace(old.get_mut(), obj)),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(obj);
                None
            }
        }
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<Box<T>>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        self.table.find_entry(hash, |obj| obj.key().borrow() == key).ok().map(|entry| entry.remove().0)
    }

    pub fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.table.reserve(additional, |obj| hasher.hash_one(obj.key()));
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.table.iter().map(|obj| &**obj)
    }

    pub fn keys(&self) -> impl Iterator<Item = &T::Key> {
        self.values().map(Stored::key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&T::Key, &T)> {
        self.values().map(|obj| (obj.key(), obj))
    }
}

/// As a map's: the key must be there.
impl<T: Stored, Q> std::ops::Index<&Q> for Keyed<T>
where
    T::Key: Borrow<Q>,
    Q: Hash + Eq + ?Sized,
{
    type Output = T;

    fn index(&self, key: &Q) -> &T {
        self.get(key).expect("the key is in the store")
    }
}

#[cfg(test)]
mod tests {
    use crate::index::Index;
    use crate::model::{Node, Str};

    /// A node told apart from its namesakes by its NFD label keys.
    fn node(name: &str, nfd_keys: usize) -> Box<Node> {
        Box::new(Node {
            name: Str::from(name),
            labels: Default::default(),
            taints: Vec::new(),
            nfd_label_keys: vec![Str::from("k"); nfd_keys],
            nfd_taint_keys: Vec::new(),
            managers: Default::default(),
        })
    }

    #[test]
    fn finds_replaces_and_removes_by_the_objects_own_key() {
        let mut index = Index::default();
        let nodes = &mut index.nodes.objects;
        for i in 0..1000 {
            assert!(nodes.insert(node(&format!("n{i}"), 0)).is_none());
        }
        let replaced = nodes.insert(node("n7", 1)).expect("n7 was there");
        assert!(replaced.nfd_label_keys.is_empty());
        assert_eq!(nodes.len(), 1000);
        assert!(nodes.get("n7").is_some_and(|n| n.nfd_label_keys.len() == 1), "looked up by a borrowed name");
        assert!(nodes.remove("n7").is_some());
        assert!(!nodes.contains_key("n7") && nodes.remove("n7").is_none());
        assert_eq!(nodes.keys().count(), 999);
    }
}
