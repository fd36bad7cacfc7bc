//! Strings back to back in one buffer, with where each ends: one allocation for a list
//! that as `String`s of their own would cost one each. A pod's and a node's labels
//! (`FlatLabels`, keys and values in turn) and the label keys a field manager owns
//! (`LabelKeys`) are read into it straight from the wire.

use std::fmt;

use smallvec::SmallVec;

/// `N` ends are held inline, so a list of up to `N` strings costs only its text.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StrList<const N: usize> {
    text: String,
    /// Where each string ends in `text`; it starts where the one before ends.
    ends: SmallVec<[u32; N]>,
}

impl<const N: usize> StrList<N> {
    pub fn iter(&self) -> impl Iterator<Item = &str> + Clone {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| &self.text[start as usize..end as usize])
    }

    /// The strings two at a time (a key and its value); an odd last one is left out.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        let starts = std::iter::once(0).chain(self.ends.chunks_exact(2).map(|ends| ends[1]));
        starts.zip(self.ends.chunks_exact(2)).map(|(start, ends)| {
            let (start, first_end, second_end) = (start as usize, ends[0] as usize, ends[1] as usize);
            (&self.text[start..first_end], &self.text[first_end..second_end])
        })
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Appends a string, `false` (and nothing appended) when the buffer would pass
    /// `u32::MAX` bytes: not an object the API server would keep.
    pub fn push(&mut self, s: &str) -> bool {
        let Ok(end) = u32::try_from(self.text.len() + s.len()) else {
            return false;
        };
        self.text.push_str(s);
        self.ends.push(end);
        true
    }

    /// Appends all of `strs` or, when they would not fit (see `push`), none of them.
    pub fn push_all(&mut self, strs: &[&str]) -> bool {
        let added: usize = strs.iter().map(|s| s.len()).sum();
        if u32::try_from(self.text.len() + added).is_err() {
            return false;
        }
        for s in strs {
            self.text.push_str(s);
            // In range: the whole text is.
            self.ends.push(self.text.len() as u32);
        }
        true
    }

    /// The strings with `add`'s put in and those `remove` picks taken out, in order, each
    /// once: a set, as the API server writes the keys of an edited managedFields entry.
    pub fn edited(&self, add: &[&str], remove: impl Fn(&str) -> bool) -> Self {
        let mut strs: Vec<&str> = self.iter().filter(|s| !remove(s)).collect();
        strs.extend_from_slice(add);
        strs.sort_unstable();
        strs.dedup();
        strs.into_iter().collect()
    }

    /// In order, each once. What the API server writes already is (and is kept as it is);
    /// anything else (a hand-written snapshot) is put in order as a map's keys read.
    pub fn into_ordered_set(self) -> Self {
        let ascending = self.iter().zip(self.iter().skip(1)).all(|(a, b)| a < b);
        if ascending { self } else { self.edited(&[], |_| false) }
    }
}

impl<'a, const N: usize> FromIterator<&'a str> for StrList<N> {
    /// Stops at 4 GiB of text (see `push`).
    fn from_iter<I: IntoIterator<Item = &'a str>>(strs: I) -> Self {
        let mut list = Self::default();
        for s in strs {
            if !list.push(s) {
                break;
            }
        }
        list
    }
}

impl<const N: usize> fmt::Debug for StrList<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_read_back_as_pushed_empty_ones_included() {
        let list: StrList<2> = ["a", "", "bc", "d"].into_iter().collect();
        assert_eq!(list.iter().collect::<Vec<_>>(), ["a", "", "bc", "d"], "spilled past two inline");
        assert!(StrList::<2>::default().is_empty());
    }

    #[test]
    fn an_edit_keeps_the_strings_in_order_each_once() {
        let list: StrList<4> = ["b", "d"].into_iter().collect();
        let edited = list.edited(&["c", "a", "b"], |s| s == "d");
        assert_eq!(edited.iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(list.edited(&[], |_| true).is_empty());
        let unordered: StrList<4> = ["z", "a", "z"].into_iter().collect();
        assert_eq!(unordered.into_ordered_set().iter().collect::<Vec<_>>(), ["a", "z"]);
    }
}
