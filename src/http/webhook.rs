//! The admission guard's edge: `POST /validate` on its own HTTPS listener
//! (`--webhook-listen`), answered from the index in memory. Nothing here calls the API
//! server: the answer costs a copy of what the change touches (`Index::excerpt`, under
//! the read lock) and what-if on that copy (off the lock).
//!
//! A body that is not a v1 AdmissionReview gets a 400 saying why. Anything the guard cannot
//! check is let through, saying so: the webhook is registered with `failurePolicy: Ignore`,
//! and never stands in the way by failing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::guard::review::{self, Request};
use crate::guard::{self, Change, Policy, Verdict};
use crate::shared::Shared;
use crate::telemetry::Telemetry;

/// An AdmissionReview carries the object and the old object; the API server takes objects
/// of up to 3 MiB.
pub const MAX_REVIEW_BYTES: usize = 7 * 1024 * 1024;
/// Under the 3 s the chart gives the API server to wait: past it, the API server lets the
/// change through unchecked (`failurePolicy: Ignore`) rather than hear a late answer.
pub const REVIEW_TIMEOUT: Duration = Duration::from_millis(2500);

#[derive(Clone)]
struct GuardState {
    shared: Arc<Shared>,
    telemetry: Arc<Telemetry>,
    policy: Arc<Policy>,
}

pub fn router(shared: Arc<Shared>, telemetry: Arc<Telemetry>, policy: Policy) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(GuardState { shared, telemetry, policy: Arc::new(policy) })
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, REVIEW_TIMEOUT))
        .layer(RequestBodyLimitLayer::new(MAX_REVIEW_BYTES))
}

async fn validate(State(state): State<GuardState>, body: Bytes) -> Response {
    let started = Instant::now();
    let request = match review::decode(&body) {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response(),
    };
    let uid = request.uid.clone();
    let GuardState { shared, telemetry, policy } = state;
    // The copy and the simulation take milliseconds at scale: off the async workers.
    let answered = tokio::task::spawn_blocking(move || {
        let (resource, verdict, response) = answer(&shared, &request, &policy);
        if !request.dry_run {
            log(&request, verdict, &response);
        }
        (resource, verdict, response)
    })
    .await;
    let Ok((resource, verdict, response)) = answered else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the review failed\n").into_response();
    };
    telemetry.record_admission(resource, verdict, started.elapsed().as_secs_f64());
    let mut out = review::encode(&uid, &response).into_response();
    out.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    out
}

fn answer(shared: &Shared, request: &Request, policy: &Policy) -> (&'static str, Verdict, review::Response) {
    let change = match Change::of(request) {
        Ok(change) => change,
        Err(error) => {
            let (verdict, response) = guard::not_checked(error);
            return (request_resource(request), verdict, response);
        }
    };
    let resource = change.resource();
    let not_ready = shared.not_ready();
    if !not_ready.is_empty() {
        let names: Vec<&str> = not_ready.iter().map(|r| r.as_str()).collect();
        let (verdict, response) = guard::unsynced(&names);
        return (resource, verdict, response);
    }
    let Some(touched) = change.touched() else {
        return (resource, Verdict::Allowed, review::Response { allowed: true, ..Default::default() });
    };
    let excerpt = shared.read().excerpt(touched);
    let (verdict, response) = guard::answer(excerpt, change, request, policy);
    (resource, verdict, response)
}

/// The resource label of a request whose object could not be read.
fn request_resource(request: &Request) -> &'static str {
    guard::RESOURCES.into_iter().find(|r| *r == request.resource.resource).unwrap_or("other")
}

/// Refusals and bypasses are logged; warnings are the requester's to read.
fn log(request: &Request, verdict: Verdict, response: &review::Response) {
    let object = format!("{} {}", request.resource.resource, request.name);
    let user = request.user_info.username.as_str();
    if let Some(refusal) = &response.refusal {
        tracing::info!(%object, user, %refusal, "admission guard refused a change");
    } else if let Some(why) = response.audit.get("bypass") {
        tracing::info!(%object, user, why, "admission guard bypassed");
    } else if verdict == Verdict::Unsynced {
        tracing::debug!(%object, "admission review answered unchecked: not synced");
    }
}
