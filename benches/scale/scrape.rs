//! Scrapers of `/metrics`, a bare server to measure the floor under them, and load from
//! several at once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A plain scraper: a new connection per request, uncompressed, read into a buffer it keeps.
/// Prometheus does keep one (its scrape pool sizes the next buffer from the last scrape);
/// a fresh buffer per scrape made this client's own reallocations and page faults most of
/// the phase's CPU at 2,600,000 pods (perf), on the cores the server needs.
pub(crate) struct PlainScraper {
    port: u16,
    response: Vec<u8>,
}

impl PlainScraper {
    pub(crate) fn new(port: u16) -> Self {
        Self { port, response: Vec::new() }
    }

    /// One scrape: its latency and the response's length.
    pub(crate) fn scrape(&mut self) -> (Duration, usize) {
        let started = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n").unwrap();
        self.response.clear();
        stream.read_to_end(&mut self.response).unwrap();
        assert!(self.response.starts_with(b"HTTP/1.0 200"), "scrape failed");
        (started.elapsed(), self.response.len())
    }
}

/// A Prometheus-like scraper on one keep-alive connection: OpenMetrics, gzip.
pub(crate) struct KeepAliveScraper {
    stream: std::io::BufReader<TcpStream>,
}

impl KeepAliveScraper {
    const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\nAccept-Encoding: gzip\r\n\r\n";

    pub(crate) fn connect(port: u16) -> Self {
        Self { stream: std::io::BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap()) }
    }

    /// One scrape: its latency and the body's length on the wire.
    pub(crate) fn scrape(&mut self) -> (Duration, usize) {
        use std::io::BufRead;
        let started = Instant::now();
        self.stream.get_mut().write_all(Self::REQUEST).unwrap();
        let (mut length, mut gzip, mut line) = (0usize, false, String::new());
        loop {
            line.clear();
            self.stream.read_line(&mut line).unwrap();
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            gzip |= lower.starts_with("content-encoding: gzip");
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        assert!(gzip, "the scrape was not compressed");
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).unwrap();
        (started.elapsed(), length)
    }
}

/// A server that answers every request with `body` and does nothing else: hyper's HTTP/1
/// connection and a body held in memory, as the exporter's, without its routes, limits or
/// rendering. Abort the task to stop it.
pub(crate) fn bare_server(runtime: &tokio::runtime::Runtime, body: bytes::Bytes) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            let answer = hyper::service::service_fn(move |_| {
                let response = hyper::Response::new(axum::body::Body::from(body.clone()));
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), answer));
        }
    });
    (port, accept)
}

/// 8 (or `scrapers`) clients scraping for `duration`: sorted latencies and one body's size.
pub(crate) fn under_load<S>(
    scrapers: usize,
    duration: Duration,
    connect: impl Fn() -> S + Sync,
    scrape: fn(&mut S) -> (Duration, usize),
) -> (Vec<Duration>, usize) {
    let stop = AtomicBool::new(false);
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..scrapers)
            .map(|_| {
                scope.spawn(|| {
                    let mut client = connect();
                    let (mut latencies, mut size) = (Vec::new(), 0);
                    while !stop.load(Ordering::Relaxed) {
                        let (latency, bytes) = scrape(&mut client);
                        latencies.push(latency);
                        size = bytes;
                    }
                    (latencies, size)
                })
            })
            .collect();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let size = results.iter().map(|r| r.1).max().unwrap_or(0);
    let mut latencies: Vec<Duration> = results.into_iter().flat_map(|r| r.0).collect();
    latencies.sort();
    (latencies, size)
}
