//! The two calls a watch makes, list pages and watch streams, sent through kube's client
//! but read here: kube's own watch stream ends quietly when a response is cut mid-line and
//! hides the status and Retry-After of a refusal, and the retry policy needs all three.
//! Gzip is asked for and inflated here too (`Compression`), because the client's layer
//! inflates only the first gzip member of a watch, and 1.37 closes a member at each flush.
//! Pods and nodes are asked for in protobuf where `Encoding` allows (`k8s::proto` reads
//! them); what the answer's content type says is what is decoded.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::future::Either;
use futures::{Stream, StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Limited};
use kube::Client;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::client::Body;
use kube::core::{Request, Status};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tokio_util::io::{ReaderStream, StreamReader};

use super::call_error::CallError;
use super::decode::{Protobuf, Wire, decode, locate, locate_in_event};
use super::lines::{ChunkLines, LineError};
use crate::k8s::proto::{self, ProtoError};

/// The longest watch line read: an object's limit in etcd is 1.5 MiB, a few times that
/// once escaped; anything longer is not an event.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The most of an inflated watch body read at once: an object or a few per read, so few lines
/// span two reads and are copied.
const INFLATED_CHUNK: usize = 64 * 1024;
/// The most of an error answer's body read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

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

/// Which encoding pods and nodes are asked for in (`--wire`); every other kind is read as
/// JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Encoding {
    /// Protobuf, and JSON where the server answers that.
    #[default]
    Auto,
    /// Protobuf only: a JSON answer is a failure.
    Protobuf,
    /// JSON only.
    Json,
}

/// How a call asks for its answer: compressed or not, and in which encoding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ask {
    pub compression: Compression,
    pub encoding: Encoding,
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

impl Ask {
    /// Sets the request's Accept and Accept-Encoding for a call of kind `K`.
    fn set<K: Wire>(self, request: &mut http::Request<Vec<u8>>) {
        let headers = request.headers_mut();
        headers.insert(http::header::ACCEPT_ENCODING, self.compression.accept());
        let accept = match (K::PROTOBUF.is_some(), self.encoding) {
            (false, _) | (true, Encoding::Json) => "application/json",
            (true, Encoding::Auto) => "application/vnd.kubernetes.protobuf, application/json",
            (true, Encoding::Protobuf) => PROTOBUF,
        };
        headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    }

    /// Whether `response` is in protobuf; an error where it is JSON and only protobuf would do.
    fn protobuf<K: Wire>(self, response: &http::Response<Body>) -> Result<Option<Protobuf<K>>, CallError> {
        let content_type = response.headers().get(http::header::CONTENT_TYPE).map(http::HeaderValue::as_bytes);
        match (is_protobuf(response), K::PROTOBUF) {
            (true, Some(readers)) => Ok(Some(readers)),
            (false, Some(_)) if self.encoding == Encoding::Protobuf => Err(CallError::Malformed {
                what: "the answer",
                at: "its content type".into(),
                error: format!(
                    "{} where protobuf was asked for (--wire protobuf)",
                    String::from_utf8_lossy(content_type.unwrap_or(b"none"))
                ),
            }),
            (true, None) => Err(CallError::Malformed {
                what: "the answer",
                at: "its content type".into(),
                error: "protobuf, which was not asked for".into(),
            }),
            (false, _) => Ok(None),
        }
    }
}

fn is_protobuf(response: &http::Response<Body>) -> bool {
    let content_type = response.headers().get(http::header::CONTENT_TYPE);
    content_type.is_some_and(|t| t.as_bytes().starts_with(PROTOBUF.as_bytes()))
}

/// A protobuf answer that cannot be read, as the call's error: cut where it ends too soon.
fn unreadable(what: &'static str, error: ProtoError) -> CallError {
    if error.is_cut() {
        CallError::Cut(format!("{what} ends mid-way ({error})"))
    } else {
        CallError::Malformed { what, at: "in protobuf".into(), error: error.to_string() }
    }
}

fn gzipped(response: &http::Response<Body>) -> bool {
    response.headers().get(http::header::CONTENT_ENCODING).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"))
}

/// A list's page buffers, kept from one page to the next: each page is read (and inflated)
/// into what the last one left, grown only for a larger page. Made anew for each page, the
/// buffers left jemalloc holding the pages before, freed but not yet purged: a paged initial
/// sync at 200,000 pods peaked at 1.37× its RSS once synced (end-to-end bench, 2026-12-07).
#[derive(Debug, Default)]
pub struct PageBuffers {
    received: Vec<u8>,
    inflated: Vec<u8>,
}

