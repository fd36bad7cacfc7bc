//! A Kubernetes client from a kubeconfig (or in-cluster), checked by asking the API server
//! its version: a wrong address fails here, clearly, not in the first watch.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// How long the API server may take to answer the first request.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("cannot load a Kubernetes client configuration: {0}")]
    Config(String),
    #[error("cannot reach the API server at {server}: {source}")]
    Unreachable { server: String, source: kube::Error },
    #[error("the API server at {server} did not answer within {timeout:?}")]
    Timeout { server: String, timeout: Duration },
}

/// The client configuration: `kubeconfig` and `context` if given, else `$KUBECONFIG`,
/// `~/.kube/config`, then in-cluster.
pub async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Config, ConnectError> {
    let options = KubeConfigOptions { context: context.map(str::to_owned), ..Default::default() };
    let loaded = match (kubeconfig, context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|source| ConnectError::Kubeconfig { path: path.display().to_string(), source })?;
            kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| e.to_string())
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await.map_err(|e| e.to_string()),
        (None, None) => kube::Config::infer().await.map_err(|e| e.to_string()),
    };
    loaded.map_err(ConnectError::Config)
}

/// A client for `config` that has answered the API server's version.
pub async fn client(config: kube::Config) -> Result<Client, ConnectError> {
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| ConnectError::Config(e.to_string()))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            tracing::info!(%server, version = %version.git_version, "connected to the API server");
            Ok(client)
        }
        Ok(Err(source)) => Err(ConnectError::Unreachable { server, source }),
        Err(_) => Err(ConnectError::Timeout { server, timeout: CONNECT_TIMEOUT }),
    }
}
