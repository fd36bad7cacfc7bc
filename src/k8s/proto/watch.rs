//! A watch event on the protobuf wire (`;stream=watch`): each frame a `WatchEvent` whose
//! object is wrapped as a whole answer is (`envelope`). A bookmark's object is read down to
//! its resourceVersion and annotations, an error's to the `Status` it is.

use std::collections::BTreeMap;

use bytes::Bytes;
use kube::api::{TypeMeta, WatchEvent};
use kube::core::Status;
use kube::core::response::{StatusDetails, StatusSummary};
use kube::core::watch::{Bookmark, BookmarkMeta};
use prost::Message;

use super::{ProtoError, unwrap};

#[derive(Clone, PartialEq, Message)]
struct WireWatchEvent {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtension>,
}

#[derive(Clone, PartialEq, Message)]
struct RawExtension {
    #[prost(bytes = "bytes", optional, tag = "1")]
    raw: Option<Bytes>,
}

/// Of a bookmark's object, its metadata's resourceVersion and annotations.
#[derive(Clone, PartialEq, Message)]
struct BookmarkObject {
    #[prost(message, optional, tag = "1")]
    metadata: Option<WireBookmarkMeta>,
}

#[derive(Clone, PartialEq, Message)]
struct WireBookmarkMeta {
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

/// `metav1.Status`, as a watch's ERROR event carries it.
#[derive(Clone, PartialEq, Message)]
struct WireStatus {
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(string, optional, tag = "4")]
    reason: Option<String>,
    #[prost(message, optional, tag = "5")]
    details: Option<WireStatusDetails>,
    #[prost(int32, optional, tag = "6")]
    code: Option<i32>,
}

/// Of a `Status`'s details, how long the server asks the client to wait.
#[derive(Clone, PartialEq, Message)]
struct WireStatusDetails {
    #[prost(int32, optional, tag = "5")]
    retry_after_seconds: Option<i32>,
}

/// One frame of a watch of `kind` (`Pod`, `Node`), its object read by `object`.
pub fn watch_event<K>(
    frame: Bytes,
    kind: &'static str,
    object: fn(Bytes) -> Result<K, ProtoError>,
) -> Result<WatchEvent<K>, ProtoError> {
    let event = WireWatchEvent::decode(frame)?;
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    let event_type = event.kind.unwrap_or_default();
    Ok(match event_type.as_str() {
        "ADDED" => WatchEvent::Added(object(unwrap(raw, kind)?)?),
        "MODIFIED" => WatchEvent::Modified(object(unwrap(raw, kind)?)?),
        "DELETED" => WatchEvent::Deleted(object(unwrap(raw, kind)?)?),
        "BOOKMARK" => {
            let meta = BookmarkObject::decode(unwrap(raw, kind)?)?.metadata.unwrap_or_default();
            WatchEvent::Bookmark(Bookmark {
                types: TypeMeta { api_version: "v1".into(), kind: kind.into() },
                metadata: BookmarkMeta {
                    resource_version: meta.resource_version.unwrap_or_default(),
                    annotations: meta.annotations,
                },
            })
        }
        "ERROR" => WatchEvent::Error(Box::new(status(raw)?)),
        other => {
            return Err(ProtoError::Field { field: "type", error: format!("{other:?} is no watch event type") });
        }
    })
}

