//! The HTTP edge: `/metrics`, `/healthz`, `/readyz`.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::{self, Exposition, Shared};

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    exposition: Arc<Exposition>,
}

pub fn router(shared: Arc<Shared>, exposition: Arc<Exposition>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { shared, exposition })
}

/// Serve until `shutdown` resolves; in-flight requests are allowed to finish.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    exposition: Arc<Exposition>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(shared, exposition)).with_graceful_shutdown(shutdown).await
}

async fn metrics_handler(State(app): State<AppState>) -> Response {
    // Rendering takes locks and can take milliseconds at scale: keep it off the async workers.
    let rendered = tokio::task::spawn_blocking(move || app.exposition.render()).await;
    match rendered.map_err(|_| std::fmt::Error).and_then(|r| r) {
        Ok(body) => ([(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to encode metrics\n").into_response(),
    }
}

async fn ready_handler(State(app): State<AppState>) -> Response {
    let waiting = app.shared.not_ready();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let names: Vec<_> = waiting.iter().map(|r| r.as_str()).collect();
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {} not synced or failing\n", names.join(", ")))
            .into_response()
    }
}
