//! Object UIDs, kept where the index can compare them without a pointer chase.

use std::fmt;

use uuid::Uuid;

use crate::model::Str;

/// A `metadata.uid`. The API server mints lowercase RFC 4122 UUIDs: those are kept as
/// their 16 bytes, inline: no allocation per pod (about 64 bytes each), and a map keyed by
/// them hashes and compares in its own bucket. Any other text (hand-written objects, other
/// API servers) is kept as it came.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    Uuid(Uuid),
    Text(Str),
}

impl Uid {
    /// Keeps `text` exactly: only the canonical lowercase, hyphenated form is packed,
    /// because only that one prints back the same.
    pub fn parse(text: &str) -> Self {
        match canonical_uuid(text) {
            Some(uuid) => Self::Uuid(uuid),
            None => Self::Text(Str::from(text)),
        }
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

/// Compares with text as the API spells it, without allocating.
impl From<&str> for Uid {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, text: &str) -> bool {
        match self {
            Self::Uuid(uuid) => canonical_uuid(text) == Some(*uuid),
            Self::Text(own) => **own == *text,
        }
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uuid(uuid) => fmt::Display::fmt(&uuid.hyphenated(), f),
            Self::Text(text) => f.write_str(text),
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
        assert!(matches!(uid, Uid::Uuid(_)));
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
            assert!(matches!(uid, Uid::Text(_)), "{text}");
            assert_eq!(uid.to_string(), text);
            assert_eq!(uid, *text);
        }
        // The same UUID spelt differently is a different UID, as the API server compares them.
        assert_ne!(
            Uid::parse("0F8FAD5B-D9CB-469F-A165-70867728950E"),
            Uid::parse("0f8fad5b-d9cb-469f-a165-70867728950e")
        );
    }
}
