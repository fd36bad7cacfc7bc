//! A reflector-style store of one resource's compact objects.

use super::Stored;
use super::chunks::Chunks;
use super::keyed::Keyed;
use crate::model::FastSet;

/// Which watch stream an event came from: a namespace, or `None` for a
/// cluster-wide watch. A relist replaces only its own scope.
pub type Scope<'a> = Option<&'a str>;

/// A reflector-style cache: during a relist the old contents stay visible and
/// the new ones are buffered; `InitDone` swaps them.
#[derive(Debug)]
pub struct Store<T: Stored> {
    pub(super) objects: Keyed<T>,
    /// Relists under way, one per scope (a namespace, or `None` for all): a short list.
    /// Each buffers its objects in list order; a key listed twice is applied twice, the
    /// later one winning, as in a map.
    relists: Vec<(Option<String>, Listed<T>)>,
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
    pub(super) fn relist_buffer(&mut self, scope: Scope<'_>) -> &mut Listed<T> {
        let at = match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => at,
            None => {
                self.relists.push((scope.map(str::to_owned), Listed::default()));
                self.relists.len() - 1
            }
        };
        &mut self.relists[at].1
    }

    pub(super) fn take_relist(&mut self, scope: Scope<'_>) -> Listed<T> {
        match self.relists.iter().position(|(s, _)| s.as_deref() == scope) {
            Some(at) => self.relists.swap_remove(at).1,
            None => Listed::default(),
        }
    }
}

/// A relist's objects in list order, in chunks: a list of millions never doubles a vector
/// of them (holding two copies while it moves), and the chunks go one by one as the list
/// is applied, while the store fills.
#[derive(Debug)]
pub(super) struct Listed<T> {
    chunks: Chunks<T>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Self { chunks: Chunks::default() }
    }
}

impl<T> Listed<T> {
    pub(super) fn push(&mut self, obj: T) {
        self.chunks.push(obj);
    }

    pub(super) fn clear(&mut self) {
        self.chunks.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.chunks.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter()
    }
}

impl<T> IntoIterator for Listed<T> {
    type Item = T;
    type IntoIter = <Chunks<T> as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter()
    }
}
