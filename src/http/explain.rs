//! `GET /explain` (the explanation as JSON, the object `explain -o json` prints) and
//! `GET /` (the same as a page). Both take the `namespace` and `daemonset` query
//! parameters of [`Selection`].
//!
//! Neither claims an answer it does not have: before every cache has listed, `/explain`
//! answers 503 and the page says what is missing and why; a filter naming what is not
//! there is a 404.

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::clock::unix_now;
use crate::http::state::AppState;
use crate::report::explain::{self, Explanation, Selection};
use crate::report::page::{PageStatus, render_page};
use crate::report::scope::ScopeError;

/// What the exporter can say for a query.
enum Answer {
    Explained(Explanation),
    /// The caches have not listed yet: each resource missing, and why.
    NotSynced(Vec<String>),
    NotFound(ScopeError),
}

pub(crate) async fn explain_json(State(app): State<AppState>, Query(selection): Query<Selection>) -> Response {
    let built = build(app, selection, |answer, _| match answer {
        Answer::Explained(explanation) => match serde_json::to_vec(&explanation) {
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to encode the explanation\n").into_response(),
        },
        Answer::NotSynced(problems) => status(
            StatusCode::SERVICE_UNAVAILABLE,
            "NotReady",
            format!("no answer yet, the caches have not synced: {}", problems.join("; ")),
        ),
        Answer::NotFound(error) => status(StatusCode::NOT_FOUND, "NotFound", error.to_string()),
    })
    .await;
    built.unwrap_or_else(|()| (StatusCode::INTERNAL_SERVER_ERROR, "failed to build the explanation\n").into_response())
}

/// A refusal as the API server writes one (a `Status`), so that a client reading through
/// the API server's service proxy, as `--from-exporter` does, reads its message.
fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code.as_u16(), "reason": reason, "message": message,
    });
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

pub(crate) async fn landing_page(State(app): State<AppState>, Query(selection): Query<Selection>) -> Response {
    let built = build(app, selection, move |answer, selection| {
        let query = selection.to_query();
        let (explanation, code, problems, error) = match answer {
            Answer::Explained(explanation) => (explanation, StatusCode::OK, Vec::new(), None),
            Answer::NotSynced(problems) => (Explanation::default(), StatusCode::SERVICE_UNAVAILABLE, problems, None),
            Answer::NotFound(error) => {
                (Explanation::default(), StatusCode::NOT_FOUND, Vec::new(), Some(error.to_string()))
            }
        };
        let warnings = explanation.looked_at.as_ref().map(|l| l.warnings.clone()).unwrap_or_default();
        let problems = if problems.is_empty() { warnings } else { problems };
        let status = PageStatus {
            problems: &problems,
            synced: code != StatusCode::SERVICE_UNAVAILABLE,
            error: error.as_deref(),
            query: &query,
        };
        (code, render_page(&explanation, &status))
    })
    .await;
    match built {
        Ok((code, page)) => (code, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        Err(()) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to build the page\n").into_response(),
    }
}

/// Classify under the index's read lock on a blocking thread, as `/metrics` renders:
/// at scale it takes milliseconds, and it shares the renderers' limit.
async fn build<T: Send + 'static>(
    app: AppState,
    selection: Selection,
    finish: impl FnOnce(Answer, &Selection) -> T + Send + 'static,
) -> Result<T, ()> {
    let Ok(_permit) = app.renderers.clone().acquire_owned().await else { return Err(()) };
    tokio::task::spawn_blocking(move || {
        let answer = answer(&app, &selection);
        finish(answer, &selection)
    })
    .await
    .map_err(|_| ())
}

fn answer(app: &AppState, selection: &Selection) -> Answer {
    if let Err(error) = app.origin.check(selection) {
        return Answer::NotFound(error);
    }
    let problems = app.shared.problems();
    let mut explanation = {
        let index = app.shared.read();
        if !index.synced() {
            return Answer::NotSynced(problems);
        }
        explain::explain(&index, selection, &app.origin, unix_now())
    };
    if let Some(looked_at) = &mut explanation.looked_at {
        if let Err(error) = looked_at.check() {
            return Answer::NotFound(error);
        }
        looked_at.warnings = problems;
    }
    Answer::Explained(explanation)
}
