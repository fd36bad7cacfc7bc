//! The two calls a watch makes, list pages and watch streams, sent through kube's client
//! but read here: kube's own watch stream ends quietly when a response is cut mid-line and
//! hides the status and Retry-After of a refusal, and the retry policy needs all three.
//! Gzip is asked for and inflated here too (`Compression`), because the client's layer
//! inflates only the first gzip member of a watch, and 1.37 closes a member at each flush.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Limited};
use kube::Client;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::client::Body;
use kube::core::{Request, Status};
use serde::de::DeserializeOwned;
use tokio_util::io::{ReaderStream, StreamReader};

use super::advice;
use super::lines::{ChunkLines, LineError};
use super::progress::Failure;

/// The longest watch line read: an object's limit in etcd is 1.5 MiB, a few times that
/// once escaped; anything longer is not an event.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The most of an inflated watch body read at once: an object or a few per read, so few lines
/// span two reads and are copied.
const INFLATED_CHUNK: usize = 64 * 1024;
/// The most of an error answer's body read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why a call brought nothing usable, in words that say which call.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{}{}", advice::status_line(*code, message), retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    Status { code: u16, message: String, retry_after: Option<Duration> },
    #[error("watch ended with an ERROR event {code}: {message}")]
    WatchStatus { code: u16, message: String },
    #[error("no answer: {0}")]
    Unreachable(String),
    #[error("the response was cut off: {0}")]
    Cut(String),
    #[error("nothing arrived for {}s (no event, no bookmark, no data): the connection is stalled", .0.as_secs())]
    Stalled(Duration),
    /// A server that answered a streaming list as a plain watch.
    #[error("the API server does not stream lists ({0}); with --list-mode auto or pages the exporter lists in pages")]
    NoStreaming(String),
    /// `at`: "field `object.metadata.name`", or the text just before the error.
    #[error("cannot decode {what}, {at}: {error}")]
    Malformed { what: &'static str, at: String, error: String },
}

impl CallError {
    pub fn failure(&self) -> Failure {
        match self {
            Self::Status { code, .. } | Self::WatchStatus { code, .. } => failure_of_status(*code),
            Self::NoStreaming(_) => Failure::Refused,
            Self::Unreachable(_) => Failure::Unreachable,
            Self::Cut(_) => Failure::Cut,
            Self::Stalled(_) => Failure::Stalled,
            Self::Malformed { .. } => Failure::Malformed,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The resourceVersion is gone (410): relist, not a failure.
    pub fn is_expired(&self) -> bool {
        matches!(self, Self::Status { code: 410, .. } | Self::WatchStatus { code: 410, .. })
    }
}

/// Whether the calls ask the API server to gzip its answers (`--apiserver-compression`). The
/// client they go through must not inflate them itself (`Config::disable_compression`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    Identity,
    Gzip,
}

impl Compression {
    fn accept(self) -> http::HeaderValue {
        http::HeaderValue::from_static(match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
        })
    }
}

fn ask(request: &mut http::Request<Vec<u8>>, compression: Compression) {
    request.headers_mut().insert(http::header::ACCEPT_ENCODING, compression.accept());
}

fn gzipped(response: &http::Response<Body>) -> bool {
    response.headers().get(http::header::CONTENT_ENCODING).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"))
}

/// The sizes of a list's last page, as received and as JSON: the next page's buffers are
/// made that size at once (and an eighth more), where a buffer grown as the body arrives
/// doubles and copies itself, and holds both copies at the end of each page.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageSizes {
    received: usize,
    json: usize,
}

impl PageSizes {
    fn room(last: usize) -> usize {
        last + last / 8
    }
}

