//! A shared string behind one pointer.

use std::ops::Deref;
use std::sync::Arc;

use super::Str;

/// An interned `Str` behind a thin pointer: 8 bytes where a `Str` is 16 (a pointer and a
/// length). Worth the extra hop only where millions of objects hold one, as pods hold
/// their node's name; `Interner::thin_str` shares one per distinct string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThinStr(Arc<Str>);

impl ThinStr {
    pub(crate) fn new(s: Str) -> Self {
        Self(Arc::new(s))
    }

    /// Held by nothing but the interner.
    pub(crate) fn is_unshared(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

impl Deref for ThinStr {
    type Target = Str;

    fn deref(&self) -> &Str {
        &self.0
    }
}

const _: () = assert!(std::mem::size_of::<Option<ThinStr>>() == 8);
