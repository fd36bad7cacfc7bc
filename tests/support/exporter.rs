//! The exporter binary as the tests run it: from the repository root, on a free loopback
//! port, killed when the test lets go of it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::http;

pub struct Exporter {
    pub child: Child,
    pub port: u16,
}

impl Exporter {
    /// `args` plus `--listen` on a free loopback port; stdout discarded, stderr to `stderr`.
    pub fn spawn(args: &[&str], stderr: Stdio) -> Self {
        Self::spawn_on("127.0.0.1", args, stderr)
    }

    /// Like `spawn`, listening on `host` (`0.0.0.0`: reachable from outside loopback too).
    pub fn spawn_on(host: &str, args: &[&str], stderr: Stdio) -> Self {
        let level = std::env::var("EXPORTER_RUST_LOG").unwrap_or_else(|_| "warn".into());
        Self::spawn_logging(host, args, stderr, Some(&level))
    }

    /// Like `spawn_on`, with `RUST_LOG` set to `level`, or unset: the exporter's own default.
    pub fn spawn_logging(host: &str, args: &[&str], stderr: Stdio, level: Option<&str>) -> Self {
        let port = http::free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"));
        match level {
            Some(level) => command.env("RUST_LOG", level),
            None => command.env_remove("RUST_LOG"),
        };
        let child = command
            .args(args)
            .args(["--listen", &format!("{host}:{port}")])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the exporter");
        Self { child, port }
    }

    /// Serving these snapshot files (paths from the repository root), once ready.
    pub fn snapshot(files: &[&str]) -> Self {
        let args: Vec<&str> = files.iter().flat_map(|f| ["--snapshot", f]).collect();
        let exporter = Self::spawn(&args, Stdio::null());
        http::wait_ok(exporter.port, "/readyz", Duration::from_secs(10));
        exporter
    }

    /// Watching the cluster of `kubeconfig`, logging to the test's stderr.
    pub fn start(kubeconfig: &str) -> Self {
        Self::spawn(&["--kubeconfig", kubeconfig], Stdio::inherit())
    }

    /// Like `start`, with the exporter's log in `log`.
    pub fn start_logging(kubeconfig: &str, log: &Path) -> Self {
        Self::start_with(kubeconfig, &[], log)
    }

    /// Like `start_logging`, with extra command-line flags.
    pub fn start_with(kubeconfig: &str, args: &[&str], log: &Path) -> Self {
        let log = std::fs::File::create(log).expect("exporter log file");
        let args: Vec<&str> = ["--kubeconfig", kubeconfig].into_iter().chain(args.iter().copied()).collect();
        Self::spawn(&args, log.into())
    }

    pub fn ready(&self) -> bool {
        self.get("/readyz").map(|(status, _)| status) == Some(200)
    }

    /// The value of one sample, e.g. `misschedule_exporter_watch_errors_total{resource="pods"}`.
    pub fn sample(&self, series: &str) -> Option<f64> {
        let prefix = format!("{series} ");
        self.metrics().lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
    }

    /// Every resource's value of a per-resource self-metric (NaN where it is missing);
    /// `more_labels` follows the `resource` label, e.g. `,type="init"`.
    pub fn per_resource(&self, metric: &str, more_labels: &str) -> std::collections::BTreeMap<String, f64> {
        let metrics = self.metrics();
        misschedule_exporter::index::Resource::ALL
            .into_iter()
            .map(|r| {
                let series = format!("{metric}{{resource=\"{}\"{more_labels}}} ", r.as_str());
                let value = metrics.lines().find_map(|l| l.strip_prefix(&series)?.trim().parse().ok());
                (r.as_str().to_owned(), value.unwrap_or(f64::NAN))
            })
            .collect()
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http::get(self.port, path)
    }

    /// `/metrics` in OpenMetrics, as Prometheus gets it.
    pub fn metrics(&self) -> String {
        http::scrape(self.port).map(|(_, body)| body).unwrap_or_default()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