/// One page of a list. `idle`: the longest wait for the answer to begin, and then between
/// two pieces of it, before the call counts as stalled (kube's client has no read timeout).
/// `sizes`: the page before's, updated to this one's.
pub async fn list_page<K: DeserializeOwned + Clone>(
    client: &Client,
    url_path: &str,
    params: &ListParams,
    compression: Compression,
    idle: Duration,
    sizes: &mut PageSizes,
) -> Result<ObjectList<K>, CallError> {
    let mut request = Request::new(url_path).list(params).map_err(|e| CallError::Unreachable(e.to_string()))?;
    ask(&mut request, compression);
    let response = send(client, request, idle).await?;
    let inflate = gzipped(&response);
    let mut body = response.into_body();
    let mut bytes = Vec::with_capacity(PageSizes::room(sizes.received));
    loop {
        let frame = tokio::time::timeout(idle, body.frame()).await.map_err(|_| CallError::Stalled(idle))?;
        match frame {
            None => break,
            Some(Err(error)) => return Err(CallError::Cut(error.to_string())),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
        }
    }
    sizes.received = bytes.len();
    if inflate {
        let expected = if sizes.json > 0 { PageSizes::room(sizes.json) } else { bytes.len() * 8 };
        let mut inflated = Vec::with_capacity(expected);
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut inflated).map_err(
            |error| match error.kind() {
                // As an identity body that ends mid-way.
                std::io::ErrorKind::UnexpectedEof => {
                    CallError::Cut(format!("the list's gzip body ends mid-way ({error})"))
                }
                _ => CallError::Malformed { what: "the list", at: "its gzip body".into(), error: error.to_string() },
            },
        )?;
        bytes = inflated;
    }
    sizes.json = bytes.len();
    decode(&bytes, "the list", locate::<ObjectList<K>>)
}

/// The events of one watch call, in order; the stream ends when the server closes it.
/// `idle`: the longest wait for the answer to begin (the caller times the events).
pub async fn watch<K: DeserializeOwned + Clone>(
    client: &Client,
    url_path: &str,
    params: &WatchParams,
    resource_version: &str,
    compression: Compression,
    idle: Duration,
) -> Result<impl Stream<Item = Result<WatchEvent<K>, CallError>> + use<K>, CallError> {
    let mut request =
        Request::new(url_path).watch(params, resource_version).map_err(|e| CallError::Unreachable(e.to_string()))?;
    ask(&mut request, compression);
    let response = send(client, request, idle).await?;
    let inflate = gzipped(&response);
    let chunks = response.into_body().into_data_stream().map_err(std::io::Error::other);
    // Split as bytes; `decode` checks each line's UTF-8 whole.
    let chunks: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>> = if inflate {
        // Kubernetes 1.37 closes a gzip member at each flush of a streamed list.
        let mut members = async_compression::tokio::bufread::GzipDecoder::new(StreamReader::new(chunks));
        members.multiple_members(true);
        Box::pin(ReaderStream::with_capacity(members, INFLATED_CHUNK))
    } else {
        Box::pin(chunks)
    };
    let lines = ChunkLines::new(chunks, MAX_LINE);
    Ok(lines.map(|line| match line {
        Ok(line) => decode(&line, "a watch event", locate_in_event::<K>),
        Err(LineError::Io(error)) => Err(CallError::Cut(error.to_string())),
        Err(error @ LineError::TooLong(_)) => {
            Err(CallError::Malformed { what: "a watch event", at: "the whole line".into(), error: error.to_string() })
        }
    }))
}

/// The failure an HTTP error status (or a watch ERROR event's code) stands for.
pub fn failure_of_status(code: u16) -> Failure {
    match code {
        429 => Failure::Throttled,
        500..=599 => Failure::Unavailable,
        _ => Failure::Refused,
    }
}

async fn send(
    client: &Client,
    request: http::Request<Vec<u8>>,
    idle: Duration,
) -> Result<http::Response<Body>, CallError> {
    let sent = tokio::time::timeout(idle, client.send(request.map(Body::from))).await;
    let response = sent.map_err(|_| CallError::Stalled(idle))?.map_err(|e| CallError::Unreachable(e.to_string()))?;
    if response.status().is_success() {
        return Ok(response);
    }
    let code = response.status().as_u16();
    let header = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = Limited::new(response.into_body(), MAX_ERROR_BODY).collect().await.map(|b| b.to_bytes());
    let status = body.as_deref().ok().and_then(|b| serde_json::from_slice::<Status>(b).ok());
    let message = match (&status, &body) {
        (Some(status), _) if !status.message.is_empty() => status.message.clone(),
        (_, Ok(body)) => String::from_utf8_lossy(body).trim().chars().take(200).collect(),
        (_, Err(_)) => String::new(),
    };
    // The API server says it both ways; a proxy only in the header.
    let in_body = status.and_then(|s| s.details).map(|d| d.retry_after_seconds).filter(|&s| s > 0);
    let retry_after = header.or(in_body.map(u64::from)).map(Duration::from_secs);
    Err(CallError::Status { code, message, retry_after })
}

