//! A minimal HTTP/1.0 client for talking to local test servers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// (status, body), or `None` if nothing answered.
pub fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    exchange(port, method, path, body).map(|(status, _head, body)| (status, body))
}

/// (status, headers, body) of a GET.
pub fn get_with_headers(port: u16, path: &str) -> Option<(u16, String, String)> {
    exchange(port, "GET", path, None)
}

fn exchange(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((status, head.to_ascii_lowercase(), body.to_owned()))
}

pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    request(port, "GET", path, None)
}

/// Wait until `path` answers 200, or panic after `timeout`.
pub fn wait_ok(port: u16, path: &str, timeout: Duration) {
    let started = std::time::Instant::now();
    while get(port, path).map(|(s, _)| s) != Some(200) {
        assert!(started.elapsed() < timeout, "127.0.0.1:{port}{path} never answered 200");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
