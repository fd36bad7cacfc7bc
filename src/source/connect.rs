//! A Kubernetes client from a kubeconfig (or in-cluster), checked by asking the API server
//! its version: a wrong address fails here, clearly, not in the first watch.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::source::advice;
use crate::source::request::Compression;

/// How long the API server may take to answer the first request.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Only the root cause: kube's errors repeat the path in each layer.
    #[error("cannot read kubeconfig {path}: {}", advice::root_cause(.error))]
    Kubeconfig { path: String, error: kube::config::KubeconfigError },
    #[error("cannot load a Kubernetes client configuration: {0}")]
    Config(String),
    #[error("cannot reach the API server at {server}: {}", advice::kube_error_line(.error))]
    Unreachable { server: String, error: kube::Error },
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
                .map_err(|error| ConnectError::Kubeconfig { path: path.display().to_string(), error })?;
            kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| e.to_string())
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await.map_err(|e| e.to_string()),
        (None, None) => kube::Config::infer().await.map_err(|e| e.to_string()),
    };
    let mut config = loaded.map_err(ConnectError::Config)?;
    // kube's client would retry 429/503/504 inside each call, up to 15 times and minutes
    // apart, saying nothing: the watches retry themselves, visibly (source::retry, honouring
    // Retry-After), an Event that fails waits for a later round, and a one-shot command
    // fails in seconds with one line.
    config.default_retry = false;
    Ok(config)
}

/// The Kubernetes releases whose DaemonSet controller the rules follow
/// (docs/controller-semantics.md): what users run, upstream's three and the managed
/// services' extended support.
pub const RULES_FOLLOW: (u32, u32) = (33, 37);

/// What to say of an API server of version `major`.`minor` (as `/version` spells them:
/// managed services write `33+`) whose controller the rules do not follow; `None` when they
/// do, or when the version cannot be read.
pub fn version_warning(major: &str, minor: &str) -> Option<String> {
    let number = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
    let (major, minor) = (number(major)?, number(minor)?);
    let (oldest, newest) = RULES_FOLLOW;
    if major != 1 || minor < oldest {
        Some(format!(
            "the API server is Kubernetes {major}.{minor}, older than the 1.{oldest}-1.{newest} whose DaemonSet controller the rules follow: answers may differ from what its controller does (docs/controller-semantics.md)"
        ))
    } else if minor > newest {
        Some(format!(
            "the API server is Kubernetes 1.{minor}, newer than the 1.{oldest}-1.{newest} whose DaemonSet controller the rules follow: check for a newer exporter"
        ))
    } else {
        None
    }
}

/// The API server's address as an answer names it: `https://host:6443`.
/// Whether the watch edge asks for gzip: asked for, and not turned off by the kubeconfig's
/// `disable-compression`. Either way the client is told not to inflate: the watch edge
/// inflates what it asked for itself, since the client's layer reads only the first gzip
/// member of a streamed list. The client's other calls are small.
pub fn watch_compression(config: &mut kube::Config, asked: bool) -> Compression {
    let compression = if asked && !config.disable_compression { Compression::Gzip } else { Compression::Identity };
    config.disable_compression = true;
    compression
}

pub fn server(config: &kube::Config) -> String {
    config.cluster_url.to_string().trim_end_matches('/').to_owned()
}

/// A client for `config` that has answered the API server's version.
pub async fn client(config: kube::Config) -> Result<Client, ConnectError> {
    let server = server(&config);
    let client = Client::try_from(config).map_err(|e| ConnectError::Config(e.to_string()))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            tracing::info!(%server, version = %version.git_version, "connected to the API server");
            if let Some(warning) = version_warning(&version.major, &version.minor) {
                tracing::warn!(%server, version = %version.git_version, "{warning}");
            }
            Ok(client)
        }
        Ok(Err(error)) => Err(ConnectError::Unreachable { server, error }),
        Err(_) => Err(ConnectError::Timeout { server, timeout: CONNECT_TIMEOUT }),
    }
}

#[cfg(test)]
mod tests {
    use super::version_warning;

    #[test]
    fn only_versions_the_rules_do_not_follow_are_warned_of() {
        assert_eq!(version_warning("1", "33"), None);
        assert_eq!(version_warning("1", "37+"), None, "a managed service's spelling");
        assert!(version_warning("1", "20").is_some_and(|w| w.contains("Kubernetes 1.20, older")));
        assert!(version_warning("1", "38").is_some_and(|w| w.contains("newer")));
        assert_eq!(version_warning("", ""), None, "unknown is not guessed at");
    }
}
