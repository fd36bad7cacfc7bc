//! Labels as the watcher decodes them, a pod's and a node's: every key and value back to
//! back in one buffer. A `BTreeMap<String, String>` cost a daemon pod nine allocations (its
//! four labels and a tree node) to build and as many to free, on every status update, which
//! at 2,600,000 pods is most of what an event costs; this costs one (a node's thirty, two).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::str_list::StrList;
use super::{NullAsDefault, WithStr};

/// Labels in key order, each key once, as a `BTreeMap` would hold them: keys and values
/// in turn in one `StrList`, whose twelve inline ends hold a daemon pod's six pairs.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct FlatLabels(StrList<12>);

impl FlatLabels {
    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.0.pairs()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The API server writes labels in key order, each key once; anything else (a hand-written
    /// snapshot) is put in order the way a map reads it: the last of a repeated key wins.
    pub(in crate::k8s) fn into_key_order(self) -> Self {
        let keys_ascend = self.iter().zip(self.iter().skip(1)).all(|((a, _), (b, _))| a < b);
        if keys_ascend { self } else { self.iter().collect::<BTreeMap<_, _>>().into_iter().collect() }
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for FlatLabels {
    /// Pairs given in key order, each key once (a map's iteration).
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Self {
        let mut labels = StrList::default();
        for (key, value) in pairs {
            // Past 4 GiB of labels: not an object the API server would keep.
            if !labels.push_all(&[key, value]) {
                break;
            }
        }
        Self(labels)
    }
}

impl From<&BTreeMap<String, String>> for FlatLabels {
    fn from(map: &BTreeMap<String, String>) -> Self {
        map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
}

impl fmt::Debug for FlatLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Null reads as no labels, as Go's decoder reads it.
impl<'de> Deserialize<'de> for FlatLabels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(NullAsDefault(LabelsVisitor))
    }
}

struct LabelsVisitor;

impl<'de> Visitor<'de> for LabelsVisitor {
    type Value = FlatLabels;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of label keys to values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FlatLabels, A::Error> {
        let mut labels = StrList::default();
        // Each key and value is appended as it is read: no string of its own, escaped or not.
        while let Some(key_fits) = map.next_key_seed(WithStr(|key: &str| labels.push(key)))? {
            if !(key_fits && map.next_value_seed(WithStr(|value: &str| labels.push(value)))?) {
                return Err(de::Error::custom("the labels are longer than 4 GiB"));
            }
        }
        Ok(FlatLabels(labels).into_key_order())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> FlatLabels {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn labels_read_as_a_map_reads_them() {
        let labels = read(r#"{"app":"agent","controller-revision-hash":"5d8f","tier":"node"}"#);
        let pairs: Vec<_> = labels.iter().collect();
        assert_eq!(pairs, [("app", "agent"), ("controller-revision-hash", "5d8f"), ("tier", "node")]);
        assert_eq!(labels.get("tier"), Some("node"));
        assert_eq!(labels.get("missing"), None);
        // Escaped text is read unescaped; an empty value is a value.
        let escaped = read(r#"{"a\u002fb":"","c":"d\"e"}"#);
        assert_eq!(escaped.iter().collect::<Vec<_>>(), [("a/b", ""), ("c", "d\"e")]);
    }

    #[test]
    fn out_of_order_and_repeated_keys_read_as_a_map_reads_them() {
        let json = r#"{"z":"1","a":"2","m":"3","a":"4"}"#;
        let map: BTreeMap<String, String> = serde_json::from_str(json).unwrap();
        assert_eq!(read(json), FlatLabels::from(&map));
        assert_eq!(read(json).iter().collect::<Vec<_>>(), [("a", "4"), ("m", "3"), ("z", "1")]);
    }

    #[test]
    fn null_and_absent_are_no_labels_and_other_shapes_are_errors() {
        assert!(read("null").is_empty());
        assert!(read("{}").is_empty());
        assert!(serde_json::from_str::<FlatLabels>(r#"["a"]"#).is_err());
        assert!(serde_json::from_str::<FlatLabels>(r#"{"a":1}"#).is_err());
    }
}
