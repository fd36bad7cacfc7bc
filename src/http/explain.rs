//! `GET /explain` (the explanation as JSON, the object `explain -o json` prints) and
//! `GET /` (the same as a page). Both take `namespace` and `daemonset` query parameters.

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::http::server::AppState;
use crate::report::explain::{self, Explanation};
use crate::report::page::{PageStatus, render_page};
use crate::telemetry::unix_now;

/// The query parameters. Unknown ones are refused, so a typo is not read as "all".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    namespace: Option<String>,
    daemonset: Option<String>,
}

impl Filter {
    /// An empty value (as an HTML form sends) means no filter.
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|s| !s.is_empty())
    }

    fn daemonset(&self) -> Option<&str> {
        self.daemonset.as_deref().filter(|s| !s.is_empty())
    }
}

pub(crate) async fn explain_json(State(app): State<AppState>, Query(filter): Query<Filter>) -> Response {
    let built = build(app, filter, |explanation, _| serde_json::to_vec(&explanation)).await;
    match built {
        Ok(Ok(body)) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Ok(Err(_)) | Err(()) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "failed to build the explanation\n").into_response()
        }
    }
}

pub(crate) async fn landing_page(State(app): State<AppState>, Query(filter): Query<Filter>) -> Response {
    let shared = app.shared.clone();
    let built = build(app, filter, move |explanation, filter| {
        let waiting: Vec<&str> = shared.not_ready().iter().map(|r| r.as_str()).collect();
        let status = PageStatus { waiting: &waiting, namespace: filter.namespace(), daemonset: filter.daemonset() };
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
    filter: Filter,
    finish: impl FnOnce(Explanation, &Filter) -> T + Send + 'static,
) -> Result<T, ()> {
    let Ok(_permit) = app.renderers.clone().acquire_owned().await else { return Err(()) };
    tokio::task::spawn_blocking(move || {
        let namespaces: Vec<String> = filter.namespace().map(str::to_owned).into_iter().collect();
        let explanation = explain::explain(&app.shared.read(), &namespaces, filter.daemonset(), unix_now());
        finish(explanation, &filter)
    })
    .await
    .map_err(|_| ())
}
