//! Parts of a pod read once for each distinct text. Every pod of a DaemonSet's revision
//! carries the same labels, owner reference and tolerations (about eight, with the ones the
//! controller adds); in a profile of the initial sync, parsing them again for every pod
//! took a fifth of the exporter's CPU, a third of its decoding.
//! sonic-rs can hand over a value's raw text (for its `LazyValue`); a value whose text this
//! thread has read before is cloned from a memo, not parsed again. Other decoders
//! (serde_json, which judges what sonic-rs refuses) read the value as usual.

use std::cell::RefCell;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::thread::LocalKey;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

use crate::model::FastMap;

/// The name sonic-rs gives the newtype it fills with a value's raw text. It is private to
/// sonic-rs: if it changes, every value is parsed, and `sonic_rs_hands_over_the_raw_text`
/// fails.
const RAW_TEXT: &str = "$sonic_rs::LazyValue";

/// Longer texts are parsed every time, so that a memo stays small whatever pods say.
const TEXT_MAX: usize = 4096;

/// Distinct texts a memo keeps; at this many it starts again. A cluster has about one of
/// each part per DaemonSet revision.
const ENTRIES_MAX: usize = 256;

/// A value read by its text: cheap to clone, and the same for the same text.
pub(super) trait ByText: DeserializeOwned + Clone + 'static {
    /// This thread's memo of the values read.
    fn memo() -> &'static LocalKey<TextMemo<Self>>;
}

/// Values of one type by the text they were read from, on one thread.
pub(super) type TextMemo<T> = Memo<str, T>;

/// Values of one type by the bytes they were read from (JSON text, or protobuf), on one
/// thread; at [`ENTRIES_MAX`] entries it starts again.
pub(in crate::k8s) struct Memo<K: ?Sized, T>(RefCell<FastMap<Box<K>, T>>);

impl<K: ?Sized, T> Default for Memo<K, T> {
    fn default() -> Self {
        Self(RefCell::default())
    }
}

impl<K: ?Sized + Eq + Hash + AsRef<[u8]>, T: Clone> Memo<K, T>
where
    for<'a> &'a K: Into<Box<K>>,
{
    /// The value read from `raw` before, or `read(raw)`, kept if `raw` is at most
    /// [`TEXT_MAX`] long. What fails to read is not kept.
    pub(in crate::k8s) fn get_or_read<E>(&self, raw: &K, read: impl FnOnce(&K) -> Result<T, E>) -> Result<T, E> {
        if raw.as_ref().len() > TEXT_MAX {
            return read(raw);
        }
        if let Some(seen) = self.0.borrow().get(raw) {
            return Ok(seen.clone());
        }
        let parsed = read(raw)?;
        let mut memo = self.0.borrow_mut();
        if memo.len() >= ENTRIES_MAX {
            memo.clear();
        }
        memo.insert(raw.into(), parsed.clone());
        Ok(parsed)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

/// `deserialize_with` for a part read by its text.
pub(super) fn by_text<'de, D: Deserializer<'de>, T: ByText>(deserializer: D) -> Result<T, D::Error> {
    deserializer.deserialize_newtype_struct(RAW_TEXT, ByTextVisitor(PhantomData))
}

/// A part read by its text, where a type holds it in a form read some other way too (a
/// node's labels are its own, and read as usual).
#[derive(Default)]
pub(super) struct Shared<T>(pub T);

impl<'de, T: ByText> de::Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        by_text(deserializer).map(Shared)
    }
}

struct ByTextVisitor<T>(PhantomData<T>);

impl<'de, T: ByText> Visitor<'de> for ByTextVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    /// The raw text of the value (sonic-rs), whole and checked as one JSON value.
    fn visit_str<E: de::Error>(self, raw: &str) -> Result<T, E> {
        T::memo().with(|memo| memo.get_or_read(raw, parse))
    }

    /// Any other decoder: the value itself.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(deserializer)
    }
}

fn parse<T: DeserializeOwned, E: de::Error>(raw: &str) -> Result<T, E> {
    sonic_rs::from_str(raw).map_err(E::custom)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
    struct Part(Option<Vec<String>>);

    impl ByText for Part {
        fn memo() -> &'static LocalKey<TextMemo<Self>> {
            thread_local!(static SEEN: TextMemo<Part> = TextMemo::default());
            &SEEN
        }
    }

    #[derive(Deserialize)]
    struct Holder {
        #[serde(default, deserialize_with = "by_text")]
        part: Part,
    }

    fn read(text: &str) -> (Result<Part, String>, Result<Part, String>) {
        let sonic = sonic_rs::from_str::<Holder>(text).map(|h| h.part).map_err(|e| e.to_string());
        let serde = serde_json::from_str::<Holder>(text).map(|h| h.part).map_err(|e| e.to_string());
        (sonic, serde)
    }

    fn seen() -> usize {
        Part::memo().with(TextMemo::len)
    }

    /// A text read twice is parsed once; both decoders read the same value.
    #[test]
    fn sonic_rs_hands_over_the_raw_text() {
        let text = r#"{"part": ["a", "b\u0021"]}"#;
        let expected = Part(Some(vec!["a".into(), "b!".into()]));
        assert_eq!(read(text), (Ok(expected.clone()), Ok(expected.clone())));
        assert_eq!(seen(), 1, "sonic-rs's text was kept");
        assert_eq!(read(&format!("{text} ")), (Ok(expected.clone()), Ok(expected)));
        assert_eq!(seen(), 1, "and found again");
    }

    #[test]
    fn null_absent_and_empty_read_alike_by_each_decoder() {
        for (text, expected) in [(r#"{"part": null}"#, None), ("{}", None), (r#"{"part": []}"#, Some(vec![]))] {
            let (sonic, serde) = read(text);
            assert_eq!(sonic, Ok(Part(expected.clone())), "{text}");
            assert_eq!(serde, Ok(Part(expected)), "{text}");
        }
    }

    /// Malformed is an error from each decoder every time: it is not remembered.
    #[test]
    fn a_malformed_value_is_refused_every_time() {
        for text in [r#"{"part": [7]}"#, r#"{"part": "a"}"#, r#"{"part": [}"#] {
            for _ in 0..2 {
                let (sonic, serde) = read(text);
                assert!(sonic.is_err() && serde.is_err(), "{text}");
            }
        }
        assert_eq!(seen(), 0);
    }

    #[test]
    fn a_memo_stays_bounded() {
        for n in 0..ENTRIES_MAX * 2 {
            let _ = read(&format!(r#"{{"part": ["{n}"]}}"#));
            assert!(seen() <= ENTRIES_MAX);
        }
        let long = format!(r#"{{"part": ["{}"]}}"#, "k".repeat(TEXT_MAX));
        let before = seen();
        assert!(read(&long).0.is_ok_and(|part| part.0.is_some_and(|list| list[0].len() == TEXT_MAX)));
        assert_eq!(seen(), before, "a long text is parsed, not kept");
    }
}
