//! The HTTP edge: `/metrics`, `/healthz`, `/readyz`, optionally behind TLS and
//! authentication.
//!
//! hyper is driven directly rather than through `axum::serve` so that every resource a
//! client can hold is bounded: connections, time to send the headers, header size,
//! request body size, handler time, TLS handshake time, how long a response may wait
//! on a client that stopped reading, and the shutdown grace period.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::http::auth::{self, ScrapeAuth};
use crate::http::state::AppState;
use crate::http::{explain, negotiate};
use crate::report::metrics::Exposition;
use crate::report::scope::Origin;
use crate::shared::Shared;

/// Connections served at once; further clients wait in the listen backlog. Each holds
/// at most a header buffer and a reference to the shared response text.
pub const MAX_CONNECTIONS: usize = 256;
/// From connection (or from the end of the last response) to a complete request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Request line plus headers; hyper's smallest allowed buffer is 8 KiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// No endpoint takes a body.
pub const MAX_BODY_BYTES: usize = 4 * 1024;
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a response may make no progress because the client stopped reading.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Prometheus' default scrape timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests may take to finish after a shutdown signal; under the
/// 5 s the chart's terminationGracePeriod and most supervisors allow before SIGKILL.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(4);

/// A connection whose writes may not stall for longer than `WRITE_STALL_TIMEOUT`.
/// hyper bounds reading a request, not writing a response: without this, a client
/// that stops reading holds its connection slot (and the response text) for ever.
struct StallGuard<S> {
    inner: S,
    /// Armed when a write finds the socket full; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> StallGuard<S> {
    fn new(inner: S) -> Self {
        Self { inner, stalled: None }
    }

    /// After a write made no progress: wait for the socket, but not past the deadline.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let deadline = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL_TIMEOUT)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read nothing of the response for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, result: Poll<std::io::Result<T>>, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match result {
            Poll::Pending => self.stall(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progressed(result, cx)
    }
}

/// The routes. `auth` guards what reveals the cluster (`/metrics`, `/explain`, `/`), not
/// the probes: they reveal nothing, and kubelet probes cannot present credentials.
pub fn router(shared: Arc<Shared>, exposition: Arc<Exposition>, auth: ScrapeAuth, origin: Origin) -> Router {
    let mut guarded = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/explain", get(explain::explain_json))
        .route("/", get(explain::landing_page));
    if auth.is_required() {
        guarded = guarded.route_layer(middleware::from_fn_with_state(auth, auth::require_auth));
    }
    guarded
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready_handler))
        .with_state(AppState::new(shared, exposition, origin))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, REQUEST_TIMEOUT))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
}

/// Serve `router` until `shutdown` resolves, then let in-flight requests finish for up
/// to `SHUTDOWN_GRACE`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, usually: pause rather than spin.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(MAX_HEADER_BYTES);
            let served = match tls {
                None => watcher.watch(http.serve_connection(TokioIo::new(StallGuard::new(stream)), service)).await,
                Some(acceptor) => match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        watcher.watch(http.serve_connection(TokioIo::new(StallGuard::new(stream)), service)).await
                    }
                    Ok(Err(error)) => return tracing::debug!(%peer, %error, "TLS handshake failed"),
                    Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                },
            };
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "connection closed with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!(grace = ?SHUTDOWN_GRACE, "requests still in flight after the grace period; closing them");
    }
    Ok(())
}

async fn metrics_handler(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let Ok(_permit) = app.renderers.clone().acquire_owned().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let format = negotiate::format(header(header::ACCEPT));
    let gzip = negotiate::gzip(header(header::ACCEPT_ENCODING));
    // Rendering takes locks and can take milliseconds at scale: keep it off the async workers.
    let rendered = tokio::task::spawn_blocking(move || app.exposition.body(format, gzip)).await;
    match rendered {
        Ok(Ok(chunks)) => {
            let mut response = Body::new(Chunks::from(chunks)).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
            headers.insert(header::VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
            if gzip {
                headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            response
        }
        Ok(Err(error)) => {
            tracing::error!(%error, "cannot render /metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "failed to encode metrics\n").into_response()
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to encode metrics\n").into_response(),
    }
}

async fn ready_handler(State(app): State<AppState>) -> Response {
    let problems = app.shared.problems();
    if problems.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready:\n{}\n", problems.join("\n"))).into_response()
    }
}

/// A body of shared byte chunks with an exact length, so the response carries a
/// Content-Length and the cached text is never copied.
struct Chunks(VecDeque<Bytes>);

impl From<Vec<Bytes>> for Chunks {
    fn from(parts: Vec<Bytes>) -> Self {
        Self(parts.into_iter().filter(|b| !b.is_empty()).collect())
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|chunk| Ok(http_body::Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}