/// Decode one JSON document. A document that ends too soon was cut off; any other error is
/// located by its field path (only on this rare path, by decoding again).
fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
    locate: fn(&[u8]) -> Option<String>,
) -> Result<T, CallError> {
    // Checked as UTF-8 once, whole, and then parsed as a str: from bytes, serde_json checks
    // every key and kept string on its own, which cost a tenth of the CPU to ready (perf).
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
fn locate<T: DeserializeOwned>(bytes: &[u8]) -> Option<String> {
    let mut document = serde_json::Deserializer::from_slice(bytes);
    let path = serde_path_to_error::deserialize::<_, T>(&mut document).err()?.path().to_string();
    (path != ".").then_some(path)
}

/// `locate` for a watch event's object, decoded on its own: the path is lost through the
/// event's tagged enum.
fn locate_in_event<K: DeserializeOwned>(bytes: &[u8]) -> Option<String> {
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

    use super::*;
    use crate::k8s::slim::SlimPod;

    fn line<K: DeserializeOwned + Clone>(text: &str) -> Result<WatchEvent<K>, CallError> {
        decode(text.as_bytes(), "a watch event", locate_in_event::<K>)
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

    #[test]
    fn a_line_that_is_not_utf8_says_where_and_one_cut_inside_a_character_is_a_cut() {
        let mut text = br#"{"type":"ADDED","object":{"metadata":{"name":"a","annotations":{"x":"caf"#.to_vec();
        text.extend_from_slice(b"\xc3(\"}}}}");
        let error = decode::<WatchEvent<SlimPod>>(&text, "a watch event", |_| None).unwrap_err();
        assert_eq!(error.failure(), Failure::Malformed, "{error}");
        assert!(error.to_string().contains(r#"{"x":"caf`: invalid utf-8 sequence"#), "{error}");
        let cut = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"caf\u{e9}\"}}}".as_bytes();
        let inside = cut.iter().position(|&b| b == 0xc3).unwrap() + 1;
        let error = decode::<WatchEvent<SlimPod>>(&cut[..inside], "a watch event", |_| None).unwrap_err();
        assert_eq!(error.failure(), Failure::Cut, "{error}");
        assert!(matches!(decode::<WatchEvent<SlimPod>>(cut, "a watch event", |_| None), Ok(WatchEvent::Added(_))));
    }

    #[test]
    fn a_malformed_line_names_the_field() {
        let text = r#"{"type":"MODIFIED","object":{"apiVersion":{"x":1},"kind":"DaemonSet","metadata":{"name":"a"}}}"#;
        let error = line::<DaemonSet>(text).unwrap_err();
        assert_eq!(error.failure(), Failure::Malformed);
        assert!(error.to_string().starts_with("cannot decode a watch event, field `object.apiVersion`: "), "{error}");
        // Where no path can be had, the text before the error.
        let error = decode::<DaemonSet>(br#"{"kind":"DaemonSet","spec":{"selector":7}}"#, "the object", |_| None);
        assert!(error.unwrap_err().to_string().contains(r#"after `…{"kind":"DaemonSet","spec":{"selector":7`"#));
        let text = r#"{"type":"ADDED","object":{"apiVersion":"v1","metadata":{"name":7}}}"#;
        let error = line::<SlimPod>(text).unwrap_err();
        assert!(error.to_string().contains("field `object.metadata.name`"), "{error}");
        let text = r#"{"type":"ADDED","object":{"apiVersion":7,"metadata":{"name":"p"}}}"#;
        let error = line::<SlimPod>(text).unwrap_err();
        assert!(error.to_string().contains("field `object.apiVersion`: invalid type: integer `7`"), "{error}");
    }

    #[test]
    fn statuses_name_their_failure() {
        assert_eq!(failure_of_status(429), Failure::Throttled);
        assert_eq!(failure_of_status(503), Failure::Unavailable);
        assert_eq!(failure_of_status(504), Failure::Unavailable);
        assert_eq!(failure_of_status(403), Failure::Refused);
        let labels: std::collections::HashSet<_> = Failure::COUNTED.map(Failure::as_str).into();
        assert_eq!(labels.len(), 7);
        assert!(!labels.contains(Failure::Stalled.as_str()), "a stall has its own counter");
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
