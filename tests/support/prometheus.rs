//! A real Prometheus (Debian's) on loopback, its query API, and the scrape configuration
//! prometheus-operator generates from a ServiceMonitor.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http;

pub struct Prometheus {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Prometheus {
    /// A scratch directory for `name`'s configuration and rule files.
    pub fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("misschedule-prom-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Start with `config` (YAML or JSON) written to `dir`/prometheus.yml; returns once ready.
    pub fn start(dir: PathBuf, config: &str) -> Self {
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = http::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-lifecycle")
            // Firing alerts go out again every second: a reload rebuilds the Alertmanager list
            // (a few seconds), and alerts that fire meanwhile would otherwise wait a minute.
            .arg("--rules.alert.resend-delay=1s")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is required (scripts/test.sh installs it)");
        let prometheus = Self { child, port, dir };
        http::wait_ok(port, "/-/ready", Duration::from_secs(30));
        prometheus
    }

    /// Scrape `127.0.0.1:target_port` every second; returns once it has scraped `scrapes` times.
    pub fn scraping(name: &str, target_port: u16, scrapes: u32) -> Self {
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: misschedule-exporter\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        );
        let prometheus = Self::start(Self::dir(name), &config);
        prometheus.wait_for(&format!("count_over_time(up{{job=\"misschedule-exporter\"}}[1m]) >= {scrapes}"));
        prometheus
    }

    /// Wait until `expr` returns something (30 s at most).
    pub fn wait_for(&self, expr: &str) {
        let started = Instant::now();
        while self.query(expr).is_empty() {
            assert!(started.elapsed() < Duration::from_secs(30), "never true: {expr}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// An instant query's result vector.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let (status, body) = http::get(self.port, &format!("/api/v1/query?query={}", urlencode(expr))).unwrap();
        assert_eq!(status, 200, "{expr}: {body}");
        let response: Value = serde_json::from_str(&body).unwrap();
        response["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The alerts Prometheus holds (pending and firing), as `/api/v1/alerts` reports them.
    pub fn alerts(&self) -> Vec<Value> {
        let (_, body) = http::get(self.port, "/api/v1/alerts").unwrap();
        let response: Value = serde_json::from_str(&body).unwrap();
        response["data"]["alerts"].as_array().cloned().unwrap_or_default()
    }

    /// Reload the configuration and rule files from disk.
    pub fn reload(&self) {
        let (status, body) = http::request(self.port, "POST", "/-/reload", None).unwrap();
        assert_eq!(status, 200, "reload: {body}");
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

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One endpoint of a Service as Kubernetes service discovery (role `endpoints`) reports it.
pub struct Endpoint<'a> {
    pub address: String,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub container: &'a str,
    pub port_name: &'a str,
}

/// The scrape config prometheus-operator generates for the first endpoint of `monitor` (a
/// rendered ServiceMonitor) selecting `service` (a rendered Service), with service discovery's
/// `__meta_*` labels given as static labels: the same relabelling, in the same order, as the
/// operator's generateServiceMonitorConfig (endpoints role): keep on the selector and the port,
/// then namespace, service, pod, container, job (the service name, then the jobLabel's value),
/// endpoint, and the ServiceMonitor's own relabelings and metricRelabelings.
pub fn service_monitor_scrape_config(
    monitor: &Value,
    service: &Value,
    endpoints: &[Endpoint],
    interval: &str,
) -> Value {
    let spec = &monitor["spec"];
    let endpoint = &spec["endpoints"][0];
    let sanitize =
        |name: &str| name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    let service_labels = service["metadata"]["labels"].as_object().unwrap();
    let targets: Vec<Value> = endpoints
        .iter()
        .map(|e| {
            let mut labels = serde_json::Map::new();
            for (key, value) in service_labels {
                labels.insert(format!("__meta_kubernetes_service_label_{}", sanitize(key)), value.clone());
                labels.insert(format!("__meta_kubernetes_service_labelpresent_{}", sanitize(key)), json!("true"));
            }
            labels.insert("__meta_kubernetes_namespace".into(), json!(e.namespace));
            labels.insert("__meta_kubernetes_service_name".into(), service["metadata"]["name"].clone());
            labels.insert("__meta_kubernetes_pod_name".into(), json!(e.pod));
            labels.insert("__meta_kubernetes_pod_container_name".into(), json!(e.container));
            labels.insert("__meta_kubernetes_endpoint_port_name".into(), json!(e.port_name));
            labels.insert("__meta_kubernetes_endpoint_address_target_kind".into(), json!("Pod"));
            labels.insert("__meta_kubernetes_endpoint_address_target_name".into(), json!(e.pod));
            json!({"targets": [e.address], "labels": labels})
        })
        .collect();

    let mut relabel = Vec::new();
    for (key, value) in spec["selector"]["matchLabels"].as_object().unwrap() {
        relabel.push(json!({
            "action": "keep",
            "source_labels": [format!("__meta_kubernetes_service_label_{}", sanitize(key)),
                              format!("__meta_kubernetes_service_labelpresent_{}", sanitize(key))],
            "regex": format!("({});true", value.as_str().unwrap()),
        }));
    }
    relabel.push(
        json!({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": endpoint["port"]}),
    );
    for (kind, label) in [("Node", "node"), ("Pod", "pod")] {
        relabel.push(json!({
            "source_labels": ["__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"],
            "separator": ";", "regex": format!("{kind};(.*)"), "replacement": "${1}", "target_label": label,
        }));
    }
    for (meta, label) in [
        ("__meta_kubernetes_namespace", "namespace"),
        ("__meta_kubernetes_service_name", "service"),
        ("__meta_kubernetes_pod_name", "pod"),
        ("__meta_kubernetes_pod_container_name", "container"),
    ] {
        relabel.push(json!({"source_labels": [meta], "target_label": label}));
    }
    relabel.push(
        json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"}),
    );
    if let Some(job_label) = spec["jobLabel"].as_str().filter(|l| !l.is_empty()) {
        relabel.push(json!({
            "source_labels": [format!("__meta_kubernetes_service_label_{}", sanitize(job_label))],
            "target_label": "job", "regex": "(.+)", "replacement": "${1}",
        }));
    }
    relabel.push(json!({"target_label": "endpoint", "replacement": endpoint["port"]}));
    relabel.extend(endpoint["relabelings"].as_array().into_iter().flatten().map(relabel_config));

    json!({
        "job_name": format!("serviceMonitor/{}/{}/0", monitor["metadata"]["namespace"].as_str().unwrap(),
                            monitor["metadata"]["name"].as_str().unwrap()),
        "honor_labels": endpoint["honorLabels"].as_bool().unwrap_or(false),
        "scrape_interval": interval,
        "metrics_path": endpoint["path"].as_str().unwrap_or("/metrics"),
        "scheme": endpoint["scheme"].as_str().unwrap_or("http"),
        "static_configs": targets,
        "relabel_configs": relabel,
        "metric_relabel_configs": endpoint["metricRelabelings"].as_array().into_iter().flatten().map(relabel_config).collect::<Vec<_>>(),
    })
}

/// A prometheus-operator RelabelConfig (camelCase) as Prometheus' relabel_config.
fn relabel_config(config: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (key, value) in config.as_object().unwrap() {
        let key = match key.as_str() {
            "sourceLabels" => "source_labels",
            "targetLabel" => "target_label",
            other => other,
        };
        let value = if key == "action" { json!(value.as_str().unwrap().to_ascii_lowercase()) } else { value.clone() };
        out.insert(key.to_owned(), value);
    }
    Value::Object(out)
}
