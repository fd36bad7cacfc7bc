//! A growing sequence of objects in chunks of one huge page each: the store's slots, and a
//! relist's objects while they wait to be applied.

use allocator_api2::vec::Vec as Chunk;

use crate::allocator::{HUGE_PAGE, HugePages};

/// Growing never copies the objects, nor holds two copies of them at once (a vector of 2.6M
/// pods would, while it doubles). Each chunk is one huge page (`HugePages`): the lookups by
/// slot that every watch event makes land in about 70 TLB entries at 2.6M pods, not 35,000.
/// The first chunk grows as a vector does, so a store of a few objects (the DaemonSets, or
/// the relist of one namespace's) takes no whole chunk.
#[derive(Debug)]
pub(super) struct Chunks<T> {
    chunks: Vec<Chunk<T, HugePages>>,
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Self { chunks: Vec::new() }
    }
}

impl<T> Chunks<T> {
    /// Objects in a chunk: as many as fill a huge page.
    pub(super) const LEN: usize = HUGE_PAGE / if size_of::<T>() == 0 { 1 } else { size_of::<T>() };

    /// Appends `obj`; returns its place.
    pub(super) fn push(&mut self, obj: T) -> usize {
        let at = self.len();
        match self.chunks.last_mut() {
            Some(last) if last.len() < Self::LEN => {
                if last.len() == last.capacity() {
                    // The first chunk: doubling, but never past a chunk's length.
                    last.reserve_exact(last.len().max(4).min(Self::LEN - last.len()));
                }
                last.push(obj);
            }
            _ => {
                let capacity = if self.chunks.is_empty() { 0 } else { Self::LEN };
                let mut chunk = Chunk::with_capacity_in(capacity, HugePages);
                chunk.push(obj);
                self.chunks.push(chunk);
            }
        }
        at
    }

    pub(super) fn len(&self) -> usize {
        self.chunks.last().map_or(0, |last| (self.chunks.len() - 1) * Self::LEN + last.len())
    }

    /// How many objects fit before another chunk is needed.
    pub(super) fn capacity(&self) -> usize {
        self.chunks.iter().map(Chunk::capacity).sum()
    }

    pub(super) fn clear(&mut self) {
        self.chunks.clear();
    }

    pub(super) fn get(&self, at: usize) -> Option<&T> {
        self.chunks.get(at / Self::LEN)?.get(at % Self::LEN)
    }

    pub(super) fn get_mut(&mut self, at: usize) -> Option<&mut T> {
        self.chunks.get_mut(at / Self::LEN)?.get_mut(at % Self::LEN)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

/// Chunk by chunk: each is freed (unmapped) as soon as its last object is taken.
impl<T> IntoIterator for Chunks<T> {
    type Item = T;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Chunk<T, HugePages>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_chunk_grows_to_a_chunk_and_later_ones_are_whole() {
        let mut chunks = Chunks::<[u8; 56]>::default();
        let len = Chunks::<[u8; 56]>::LEN;
        assert_eq!(len, 37_449, "objects of 56 bytes in 2 MiB");
        for n in 0..2 * len + 1 {
            assert_eq!(chunks.push([(n % 251) as u8; 56]), n);
        }
        assert_eq!(chunks.capacity(), 3 * len, "no chunk past its length, the last one whole");
        assert_eq!(chunks.len(), 2 * len + 1);
        assert_eq!(chunks.get(len).map(|o| o[0]), Some((len % 251) as u8));
        assert!(chunks.get(2 * len + 1).is_none());
        assert!(chunks.iter().enumerate().all(|(n, o)| o[0] == (n % 251) as u8));
        assert_eq!(chunks.into_iter().count(), 2 * len + 1);
    }
}
