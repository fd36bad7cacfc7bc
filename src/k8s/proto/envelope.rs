//! The wrapper around every protobuf answer and watched object: the four bytes `k8s\0`,
//! then a `runtime.Unknown` with the object's apiVersion and kind, and the object itself.

use bytes::Bytes;
use prost::Message;

use super::ProtoError;

/// What every protobuf answer begins with.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
    /// Written last, always (empty): where it is missing, the answer was cut between fields.
    #[prost(string, optional, tag = "4")]
    content_type: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

/// The object inside `answer`, checked to be a core v1 `kind`.
pub fn unwrap(answer: Bytes, kind: &'static str) -> Result<Bytes, ProtoError> {
    if !answer.starts_with(MAGIC) {
        return Err(ProtoError::NotProtobuf);
    }
    let body = answer.slice(MAGIC.len()..);
    let unknown = Unknown::decode(body.clone()).map_err(|error| match ends_mid_field(&body) {
        true => ProtoError::Cut(format!("inside a field ({error})")),
        false => ProtoError::Decode(error),
    })?;
    if unknown.content_type.is_none() {
        return Err(ProtoError::Cut("between fields: the wrapper's last one, written always, is missing".into()));
    }
    let types = unknown.type_meta.unwrap_or_default();
    let (version, found) = (types.api_version.unwrap_or_default(), types.kind.unwrap_or_default());
    if version != "v1" || found != kind {
        return Err(ProtoError::Kind { expected: kind, found: format!("{version:?} {found:?}") });
    }
    match unknown.content_encoding.filter(|e| !e.is_empty()) {
        Some(encoding) => Err(ProtoError::Encoding(encoding)),
        None => Ok(unknown.raw.unwrap_or_default()),
    }
}

/// Whether `bytes` end inside one of their message's fields: a key or a length cut off, or a
/// value shorter than its length says. An answer cut on its way ends so; one malformed
/// otherwise (prost says "invalid varint" of both a cut and a bad varint) does not.
fn ends_mid_field(mut bytes: &[u8]) -> bool {
    /// A varint's value and what follows it; `Err(true)` where the bytes end inside it.
    fn varint(bytes: &mut &[u8]) -> Result<u64, bool> {
        let cut = bytes.len() < 10 && bytes.iter().all(|b| b & 0x80 != 0);
        prost::encoding::decode_varint(bytes).map_err(|_| cut)
    }
    while !bytes.is_empty() {
        let length = match varint(&mut bytes).map(|key| key & 7) {
            Err(cut) => return cut,
            Ok(0) => varint(&mut bytes).map(|_| 0),
            Ok(1) => Ok(8),
            Ok(2) => varint(&mut bytes),
            Ok(5) => Ok(4),
            Ok(_) => return false,
        };
        match length {
            Err(cut) => return cut,
            Ok(length) if length > bytes.len() as u64 => return true,
            Ok(length) => bytes = &bytes[length as usize..],
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(api_version: &str, kind: &str, raw: &[u8]) -> Bytes {
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
            raw: Some(Bytes::copy_from_slice(raw)),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC, &unknown.encode_to_vec()].concat().into()
    }

    #[test]
    fn the_object_is_unwrapped_only_if_it_is_the_kind_asked_for() {
        assert_eq!(unwrap(wrapped("v1", "PodList", b"\x0a\x00"), "PodList").unwrap(), &b"\x0a\x00"[..]);
        let error = unwrap(wrapped("apps/v1", "PodList", b""), "PodList").unwrap_err();
        assert_eq!(error.to_string(), r#"it holds "apps/v1" "PodList", not PodList"#);
        assert!(matches!(unwrap(wrapped("v1", "Status", b""), "PodList"), Err(ProtoError::Kind { .. })));
        let json = Bytes::from_static(br#"{"kind":"PodList"}"#);
        assert!(matches!(unwrap(json, "PodList"), Err(ProtoError::NotProtobuf)));
    }

    #[test]
    fn a_wrapper_cut_short_is_a_cut() {
        let whole = wrapped("v1", "PodList", &[7; 300]);
        let error = unwrap(whole.slice(..whole.len() - 1), "PodList").unwrap_err();
        assert!(error.is_cut(), "{error}");
        let error = unwrap(Bytes::from_static(b"k8s\0\x0f"), "PodList").unwrap_err();
        assert!(!error.is_cut(), "{error}");
    }
}
