//! A real Prometheus (Debian's) scraping one target on loopback, and its query API.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::http;

pub struct Prometheus {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Prometheus {
    /// Scrape `127.0.0.1:target_port` every second; returns once it has scraped `scrapes` times.
    pub fn scraping(name: &str, target_port: u16, scrapes: u32) -> Self {
        let dir = std::env::temp_dir().join(format!("misschedule-prom-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: misschedule-exporter\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = http::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is required (scripts/test.sh installs it)");
        let prometheus = Self { child, port, dir };
        http::wait_ok(port, "/-/ready", Duration::from_secs(30));
        let started = Instant::now();
        let enough = format!("count_over_time(up{{job=\"misschedule-exporter\"}}[1m]) >= {scrapes}");
        while prometheus.query(&enough).is_empty() {
            assert!(started.elapsed() < Duration::from_secs(30), "Prometheus did not scrape the exporter");
            std::thread::sleep(Duration::from_millis(250));
        }
        prometheus
    }

    /// An instant query's result vector.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let (status, body) = http::get(self.port, &format!("/api/v1/query?query={}", urlencode(expr))).unwrap();
        assert_eq!(status, 200, "{expr}: {body}");
        let response: Value = serde_json::from_str(&body).unwrap();
        response["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The target's scrape health as Prometheus reports it: (health, lastError).
    pub fn target_health(&self) -> (String, String) {
        let (_, body) = http::get(self.port, "/api/v1/targets").unwrap();
        let targets: Value = serde_json::from_str(&body).unwrap();
        let target = &targets["data"]["activeTargets"][0];
        (target["health"].as_str().unwrap_or("").to_owned(), target["lastError"].as_str().unwrap_or("").to_owned())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
