//! A store's objects, in numbered slots, found by key through a hash table of slot numbers.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

use super::Stored;
use super::chunks::Chunks;
use crate::allocator::HugePages;

/// A map from each object's key to the object. The objects live in numbered slots, which
/// a hash table of numbers finds by what `Stored::key` reads: a bucket is 4 bytes, where a
/// pointer was 8 and a map would hold the key beside it again (a UID is 24 bytes), and an
/// object takes its own size, not the allocator's next class up. Others name an object by
/// its slot (a DaemonSet's claims do, in 4 bytes where a UID takes 24), which stays its
/// own while it is stored; a removed object's slot is reused.
#[derive(Debug)]
pub struct Keyed<T: Stored> {
    slots: Slots<T>,
    /// On huge pages, as the slots are: at 2.6M pods it is 20 MiB, probed at random.
    table: HashTable<Slot, HugePages>,
    hasher: foldhash::fast::RandomState,
}

/// An object's number in its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(u32);

impl Slot {
    /// The slot numbered `n`, as `index` numbers it: for columns that keep a slot in fewer
    /// bits (`cells`).
    pub(super) fn at(n: u32) -> Self {
        Self(n)
    }

    /// The slot's place in order, from 0: an index into arrays kept beside a store.
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

impl<T: Stored> Default for Keyed<T> {
    fn default() -> Self {
        Self {
            slots: Slots::default(),
            table: HashTable::new_in(HugePages),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<T: Stored> Keyed<T> {
    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The slot of the object stored under `key`.
    pub fn slot<Q>(&self, key: &Q) -> Option<Slot>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find(self.hash(key), key)
    }

    /// The slot stored under `key`, whose hash is `hash`: the one lookup `slot` and `slots_of`
    /// share.
    fn find<Q>(&self, hash: u64, key: &Q) -> Option<Slot>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slots = &self.slots;
        self.table.find(hash, |&slot| slots[slot].key().borrow() == key).copied()
    }

    /// The slots of `keys`, in turn, as `slot` gives them, each hashed once. All are asked for
    /// by their likely slots before any is looked up: the first slot whose bucket's hash tag
    /// matches, which is the key's unless tags collide, is prefetched and not read. Each key
    /// then waits on two trips to memory (the table's control bytes, its bucket), where `slot`
    /// alone waits on three in turn, the object's key last, and the keys' trips overlap.
    pub(super) fn slots_of<'q, Q>(&self, keys: impl IntoIterator<Item = &'q Q>) -> Vec<Option<Slot>>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized + 'q,
    {
        let hashed: Vec<(u64, &Q)> = keys.into_iter().map(|key| (self.hash(key), key)).collect();
        for &(hash, _) in &hashed {
            if let Some(&slot) = self.table.find(hash, |_| true) {
                self.prefetch(slot);
            }
        }
        hashed.iter().map(|&(hash, key)| self.find(hash, key)).collect()
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&T>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.slot(key).map(|slot| &self.slots[slot])
    }

    /// The object in `slot`, which must hold one (a slot named by a claim does).
    pub fn at(&self, slot: Slot) -> &T {
        &self.slots[slot]
    }

    /// Asks for the object in `slot` ahead of a read (`prefetch`).
    pub(super) fn prefetch(&self, slot: Slot) {
        if let Some(entry) = self.slots.chunks.get(slot.0 as usize) {
            super::prefetch::prefetch(entry);
        }
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.slot(key).is_some()
    }

    /// The slot the next `insert` of an object with a new key takes.
    pub fn vacant(&self) -> Slot {
        self.slots.vacant()
    }

    /// Stores `obj` under its key, in the slot of the object it replaces if any, else in
    /// `vacant()`; returns the slot and the object replaced.
    pub fn insert(&mut self, obj: T) -> (Slot, Option<T>) {
        let (hasher, slots) = (&self.hasher, &mut self.slots);
        let hash = hasher.hash_one(obj.key());
        if let Some(&slot) = self.table.find(hash, |&slot| slots[slot].key() == obj.key()) {
            return (slot, Some(slots.replace(slot, obj)));
        }
        let slot = slots.put(obj);
        let slots = &self.slots;
        self.table.insert_unique(hash, slot, |&slot| hasher.hash_one(slots[slot].key()));
        (slot, None)
    }

    /// Takes the object stored under `key` out, with the slot it leaves free.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<(Slot, T)>
    where
        T::Key: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        let slots = &self.slots;
        let entry = self.table.find_entry(hash, |&slot| slots[slot].key().borrow() == key).ok()?;
        let slot = entry.remove().0;
        Some((slot, self.slots.take(slot)))
    }

    pub fn reserve(&mut self, additional: usize) {
        let (hasher, slots) = (&self.hasher, &self.slots);
        self.table.reserve(additional, |&slot| hasher.hash_one(slots[slot].key()));
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// How many objects the table holds before it grows.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// How many slots there are, full or free, and room for more in the last chunk.
    pub fn slot_capacity(&self) -> usize {
        self.slots.chunks.capacity()
    }

    /// In slot order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.chunks.iter().flatten()
    }

