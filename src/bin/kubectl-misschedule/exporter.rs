//! `--from-exporter`: a running exporter's `/explain`, read through the API server's
//! service proxy.

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::Service;
use misschedule_exporter::report::explain::{Explanation, Selection};

/// A running exporter's Service, reached through the API server's service proxy
/// (`get` on `services/proxy` in its namespace is all the caller needs).
pub struct ExporterService {
    namespace: String,
    /// `NAME` or `NAME:PORT`, as the proxy path takes it.
    service: String,
}

impl ExporterService {
    pub fn parse(target: &str) -> anyhow::Result<Self> {
        let Some((namespace, service)) = target.split_once('/') else {
            bail!("--from-exporter {target:?}: expected NAMESPACE/SERVICE[:PORT]");
        };
        if namespace.is_empty() || service.is_empty() || service.contains('/') {
            bail!("--from-exporter {target:?}: expected NAMESPACE/SERVICE[:PORT]");
        }
        Ok(Self { namespace: namespace.to_owned(), service: service.to_owned() })
    }

    /// `NAME:PORT`: the proxy matches endpoints by port name, so a named port (the chart's
    /// `http-metrics`) must be given; without one, the Service's first port.
    async fn with_port(&self, client: &kube::Client) -> anyhow::Result<String> {
        if self.service.contains(':') {
            return Ok(self.service.clone());
        }
        let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), &self.namespace);
        let service = services
            .get(&self.service)
            .await
            .with_context(|| format!("cannot read service {}/{}", self.namespace, self.service))?;
        let port = service.spec.and_then(|s| s.ports).and_then(|p| p.into_iter().next());
        let Some(port) = port else { bail!("service {}/{} has no port", self.namespace, self.service) };
        Ok(format!("{}:{}", self.service, port.name.unwrap_or_else(|| port.port.to_string())))
    }

    pub async fn explain(&self, client: &kube::Client, selection: &Selection) -> anyhow::Result<Explanation> {
        let service = self.with_port(client).await?;
        let path =
            format!("/api/v1/namespaces/{}/services/{service}/proxy/explain?{}", self.namespace, selection.to_query());
        let request = axum::http::Request::get(&path).body(Vec::new()).map_err(|e| anyhow!(e))?;
        let body = client
            .request_text(request)
            .await
            .with_context(|| format!("cannot read /explain from service {}/{}", self.namespace, self.service))?;
        serde_json::from_str(&body).with_context(|| {
            format!(
                "service {}/{} did not answer with an explanation: {}",
                self.namespace,
                self.service,
                first_line(&body)
            )
        })
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