/// One page of a list. `idle`: the longest wait for the answer to begin, and then between
/// two pieces of it, before the call counts as stalled (kube's client has no read timeout).
/// `buffers`: the list's, as the page before left them.
pub async fn list_page<K: Wire>(
    client: &Client,
    url_path: &str,
    params: &ListParams,
    ask: Ask,
    idle: Duration,
    buffers: &mut PageBuffers,
) -> Result<ObjectList<K>, CallError> {
    let mut request = Request::new(url_path).list(params).map_err(|e| CallError::Unreachable(e.to_string()))?;
    ask.set::<K>(&mut request);
    let response = send(client, request, idle).await?;
    let (inflate, protobuf) = (gzipped(&response), ask.protobuf::<K>(&response)?);
    let mut body = response.into_body();
    let received = &mut buffers.received;
    received.clear();
    loop {
        let frame = tokio::time::timeout(idle, body.frame()).await.map_err(|_| CallError::Stalled(idle))?;
        match frame {
            None => break,
            Some(Err(error)) => return Err(CallError::Cut(error.to_string())),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    received.extend_from_slice(data);
                }
            }
        }
    }
    let page = if inflate {
        let inflated = &mut buffers.inflated;
        inflated.clear();
        inflated.reserve(received.len() * 8);
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&received[..]), inflated).map_err(
            |error| match error.kind() {
                // As an identity body that ends mid-way.
                std::io::ErrorKind::UnexpectedEof => {
                    CallError::Cut(format!("the list's gzip body ends mid-way ({error})"))
                }
                _ => CallError::Malformed { what: "the list", at: "its gzip body".into(), error: error.to_string() },
            },
        )?;
        inflated
    } else {
        received
    };
    match protobuf {
        None => decode::<K, _>(page, "the list", locate::<ObjectList<K>>),
        Some(readers) => {
            // Read in place: the buffer goes into `Bytes` and, the page read, comes back.
            let bytes = Bytes::from(std::mem::take(page));
            let list = proto::unwrap(bytes.clone(), readers.list_kind).and_then(readers.list);
            *page = bytes.try_into_mut().map(Vec::from).unwrap_or_default();
            list.map_err(|error| unreadable("the list", error))
        }
    }
}

/// The events of one watch call, in order; the stream ends when the server closes it.
/// `idle`: the longest wait for the answer to begin (the caller times the events).
pub async fn watch<K: Wire>(
    client: &Client,
    url_path: &str,
    params: &WatchParams,
    resource_version: &str,
    ask: Ask,
    idle: Duration,
) -> Result<impl Stream<Item = Result<WatchEvent<K>, CallError>> + use<K>, CallError> {
    let mut request =
        Request::new(url_path).watch(params, resource_version).map_err(|e| CallError::Unreachable(e.to_string()))?;
    ask.set::<K>(&mut request);
    let response = send(client, request, idle).await?;
    let (inflate, protobuf) = (gzipped(&response), ask.protobuf::<K>(&response)?);
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
    Ok(match protobuf {
        None => Either::Left(ChunkLines::new(chunks, MAX_LINE).map(|line| match line {
            Ok(line) => decode::<K, _>(&line, "a watch event", locate_in_event::<K>),
            Err(LineError::Io(error)) => Err(CallError::Cut(error.to_string())),
            Err(error @ LineError::TooLong(_)) => Err(CallError::Malformed {
                what: "a watch event",
                at: "the whole line".into(),
                error: error.to_string(),
            }),
        })),
        // Each event a frame: its length in four bytes, big-endian, then the event.
        Some(readers) => {
            let codec = LengthDelimitedCodec::builder().max_frame_length(MAX_LINE).new_codec();
            Either::Right(FramedRead::new(StreamReader::new(chunks), codec).map(move |frame| {
                match frame {
                    Ok(frame) => proto::watch_event(frame.freeze(), readers.kind, readers.object)
                        .map_err(|error| unreadable("a watch event", error)),
                    Err(error) if error.kind() == std::io::ErrorKind::InvalidData => Err(CallError::Malformed {
                        what: "a watch event",
                        at: "its frame".into(),
                        error: error.to_string(),
                    }),
                    Err(error) => Err(CallError::Cut(error.to_string())),
                }
            }))
        }
    })
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
    // A refusal comes in the encoding asked for: a pod or node call's in protobuf.
    let protobuf = is_protobuf(&response);
    let header = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = Limited::new(response.into_body(), MAX_ERROR_BODY).collect().await.map(|b| b.to_bytes());
    let status = body.as_ref().ok().and_then(|b| match protobuf {
        true => proto::status(b.clone()).ok(),
        false => serde_json::from_slice::<Status>(b).ok(),
    });
    let message = match (&status, &body) {
        (Some(status), _) if !status.message.is_empty() => status.message.clone(),
        (_, Ok(body)) if !protobuf => String::from_utf8_lossy(body).trim().chars().take(200).collect(),
        (_, _) => String::new(),
    };
    // The API server says it both ways; a proxy only in the header.
    let in_body = status.and_then(|s| s.details).map(|d| d.retry_after_seconds).filter(|&s| s > 0);
    let retry_after = header.or(in_body.map(u64::from)).map(Duration::from_secs);
    Err(CallError::Status { code, message, retry_after })
}