    pub fn keys(&self) -> impl Iterator<Item = &T::Key> {
        self.values().map(Stored::key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&T::Key, &T)> {
        self.values().map(|obj| (obj.key(), obj))
    }

    /// Each object with its slot, in slot order.
    pub fn slotted(&self) -> impl Iterator<Item = (Slot, &T)> {
        // Every slot number fits in a `u32` (`Slots::vacant`).
        let numbered = self.slots.chunks.iter().enumerate();
        numbered.filter_map(|(at, obj)| Some((Slot(at as u32), obj.as_ref()?)))
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

/// Slots in chunks (`Chunks`), numbered in order; a freed slot is taken again first.
#[derive(Debug)]
struct Slots<T> {
    chunks: Chunks<Option<T>>,
    /// Slots emptied by `take`, reused last freed first.
    free: Vec<Slot>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Self { chunks: Chunks::default(), free: Vec::new() }
    }
}

impl<T> Slots<T> {
    fn vacant(&self) -> Slot {
        if let Some(&slot) = self.free.last() {
            return slot;
        }
        Slot(u32::try_from(self.chunks.len()).expect("fewer than 4 billion objects"))
    }

    fn put(&mut self, obj: T) -> Slot {
        let slot = self.vacant();
        if self.free.pop().is_some() {
            *self.entry(slot) = Some(obj);
        } else {
            self.chunks.push(Some(obj));
        }
        slot
    }

    fn replace(&mut self, slot: Slot, obj: T) -> T {
        self.entry(slot).replace(obj).expect("a stored object's slot is full")
    }

    fn take(&mut self, slot: Slot) -> T {
        let obj = self.entry(slot).take().expect("a stored object's slot is full");
        self.free.push(slot);
        obj
    }

    fn entry(&mut self, slot: Slot) -> &mut Option<T> {
        self.chunks.get_mut(slot.0 as usize).expect("a stored object's slot exists")
    }
}

impl<T> std::ops::Index<Slot> for Slots<T> {
    type Output = T;

    fn index(&self, slot: Slot) -> &T {
        self.chunks.get(slot.0 as usize).and_then(Option::as_ref).expect("a stored object's slot is full")
    }
}

#[cfg(test)]
mod tests {
    use crate::index::Index;
    use crate::index::chunks::Chunks;
    use crate::model::{Node, Str};

    /// A node told apart from its namesakes by its NFD label keys.
    fn node(name: &str, nfd_keys: usize) -> Node {
        Node {
            name: Str::from(name),
            labels: Default::default(),
            taints: Box::default(),
            nfd_label_keys: vec![Str::from("k"); nfd_keys].into(),
            nfd_taint_keys: Default::default(),
            managers: Default::default(),
            fingerprint: None,
        }
    }

    #[test]
    fn finds_replaces_and_removes_by_the_objects_own_key() {
        let mut index = Index::default();
        let nodes = &mut index.nodes.objects;
        // Past the first chunk, whose vector grows, into whole ones.
        let count = 2 * Chunks::<Option<Node>>::LEN + 10;
        for i in 0..count {
            assert!(nodes.insert(node(&format!("n{i}"), 0)).1.is_none());
        }
        let seventh = nodes.slot("n7").expect("n7 is there");
        let (slot, replaced) = nodes.insert(node("n7", 1));
        assert!(replaced.expect("n7 was there").nfd_label_keys.is_empty());
        assert_eq!(slot, seventh, "a replacement keeps the slot");
        assert_eq!(nodes.len(), count);
        assert!(nodes.get("n7").is_some_and(|n| n.nfd_label_keys.len() == 1), "looked up by a borrowed name");
        assert_eq!(nodes.remove("n7").map(|(slot, _)| slot), Some(seventh));
        assert!(!nodes.contains_key("n7") && nodes.remove("n7").is_none());
        assert_eq!(nodes.keys().count(), count - 1);
        assert_eq!(nodes.vacant(), seventh, "the freed slot is the next one taken");
        let (slot, _) = nodes.insert(node("new", 0));
        assert_eq!((slot, &*nodes.at(slot).name), (seventh, "new"));
        assert!(nodes.keys().all(|name| nodes.at(nodes.slot(name).expect("listed")).name == *name));
        assert_eq!(nodes.slot_capacity(), 3 * Chunks::<Option<Node>>::LEN, "whole chunks past the first");
    }

    #[test]
    fn slots_of_gives_what_slot_gives_in_the_order_asked() {
        let mut index = Index::default();
        let nodes = &mut index.nodes.objects;
        for i in 0..5000 {
            nodes.insert(node(&format!("n{i}"), 0));
        }
        nodes.remove("n42");
        // Present, removed, never stored, and asked twice; at 5,000 keys some tags collide.
        let asked: Vec<String> = (0..6000).rev().map(|i| format!("n{i}")).chain(["n7".into(), "".into()]).collect();
        let expected: Vec<_> = asked.iter().map(|name| nodes.slot(name.as_str())).collect();
        assert_eq!(nodes.slots_of(asked.iter().map(String::as_str)), expected);
        assert_eq!(expected.iter().filter(|slot| slot.is_some()).count(), 4999 + 1);
        assert!(nodes.slots_of(std::iter::empty::<&str>()).is_empty());
    }
}
