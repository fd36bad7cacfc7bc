//! `--from-exporter`: a running exporter's `/explain`, read through the API server's
//! service proxy. One request, no retries: a Service without ready endpoints, a wrong
//! port or an exporter still starting is one line, in seconds.

use std::time::Duration;

use anyhow::anyhow;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Service;
use kube::core::Status;
use misschedule_exporter::cli::{self, Exit};
use misschedule_exporter::report::explain::{Explanation, Selection};
use misschedule_exporter::source::{advice, list};

use crate::Failure;

/// How long the exporter may take to answer through the proxy.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// A running exporter's Service, reached through the API server's service proxy
/// (`get` on `services/proxy` in its namespace is all the caller needs).
pub struct ExporterService {
    namespace: String,
    /// `NAME` or `NAME:PORT`, as the proxy path takes it.
    service: String,
}

/// The label the chart puts on the exporter's Service (unless `nameOverride` changes it).
const CHART_SELECTOR: &str = "app.kubernetes.io/name=misschedule-exporter";

/// A running exporter's Service, `NAMESPACE/NAME`, if the caller may list Services and the
/// chart's label finds one: what an unknown manager's note can point to. Never an error.
pub async fn discover(client: &kube::Client) -> Option<String> {
    let services: kube::Api<Service> = kube::Api::all(client.clone());
    let params = kube::api::ListParams::default().labels(CHART_SELECTOR).limit(1);
    let found = tokio::time::timeout(Duration::from_secs(3), services.list(&params)).await.ok()?.ok()?;
    let service = found.items.into_iter().next()?;
    Some(format!("{}/{}", service.metadata.namespace?, service.metadata.name?))
}

impl ExporterService {
    pub fn parse(target: &str) -> anyhow::Result<Self> {
        let expected = || anyhow!("--from-exporter {target:?}: expected NAMESPACE/SERVICE[:PORT]");
        let (namespace, service) = target.split_once('/').ok_or_else(expected)?;
        if namespace.is_empty() || service.is_empty() || service.contains('/') {
            return Err(expected());
        }
        Ok(Self { namespace: namespace.to_owned(), service: service.to_owned() })
    }

    fn name(&self) -> String {
        format!("{}/{}", self.namespace, self.service)
    }

    /// `NAME:PORT`: the proxy matches endpoints by port name, so a named port (the chart's
    /// `http-metrics`) must be given; without one, the Service's first port.
    async fn with_port(&self, client: &kube::Client) -> Result<String, Failure> {
        if self.service.contains(':') {
            return Ok(self.service.clone());
        }
        let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), &self.namespace);
        let service = match services.get_opt(&self.service).await {
            Ok(Some(service)) => service,
            Ok(None) => {
                return Err((
                    Exit::Config,
                    anyhow!("services {:?} not found in namespace {}", self.service, self.namespace),
                ));
            }
            Err(error) => {
                let line = advice::kube_error_line(&error);
                return Err((Exit::Unreachable, anyhow!("cannot read service {}: {line}", self.name())));
            }
        };
        let port = service.spec.and_then(|s| s.ports).and_then(|p| p.into_iter().next());
        let Some(port) = port else { return Err((Exit::Config, anyhow!("service {} has no port", self.name()))) };
        Ok(format!("{}:{}", self.service, port.name.unwrap_or_else(|| port.port.to_string())))
    }

    /// The exporter's answer for `selection`, naming it as the source.
    pub async fn explain(&self, client: &kube::Client, selection: &Selection) -> Result<Explanation, Failure> {
        // The exporter knows DaemonSets, not namespaces: a typo would read as an empty
        // namespace. The caller's own credentials can tell.
        if let Some(namespace) = selection.namespace() {
            list::check_namespace(client, namespace).await.map_err(cli::list_failure)?;
        }
        let service = self.with_port(client).await?;
        let path =
            format!("/api/v1/namespaces/{}/services/{service}/proxy/explain?{}", self.namespace, selection.to_query());
        let unreachable =
            |why: String| (Exit::Unreachable, anyhow!("cannot read /explain from service {}: {why}", self.name()));
        let request = axum::http::Request::get(&path)
            .body(kube::client::Body::empty())
            .map_err(|e| unreachable(e.to_string()))?;
        let exchange = async {
            let response = client.send(request).await.map_err(|e| advice::kube_error_line(&e))?;
            let code = response.status().as_u16();
            let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok::<_, String>((code, body))
        };
        let (code, body) = match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => return Err(unreachable(why)),
            Err(_) => return Err(unreachable(format!("no answer within {}s", ANSWER_TIMEOUT.as_secs()))),
        };
        if code != 200 {
            return Err(self.refusal(code, &body));
        }
        let mut explanation: Explanation = serde_json::from_slice(&body).map_err(|_| {
            let text = String::from_utf8_lossy(&body);
            unreachable(format!("the answer is not an explanation: {}", text.lines().next().unwrap_or_default()))
        })?;
        if let Some(looked_at) = &mut explanation.looked_at {
            // An exporter serving a snapshot has read it once, as the plugin would.
            looked_at.read_once = looked_at.source.starts_with("snapshot");
            looked_at.source = format!("exporter {}, watching {}", self.name(), looked_at.source);
        }
        Ok(explanation)
    }

    /// A refusal, from the API server's proxy or the exporter, as one line that says what
    /// to do.
    fn refusal(&self, code: u16, body: &[u8]) -> Failure {
        let message = serde_json::from_slice::<Status>(body)
            .map(|s| s.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).lines().next().unwrap_or_default().trim().to_owned());
        let name = self.name();
        let (exit, line) = match code {
            // The exporter's own: a DaemonSet or namespace it does not have.
            404 if message.starts_with("daemonsets.apps") || message.starts_with("namespace") => {
                (Exit::Config, message)
            }
            404 => (Exit::Config, format!("service {name} or its port not found: {message}")),
            503 if message.starts_with("no answer yet") => (Exit::Unreachable, format!("exporter {name}: {message}")),
            503 if message.starts_with("no service port") => (
                Exit::Config,
                format!(
                    "service {name}: {message}; name the Service's port (the chart's is http-metrics) or leave it out"
                ),
            ),
            503 if message.starts_with("no endpoints available") => (
                Exit::Unreachable,
                format!(
                    "service {name} has no ready endpoint ({message}); check `kubectl -n {} get pods,endpoints` and the exporter's /readyz",
                    self.namespace
                ),
            ),
            503 => (
                Exit::Unreachable,
                format!("the API server cannot reach the exporter behind service {name}: {message} (HTTP 503)"),
            ),
            code => (
                Exit::Unreachable,
                format!("cannot read /explain from service {name}: {}", advice::status_line(code, &message)),
            ),
        };
        (exit, anyhow!(line))
    }
}
