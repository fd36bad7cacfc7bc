//! `GET /explain` (the explanation as JSON, the object `explain -o json` prints) and
//! `GET /` (the same as a page). Both take the `namespace` and `daemonset` query
//! parameters of [`Selection`].

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::clock::unix_now;
use crate::http::state::AppState;
use crate::report::explain::{self, Explanation, Selection};
use crate::report::page::{PageStatus, render_page};

pub(crate) async fn explain_json(State(app): State<AppState>, Query(selection): Query<Selection>) -> Response {
    let built = build(app, selection, |explanation, _| serde_json::to_vec(&explanation)).await;
    match built {
        Ok(Ok(body)) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Ok(Err(_)) | Err(()) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "failed to build the explanation\n").into_response()
        }
    }
}

pub(crate) async fn landing_page(State(app): State<AppState>, Query(selection): Query<Selection>) -> Response {
    let shared = app.shared.clone();
    let built = build(app, selection, move |explanation, selection| {
        let waiting: Vec<&str> = shared.not_ready().iter().map(|r| r.as_str()).collect();
        let status =
            PageStatus { waiting: &waiting, namespace: selection.namespace(), daemonset: selection.daemonset() };
        render_page(&explanation, &status)
    })
    .await;
    match built {
        Ok(page) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        Err(()) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to build the page\n").into_response(),
    }
}

/// Classify under the index's read lock on a blocking thread, as `/metrics` renders:
/// at scale it takes milliseconds, and it shares the renderers' limit.
async fn build<T: Send + 'static>(
    app: AppState,
    selection: Selection,
    finish: impl FnOnce(Explanation, &Selection) -> T + Send + 'static,
) -> Result<T, ()> {
    let Ok(_permit) = app.renderers.clone().acquire_owned().await else { return Err(()) };
    tokio::task::spawn_blocking(move || {
        let explanation = explain::explain(&app.shared.read(), &selection, unix_now());
        finish(explanation, &selection)
    })
    .await
    .map_err(|_| ())
}
