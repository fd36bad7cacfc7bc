//! The `admission.k8s.io/v1` AdmissionReview on the wire: the request the API server
//! sends, decoded only as far as the guard reads it, and the response it expects. A body
//! that is not a v1 review with a request is refused with what is wrong, never a panic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("not an AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "apiVersion {found:?} and kind {kind:?}: only {API_VERSION} {KIND} is served (admissionReviewVersions: [v1])"
    )]
    Version { found: String, kind: String },
    #[error("the AdmissionReview has no request")]
    NoRequest,
    #[error("the AdmissionReview's request has no uid")]
    NoUid,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

/// What the guard reads of an `AdmissionRequest`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    #[serde(default, deserialize_with = "nullable")]
    pub resource: GroupResource,
    #[serde(default, deserialize_with = "nullable")]
    pub sub_resource: String,
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub operation: String,
    #[serde(default, deserialize_with = "nullable")]
    pub user_info: UserInfo,
    /// The object as it would be stored; `null` for DELETE.
    #[serde(default)]
    pub object: Value,
    #[serde(default, deserialize_with = "nullable")]
    pub dry_run: bool,
}

/// An absent field and a `null` one mean the same: cluster-scoped objects have no namespace.
fn nullable<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct GroupResource {
    #[serde(default, deserialize_with = "nullable")]
    pub group: String,
    #[serde(default, deserialize_with = "nullable")]
    pub resource: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default, deserialize_with = "nullable")]
    pub username: String,
}

/// The request of a v1 AdmissionReview body.
pub fn decode(body: &[u8]) -> Result<Request, ReviewError> {
    let review: Review = serde_json::from_slice(body)?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(ReviewError::Version { found: review.api_version, kind: review.kind });
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    Ok(request)
}

/// The answer to one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub allowed: bool,
    /// Printed by kubectl as `Warning: ...`.
    pub warnings: Vec<String>,
    /// Why it is refused (HTTP 403 for the client).
    pub refusal: Option<String>,
    /// Recorded in the API server's audit log with the request.
    pub audit: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Status<'a> {
    code: u16,
    reason: &'static str,
    message: &'a str,
}

/// The AdmissionReview body that answers request `uid`.
pub fn encode(uid: &str, response: &Response) -> Vec<u8> {
    let out = ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response: ResponseOut {
            uid,
            allowed: response.allowed,
            warnings: &response.warnings,
            status: response.refusal.as_deref().map(|message| Status { code: 403, reason: "Forbidden", message }),
            audit_annotations: &response.audit,
        },
    };
    // Strings and maps of strings only: serializing cannot fail.
    serde_json::to_vec(&out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(value: Value) -> Vec<u8> {
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn a_v1_review_decodes() {
        let request = decode(&body(json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "request": {
                "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Node"},
                "resource": {"group": "", "version": "v1", "resource": "nodes"},
                "name": "n1", "operation": "UPDATE", "userInfo": {"username": "alice", "groups": ["a"]},
                "object": {"metadata": {"name": "n1"}}, "oldObject": {"metadata": {"name": "n1"}},
                "dryRun": true, "options": {"kind": "UpdateOptions"}
            }
        })))
        .unwrap();
        assert_eq!((request.uid.as_str(), request.resource.resource.as_str()), ("u1", "nodes"));
        assert_eq!((request.operation.as_str(), request.user_info.username.as_str()), ("UPDATE", "alice"));
        assert!(request.dry_run);
        assert_eq!(request.object["metadata"]["name"], "n1");
    }

    #[test]
    fn what_is_not_a_v1_review_with_a_request_is_said() {
        let cases = [
            (b"".to_vec(), "not an AdmissionReview"),
            (b"{\"apiVersion\":".to_vec(), "not an AdmissionReview"),
            (b"[1,2]".to_vec(), "not an AdmissionReview"),
            (body(json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": KIND, "request": {"uid": "u"}})), "only"),
            (body(json!({"apiVersion": API_VERSION, "kind": KIND})), "no request"),
            (body(json!({"apiVersion": API_VERSION, "kind": KIND, "request": {"uid": ""}})), "no uid"),
            (body(json!({"apiVersion": API_VERSION, "kind": KIND, "request": {"uid": 7}})), "not an AdmissionReview"),
        ];
        for (body, said) in cases {
            let error = decode(&body).unwrap_err().to_string();
            assert!(error.contains(said), "{error}");
        }
    }

    #[test]
    fn the_response_answers_the_uid_and_says_why_it_refuses() {
        let refused =
            Response { allowed: false, warnings: vec!["w".into()], refusal: Some("no".into()), audit: BTreeMap::new() };
        let out: Value = serde_json::from_slice(&encode("u1", &refused)).unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": API_VERSION, "kind": KIND, "response": {
                "uid": "u1", "allowed": false, "warnings": ["w"],
                "status": {"code": 403, "reason": "Forbidden", "message": "no"}
            }})
        );
        let allowed: Value =
            serde_json::from_slice(&encode("u2", &Response { allowed: true, ..Response::default() })).unwrap();
        assert_eq!(
            allowed,
            json!({"apiVersion": API_VERSION, "kind": KIND, "response": {"uid": "u2", "allowed": true}})
        );
    }
}
