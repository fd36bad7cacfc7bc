//! A watch line or a list page decoded into the slim types, and, where that fails, what is
//! wrong with it in one line: cut off, not UTF-8, or which field.

use bytes::Bytes;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::api::ObjectList;
use serde::de::DeserializeOwned;

use super::call_error::CallError;
use crate::k8s::proto::{self, ProtoError};
use crate::k8s::slim::{SlimNode, SlimPod};

/// A kind the watches read: whether it is asked for in protobuf, and whether sonic-rs decodes
/// its JSON. sonic-rs's SIMD tokenizer, through the same serde derives, took 4-11% off the
/// CPU to ready in paired runs; but its code is built anew for every type it reads, and for
/// all four kinds (k8s-openapi's DaemonSet and ControllerRevision are large) it grew the
/// binary by 6 MB. Only pods and nodes, the kinds a cluster has thousands of, are worth it,
/// and only they are worth messages of their own in protobuf.
pub trait Wire: DeserializeOwned + Clone {
    /// How the kind is read from protobuf; `None` for a kind asked for only as JSON.
    const PROTOBUF: Option<Protobuf<Self>> = None;

    /// `bytes` decoded by sonic-rs, or `None` to leave them to serde_json.
    fn by_simd<T: DeserializeOwned>(_bytes: &[u8]) -> Option<T> {
        None
    }
}

/// A kind's protobuf readers (`k8s::proto`): its lists, by the list's kind, and its objects,
/// as watch events carry them.
pub struct Protobuf<K: Clone> {
    pub list_kind: &'static str,
    pub kind: &'static str,
    pub list: fn(Bytes) -> Result<ObjectList<K>, ProtoError>,
    pub object: fn(Bytes) -> Result<K, ProtoError>,
}

impl<K: Clone> Clone for Protobuf<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Clone> Copy for Protobuf<K> {}

impl Wire for SlimPod {
    const PROTOBUF: Option<Protobuf<Self>> =
        Some(Protobuf { list_kind: "PodList", kind: "Pod", list: proto::pod_list, object: proto::pod });

    fn by_simd<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
        sonic_rs::from_slice(bytes).ok()
    }
}

impl Wire for SlimNode {
    const PROTOBUF: Option<Protobuf<Self>> =
        Some(Protobuf { list_kind: "NodeList", kind: "Node", list: proto::node_list, object: proto::node });

    fn by_simd<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
        sonic_rs::from_slice(bytes).ok()
    }
}

impl Wire for DaemonSet {}
impl Wire for ControllerRevision {}

/// Decode one JSON document of kind `K` (an event of it, or a list page): by sonic-rs where
/// `K` says so, and where that fails, by serde_json. serde_json stays the judge of what is
/// refused, and says what is wrong in one line; sonic-rs quotes the input over several.
/// Public for the scale bench, which reads its pages as the exporter does.
pub fn decode<K: Wire, T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
    locate: fn(&[u8]) -> Option<String>,
) -> Result<T, CallError> {
    K::by_simd(bytes).map_or_else(|| decode_strictly(bytes, what, locate), Ok)
}

/// Decode by serde_json. A document that ends too soon was cut off; any other error is
/// located by its field path (only on this rare path, by decoding again).
fn decode_strictly<T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
    locate: fn(&[u8]) -> Option<String>,
) -> Result<T, CallError> {
    // Checked as UTF-8 first, whole: a character cut or invalid is named as such.
    let text = std::str::from_utf8(bytes).map_err(|error| match error.error_len() {
        None => CallError::Cut(format!("{what} ends mid-way, inside a character ({} bytes)", bytes.len())),
        Some(_) => CallError::Malformed {
            what,
            at: format!("after `{}`", near(bytes, error.valid_up_to())),
            error: error.to_string(),
        },
    })?;
    serde_json::from_str(text).map_err(|error| {
        if error.is_eof() {
            return CallError::Cut(format!("{what} ends mid-way ({} bytes)", bytes.len()));
        }
        let at = match locate(bytes) {
            Some(path) => format!("field `{path}`"),
            None => format!("after `{}`", near(bytes, error.column())),
        };
        CallError::Malformed { what, at, error: error.to_string() }
    })
}

/// Where in `bytes` decoding `T` fails, as a field path; `None` where the type's own decoder
/// hides it (k8s-openapi's hand-written ones).
pub(super) fn locate<T: DeserializeOwned>(bytes: &[u8]) -> Option<String> {
    let mut document = serde_json::Deserializer::from_slice(bytes);
    let path = serde_path_to_error::deserialize::<_, T>(&mut document).err()?.path().to_string();
    (path != ".").then_some(path)
}