/// A `Status` as a whole answer (a refusal asked for in protobuf) or an ERROR event's object
/// carries it, in its wrapper.
pub fn status(answer: Bytes) -> Result<Status, ProtoError> {
    let status = WireStatus::decode(unwrap(answer, "Status")?)?;
    let code = status.code.unwrap_or_default();
    Ok(Status {
        status: match status.status.as_deref() {
            Some("Success") => Some(StatusSummary::Success),
            Some("Failure") => Some(StatusSummary::Failure),
            _ => None,
        },
        code: u16::try_from(code).map_err(|_| ProtoError::Field { field: "code", error: format!("{code}") })?,
        message: status.message.unwrap_or_default(),
        reason: status.reason.unwrap_or_default(),
        metadata: None,
        details: status.details.map(|d| StatusDetails {
            retry_after_seconds: d.retry_after_seconds.and_then(|s| u32::try_from(s).ok()).unwrap_or_default(),
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::proto::pod;
    use crate::k8s::slim::SlimPod;

    /// A streamed list of the same pods, from the lab's 1.37 API server in each encoding
    /// (`tests/fixtures/proto/fetch.sh`): 13 ADDED, then the bookmark that ends them.
    const JSON: &str = include_str!("../../../tests/fixtures/proto/pods-watch.json");
    const PROTOBUF: &[u8] = include_bytes!("../../../tests/fixtures/proto/pods-watch.pb");

    /// Each frame's event, as Debug text (`WatchEvent`'s own names only its type).
    fn debug(event: WatchEvent<SlimPod>) -> String {
        match event {
            WatchEvent::Added(pod) => format!("added {pod:#?}"),
            WatchEvent::Modified(pod) => format!("modified {pod:#?}"),
            WatchEvent::Deleted(pod) => format!("deleted {pod:#?}"),
            // The two reads were moments apart: the list's resourceVersion may differ.
            WatchEvent::Bookmark(b) => {
                assert!(!b.metadata.resource_version.is_empty());
                format!("bookmark {:?}", b.metadata.annotations)
            }
            WatchEvent::Error(status) => format!("error {status:?}"),
        }
    }

    #[test]
    fn a_real_streamed_list_reads_the_same_from_either_wire() {
        let json: Vec<String> =
            JSON.lines().map(|line| debug(serde_json::from_str::<WatchEvent<SlimPod>>(line).unwrap())).collect();
        let (mut frames, mut rest) = (Vec::new(), Bytes::from_static(PROTOBUF));
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            frames.push(debug(watch_event(rest.slice(4..4 + len), "Pod", pod).unwrap()));
            rest = rest.slice(4 + len..);
        }
        assert!(rest.is_empty(), "whole frames");
        assert_eq!(frames.len(), 14);
        assert!(frames[13].contains(r#"{"k8s.io/initial-events-end": "true"}"#), "{}", frames[13]);
        assert_eq!(frames, json);
    }

    #[test]
    fn an_error_event_keeps_its_code() {
        let status = WireStatus {
            status: Some("Failure".into()),
            message: Some("too old resource version: 1 (2)".into()),
            reason: Some("Expired".into()),
            code: Some(410),
            details: None,
        };
        let unknown = [&b"k8s\0"[..], &envelope_of("Status", &status.encode_to_vec())].concat();
        let event =
            WireWatchEvent { kind: Some("ERROR".into()), object: Some(RawExtension { raw: Some(unknown.into()) }) };
        match watch_event(event.encode_to_vec().into(), "Pod", pod) {
            Ok(WatchEvent::Error(status)) => assert_eq!((status.code, status.reason.as_str()), (410, "Expired")),
            other => panic!("{other:?}"),
        }
    }

    /// A refusal asked for in protobuf comes as a `Status` in its wrapper, with the
    /// server's message and how long it asks the client to wait.
    #[test]
    fn a_refusal_in_protobuf_reads_as_its_status() {
        let status = WireStatus {
            status: Some("Failure".into()),
            message: Some("pods is forbidden: User \"x\" cannot watch resource \"pods\"".into()),
            reason: Some("Forbidden".into()),
            code: Some(403),
            details: Some(WireStatusDetails { retry_after_seconds: Some(7) }),
        };
        let answer = [&b"k8s\0"[..], &envelope_of("Status", &status.encode_to_vec())].concat();
        let read = super::status(answer.into()).unwrap();
        assert_eq!((read.code, read.reason.as_str()), (403, "Forbidden"));
        assert!(read.message.starts_with("pods is forbidden"), "{}", read.message);
        assert_eq!(read.details.map(|d| d.retry_after_seconds), Some(7));
    }

    /// A `runtime.Unknown` of a core v1 `kind` holding `raw`, by its field numbers, as Go writes it.
    fn envelope_of(kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = Vec::new();
        prost::encoding::string::encode(1, &"v1".to_owned(), &mut type_meta);
        prost::encoding::string::encode(2, &kind.to_owned(), &mut type_meta);
        let mut unknown = Vec::new();
        prost::encoding::bytes::encode(1, &type_meta, &mut unknown);
        prost::encoding::bytes::encode(2, &raw.to_vec(), &mut unknown);
        // contentEncoding and contentType, empty, as Go writes them.
        prost::encoding::string::encode(3, &String::new(), &mut unknown);
        prost::encoding::string::encode(4, &String::new(), &mut unknown);
        unknown
    }
}
