//! Object UIDs, kept where the index can compare them without a pointer chase.

use std::fmt;
use std::num::NonZeroU64;

use uuid::Uuid;

use crate::model::{Str, ThinStr};

/// A `metadata.uid`, in 16 bytes. The API server mints lowercase RFC 4122 UUIDs: those are
/// kept as their 16 bytes, inline: no allocation per pod (about 64 bytes each), and a map
/// keyed by them hashes and compares in its own bucket. Any other text (hand-written
/// objects, other API servers) is kept as it came, behind a thin pointer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Uid(Repr);

/// A UUID's first half is never zero here (one that is is kept as text), so the text
/// variant fits in the niche beside the second half: 16 bytes where a tagged enum takes 24.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Uuid(NonZeroU64, u64),
    Text(ThinStr),
}

impl Uid {
    /// Keeps `text` exactly: only the canonical lowercase, hyphenated form is packed,
    /// because only that one prints back the same.
    pub fn parse(text: &str) -> Self {
        let packed = canonical_uuid(text).and_then(|uuid| {
            let (high, low) = uuid.as_u64_pair();
            Some(Repr::Uuid(NonZeroU64::new(high)?, low))
        });
        Self(packed.unwrap_or_else(|| Repr::Text(ThinStr::new(Str::from(text)))))
    }

    /// Whether it is kept as its UUID's 16 bytes.
    pub fn is_packed(&self) -> bool {
        matches!(self.0, Repr::Uuid(..))
    }
}

/// At this length only the hyphenated form parses, and it prints back the same unless
/// some hex digit was uppercase.
fn canonical_uuid(text: &str) -> Option<Uuid> {
    if text.len() != uuid::fmt::Hyphenated::LENGTH || text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    Uuid::try_parse(text).ok()
}

const _: () = assert!(std::mem::size_of::<Uid>() == 16);

/// Compares with text as the API spells it, without allocating.
impl From<&str> for Uid {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, text: &str) -> bool {
        match &self.0 {
            Repr::Uuid(high, low) => canonical_uuid(text).is_some_and(|uuid| uuid.as_u64_pair() == (high.get(), *low)),
            Repr::Text(own) => ***own == *text,
        }
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Uuid(high, low) => fmt::Display::fmt(&Uuid::from_u64_pair(high.get(), *low).hyphenated(), f),
            Repr::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_server_uids_are_packed_and_print_back_the_same() {
        let text = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let uid = Uid::parse(text);
        assert!(uid.is_packed());
        assert_eq!(uid.to_string(), text);
        assert_eq!(uid, *text);
        assert_ne!(uid, *"0f8fad5b-d9cb-469f-a165-70867728950f");
    }

    #[test]
    fn any_other_text_is_kept_as_it_came() {
        for text in [
            "pod-a",
            "",
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5b-d9cb-469f-a165-70867728950E",
            "0f8fad5bd9cb469fa16570867728950e",
            "0f8fad5bd-9cb-469f-a165-70867728950e",
            "{0f8fad5b-d9cb-469f-a165-7086772895}",
        ] {
            let uid = Uid::parse(text);
            assert!(!uid.is_packed(), "{text}");
            assert_eq!(uid.to_string(), text);
            assert_eq!(uid, *text);
        }
        // A UUID whose first half is zero is kept too, as text.
        let zero_half = "00000000-0000-0000-8000-0000000000ff";
        assert!(!Uid::parse(zero_half).is_packed());
        assert_eq!(
            (Uid::parse(zero_half).to_string(), Uid::parse(zero_half)),
            (zero_half.to_owned(), Uid::from(zero_half))
        );
        // The same UUID spelt differently is a different UID, as the API server compares them.
        assert_ne!(
            Uid::parse("0F8FAD5B-D9CB-469F-A165-70867728950E"),
            Uid::parse("0f8fad5b-d9cb-469f-a165-70867728950e")
        );
    }
}