/// `locate` for a watch event's object, decoded on its own: the path is lost through the
/// event's tagged enum.
pub(super) fn locate_in_event<K: DeserializeOwned>(bytes: &[u8]) -> Option<String> {
    let mut event = serde_json::from_slice::<serde_json::Value>(bytes).ok()?;
    let object = event.get_mut("object")?.take();
    let path = serde_path_to_error::deserialize::<_, K>(object).err()?.path().to_string();
    (path != ".").then(|| format!("object.{path}"))
}

/// The text just before `column` (1-based, on the one line a watch event is): where a path
/// cannot be had, what the decoder read last.
fn near(bytes: &[u8], column: usize) -> String {
    let end = column.min(bytes.len());
    let start = end.saturating_sub(40);
    format!("…{}", String::from_utf8_lossy(&bytes[start..end]))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DaemonSet;

    use kube::api::WatchEvent;

    use super::*;
    use crate::source::progress::Failure;

    fn line<K: Wire>(text: &str) -> Result<WatchEvent<K>, CallError> {
        decode::<K, _>(text.as_bytes(), "a watch event", locate_in_event::<K>)
    }

    /// What sonic-rs and serde_json each make of `text`, as Debug text (the slim types have
    /// no `PartialEq`) or the fact that it failed.
    fn by_each<K: DeserializeOwned + std::fmt::Debug>(text: &str) -> (Option<String>, Option<String>) {
        let sonic = sonic_rs::from_str::<WatchEvent<K>>(text).ok().map(debug_of);
        let serde = serde_json::from_str::<WatchEvent<K>>(text).ok().map(debug_of);
        (sonic, serde)
    }

    /// An event's object in full: `WatchEvent`'s own Debug names only its type.
    fn debug_of<K: std::fmt::Debug>(event: WatchEvent<K>) -> String {
        match event {
            WatchEvent::Added(object) => format!("added {object:?}"),
            WatchEvent::Modified(object) => format!("modified {object:?}"),
            WatchEvent::Deleted(object) => format!("deleted {object:?}"),
            WatchEvent::Bookmark(bookmark) => format!("bookmark {:?}", bookmark.metadata.resource_version),
            WatchEvent::Error(status) => format!("error {status:?}"),
        }
    }

    /// A daemon pod as an API server sends it, with what the exporter reads and what it skips.
    fn pod_line(label: &str, annotation: &str) -> String {
        serde_json::json!({"type": "MODIFIED", "object": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "agent-x7k2p", "namespace": "kube-system", "uid": "5f1c-9a", "resourceVersion": "18446744",
                "creationTimestamp": "2026-11-29T20:00:01Z", "deletionTimestamp": null,
                "labels": {"app": label, "controller-revision-hash": "6d4f8b9c7", "pod-template-generation": "3"},
                "annotations": {"note": annotation, "empty": ""},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1",
                    "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-11-29T20:00:01Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
            },
            "spec": {
                "nodeName": "node-1", "nodeSelector": {"pool": label},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms":
                    [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}},
                "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "dedicated", "operator": "Equal", "value": annotation, "effect": "NoSchedule",
                     "tolerationSeconds": null}
                ],
                "hostNetwork": true,
                "containers": [{"name": "agent", "image": "registry.example/agent:1.2", "args": ["--x=\"y\""],
                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}, "ports": [{"containerPort": 9100}]}],
                "terminationGracePeriodSeconds": 30, "priority": -2.5e3
            },
            "status": {
                "phase": "Pending", "startTime": "2026-11-29T20:00:02.123456Z",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-29T20:00:01Z"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": annotation,
                     "lastTransitionTime": "2026-11-29T20:00:03Z", "lastProbeTime": null}
                ],
                "containerStatuses": [{"name": "agent", "ready": false, "restartCount": 4, "image": "x", "imageID": "",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": annotation}}}]
            }
        }})
        .to_string()
        // As Go escapes `<`, `>` and `&`: an escape in a string the exporter keeps.
        .replacen(r#""6d4f8b9c7""#, r#""6d4f\u003c8b9c7""#, 1)
    }

    #[test]
    fn sonic_rs_reads_a_watch_line_as_serde_json_does() {
        let pod = pod_line("agent", "a \"quoted\" note\nover two lines, caf\u{e9}, \u{1F600}");
        let (sonic, serde) = by_each::<SlimPod>(&pod);
        assert!(serde.is_some(), "the line is a pod");
        assert_eq!(sonic, serde);
        let node = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"n\u00e9",
            "labels":{"feature.node.kubernetes.io/cpu":"true"},"resourceVersion":"7"},"spec":{"taints":[{"key":"k",
            "effect":"NoSchedule","timeAdded":null}],"unschedulable":true},"status":{"conditions":[{"type":"Ready",
            "status":"Unknown"}],"capacity":{"cpu":"4"},"images":[{"names":["a","b"],"sizeBytes":123456789012}]}}}"#;
        let (sonic, serde) = by_each::<SlimNode>(node);
        assert!(serde.is_some(), "the line is a node");
        assert_eq!(sonic, serde);
    }

    proptest::proptest! {
        /// Any text in the strings the exporter keeps (escaped as JSON must) reads the same.
        #[test]
        fn sonic_rs_reads_any_string_as_serde_json_does(label in "\\PC{0,24}", note in ".{0,40}") {
            let pod = pod_line(&label, &note);
            let (sonic, serde) = by_each::<SlimPod>(&pod);
            proptest::prop_assert!(serde.is_some());
            proptest::prop_assert_eq!(sonic, serde);
        }
    }

    /// What one decoder refuses, the other does too: sonic-rs never lets through what
    /// serde_json would call malformed.
    #[test]
    fn sonic_rs_refuses_what_serde_json_refuses() {
        let good = pod_line("a", "b");
        let bad = [
            format!("{good} trailing"),
            good.replacen("\"agent-x7k2p\"", "agent", 1),
            good.replacen("\"nodeName\":\"node-1\"", "\"nodeName\":7", 1),
            good.replacen("\"hostNetwork\":true", "\"hostNetwork\":tru", 1),
            good.replacen("\"restartCount\":4", "\"restartCount\":4.", 1),
            good.replacen("\"phase\":\"Pending\"", "\"phase\":\"Pend\u{1}ing\"", 1),
            good.replacen("}}", "},}", 1),
            // In a field the exporter skips.
            good.replacen("\"terminationGracePeriodSeconds\":30", "\"terminationGracePeriodSeconds\":030", 1),
        ];
        for text in bad {
            assert_ne!(text, good, "the fault was put in");
            assert_eq!(by_each::<SlimPod>(&text), (None, None), "{text}");
        }
    }

    #[test]
    fn a_line_cut_off_is_a_cut_not_a_decode_error() {
        let full = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}"#;
        assert!(matches!(line::<SlimPod>(full), Ok(WatchEvent::Added(_))));
        for at in [1, 20, full.len() - 1] {
            let error = line::<SlimPod>(&full[..at]).unwrap_err();
            assert_eq!(error.failure(), Failure::Cut, "cut at {at}: {error}");
        }
    }

    /// The pod's annotations are skipped, not kept: sonic-rs refuses the bad byte there, and
    /// serde_json's whole-line check then names it.
    #[test]
    fn a_line_that_is_not_utf8_says_where_and_one_cut_inside_a_character_is_a_cut() {
        let mut text = br#"{"type":"ADDED","object":{"metadata":{"name":"a","annotations":{"x":"caf"#.to_vec();
        text.extend_from_slice(b"\xc3(\"}}}}");
        let error = decode::<SlimPod, WatchEvent<SlimPod>>(&text, "a watch event", |_| None).unwrap_err();
        assert_eq!(error.failure(), Failure::Malformed, "{error}");
        assert!(error.to_string().contains(r#"{"x":"caf`: invalid utf-8 sequence"#), "{error}");
        let cut = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"caf\u{e9}\"}}}".as_bytes();
        let inside = cut.iter().position(|&b| b == 0xc3).unwrap() + 1;
        let error = decode::<SlimPod, WatchEvent<SlimPod>>(&cut[..inside], "a watch event", |_| None).unwrap_err();
        assert_eq!(error.failure(), Failure::Cut, "{error}");
        assert!(matches!(
            decode::<SlimPod, WatchEvent<SlimPod>>(cut, "a watch event", |_| None),
            Ok(WatchEvent::Added(_))
        ));
    }

    #[test]
    fn a_malformed_line_names_the_field() {
        let text = r#"{"type":"MODIFIED","object":{"apiVersion":{"x":1},"kind":"DaemonSet","metadata":{"name":"a"}}}"#;
        let error = line::<DaemonSet>(text).unwrap_err();
        assert_eq!(error.failure(), Failure::Malformed);
        assert!(error.to_string().starts_with("cannot decode a watch event, field `object.apiVersion`: "), "{error}");
        // Where no path can be had, the text before the error.
        let error =
            decode::<DaemonSet, DaemonSet>(br#"{"kind":"DaemonSet","spec":{"selector":7}}"#, "the object", |_| None);
        assert!(error.unwrap_err().to_string().contains(r#"after `…{"kind":"DaemonSet","spec":{"selector":7`"#));
        let text = r#"{"type":"ADDED","object":{"apiVersion":"v1","metadata":{"name":7}}}"#;
        let error = line::<SlimPod>(text).unwrap_err();
        assert!(error.to_string().contains("field `object.metadata.name`"), "{error}");
        let text = r#"{"type":"ADDED","object":{"apiVersion":7,"metadata":{"name":"p"}}}"#;
        let error = line::<SlimPod>(text).unwrap_err();
        assert!(error.to_string().contains("field `object.apiVersion`: invalid type: integer `7`"), "{error}");
    }

    #[test]
    fn a_watch_error_event_keeps_its_code() {
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#;
        match line::<SlimPod>(gone) {
            Ok(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
            other => panic!("{other:?}"),
        }
    }
}
