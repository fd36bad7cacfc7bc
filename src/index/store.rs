//! A reflector-style store of one resource's compact objects.

use super::Stored;
use super::keyed::Keyed;
use crate::model::FastSet;

/// Which watch stream an event came from: a namespace, or `None` for a
/// cluster-wide watch. A relist replaces only its own scope.
pub type Scope<'a> = Option<&'a str>;

/// A reflector-style cache: during a relist the old contents stay visible and
/// the new ones are buffered; `InitDone` swaps them.
///
/// Objects are boxed: a hash table's buckets come in powers of two, so up to half of them
/// stand empty, and an empty bucket costs its full size. Boxed, that is 8 bytes rather
/// than a whole pod, and a relist's buffer moves pointers, not objects, into the table.
#[derive(Debug)]
pub struct Store<T: Stored> {
    pub(super) objects: Keyed<T>,
    /// Relists under way, one per scope (a namespace, or `None` for all): a short list.
    /// Each buffers its objects in list order; a key listed twice is applied twice, the
    /// later one winning, as in a map.
    relists: Vec<(Option<String>, Vec<Box<T>>)>,
    pub(super) synced_scopes: FastSet<Option<String>>,
    /// How many scopes (watch streams) feed this store.
    pub(super) scopes: usize,
}

impl<T: Stored> Default for Store<T> {
    fn default() -> Self {
        Self { objects: Keyed::default(), relists: Vec::new(), synced_scopes: FastSet::default(), scopes: 1 }
    }
}

impl<T: Stored> Store<T> {
    pub(super) fn synced(&self) -> bool {
        self.synced_scopes.len() >= self.scopes
    }

    /// The buffer of the relist under way for `scope`, created if there is none. Looked
    /// up by the borrowed scope: this runs once per listed object.
    pub(super) fn relist_buffer(&mut self, scope: Scope<'_>) -> &mut Vec<Box<T>> {
        let at = match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => at,
            None => {
                // A relist usually returns about as many objects as the cache holds.
                let expected = self.objects.len() / self.scopes.max(1);
                self.relists.push((scope.map(str::to_owned), Vec::with_capacity(expected)));
                self.relists.len() - 1
            }
        };
        &mut self.relists[at].1
    }

    pub(super) fn take_relist(&mut self, scope: Scope<'_>) -> Vec<Box<T>> {
        match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => self.relists.swap_remove(at).1,
            None => Vec::new(),
        }
    }
}
