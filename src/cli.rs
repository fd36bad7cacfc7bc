//! What both command lines share: the flags that decide classification, the exit codes,
//! and the process around `main` (logging, the async runtime, the one `error:` line).
//! The exporter, its `explain` and `kubectl misschedule` parse these once, the same way, so
//! they can never classify differently.

use std::future::Future;
use std::process::ExitCode;

use crate::index::{self, Index};
use crate::rules::attribution::{DEFAULT_NFD_MANAGERS, NfdManagers};
use crate::rules::reason::{Conventions, DrainTaints};
use crate::source::connect::ConnectError;
use crate::source::list::ListError;
use crate::source::watch::DEFAULT_POD_SELECTOR;

/// The flags that change what a pod's reason is, or which pods are read.
#[derive(Clone, Debug, clap::Args)]
pub struct Classification {
    /// More taint keys that mean "node is being drained" (reason autoscaler_drain),
    /// added to the built-in list. A trailing * matches a prefix.
    #[arg(long, env = "MISSCHEDULE_DRAIN_TAINT_KEYS", value_delimiter = ',', global = true)]
    pub drain_taint_keys: Vec<String>,

    /// Field managers that are node-feature-discovery: a label or taint they own or
    /// removed is reason nfd_change, whatever its name. Replaces the default list.
    #[arg(long, env = "MISSCHEDULE_NFD_MANAGERS", value_delimiter = ',', global = true, default_values_t = DEFAULT_NFD_MANAGERS.map(String::from))]
    pub nfd_managers: Vec<String>,

    /// Server-side label selector for the daemon pods. The DaemonSet controller puts
    /// this label on every pod it creates, so non-daemon pods are never fetched.
    #[arg(long, env = "MISSCHEDULE_POD_SELECTOR", default_value = DEFAULT_POD_SELECTOR, global = true)]
    pub pod_selector: String,

    /// How long a lost node (one whose daemon pod the controller deleted, and which the
    /// DaemonSet has not covered since) stays listed: 24h, 90m, 1h30m, 3600s. Only what
    /// watches remembers losses (the exporter, `kubectl misschedule --watch`); one look
    /// and what-if ignore it.
    #[arg(long, env = "MISSCHEDULE_LOST_NODE_RETENTION", default_value = "24h", value_parser = parse_retention, global = true)]
    pub lost_node_retention: i64,
}

/// A listen address as Prometheus exporters take one: `IP:PORT`, `[IPv6]:PORT`, `:PORT`
/// (every interface) or `HOST:PORT` (`localhost` is the loopback).
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
    let expected = || format!("{text:?}: expected IP:PORT, :PORT or HOST:PORT, such as 0.0.0.0:18493 or :18493");
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(expected)?;
    let port: u16 = port.parse().map_err(|_| expected())?;
    match host {
        "" => Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))),
        "localhost" => Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
        host => (host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| format!("{text:?}: cannot resolve {host:?}")),
    }
}

/// A retention of at least a second, as a duration: `24h`, `90m`, `1h30m`, `3600s`.
fn parse_retention(text: &str) -> Result<i64, String> {
    let duration: jiff::SignedDuration =
        text.trim().parse().map_err(|e| format!("{e}; write a duration such as 24h, 90m or 3600s"))?;
    match duration.as_secs() {
        seconds if seconds >= 1 => Ok(seconds),
        _ => Err("must be at least 1s".to_owned()),
    }
}

impl Classification {
    pub fn conventions(&self) -> Conventions {
        Conventions {
            drain_taints: DrainTaints::with_extra(self.drain_taint_keys.iter().cloned()),
            nfd_managers: NfdManagers::new(self.nfd_managers.iter().cloned()),
        }
    }

    /// An empty index that classifies by these flags, fed by one stream per namespace in
    /// `namespace_scopes` (0: one stream for all).
    pub fn index(&self, namespace_scopes: usize) -> Index {
        Index::new(index::Config {
            conventions: self.conventions(),
            namespace_scopes,
            lost_retention: self.lost_node_retention,
        })
    }
}

/// How a process ends: a contract scripts depend on (docs/operations.md). clap exits with 2
/// on a bad command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done: served until a signal, or answered.
    Success,
    /// `kubectl misschedule --exit-code`: something needs action (a misscheduled pod or a
    /// lost node whose reason is not an expected one).
    NeedsAction,
    /// `kubectl misschedule what-if --exit-code`: some pod would be deleted or misscheduled.
    WouldDisrupt,
    /// An unexpected failure at run time.
    Runtime,
    /// Unusable configuration: kubeconfig, context, credentials files, flag values.
    Config,
    /// The API server, a list, or an exporter could not be read.
    Unreachable,
    /// A snapshot file cannot be read or parsed.
    Snapshot,
    /// The listen address cannot be bound.
    Listen,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::NeedsAction | Exit::WouldDisrupt | Exit::Runtime => 1,
            Exit::Config => 3,
            Exit::Unreachable => 4,
            Exit::Snapshot => 5,
            Exit::Listen => 6,
        }
    }
}

impl From<&ConnectError> for Exit {
    fn from(error: &ConnectError) -> Self {
        match error {
            ConnectError::Unreachable { .. } | ConnectError::Timeout { .. } => Exit::Unreachable,
            ConnectError::Kubeconfig { .. } | ConnectError::Config(_) => Exit::Config,
        }
    }
}

impl From<&ListError> for Exit {
    fn from(error: &ListError) -> Self {
        match error {
            ListError::NoNamespace(_) => Exit::Config,
            _ => Exit::Unreachable,
        }
    }
}

/// A failure to list, with its exit code: a namespace that is not there is bad input.
pub fn list_failure<E: From<ListError>>(error: ListError) -> (Exit, E) {
    (Exit::from(&error), E::from(error))
}

/// A failure to connect, with its exit code: `Unreachable` or `Config`.
pub fn connect_failure<E: From<ConnectError>>(error: ConnectError) -> (Exit, E) {
    (Exit::from(&error), E::from(error))
}

/// How log lines are written on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs on stderr at `default_level` unless `RUST_LOG` says otherwise, in colour only on a
/// terminal (`kubectl logs` and log shippers would show the escape codes).
///
/// kube's client logs every failed request at error level; the callers say what failed and
/// what happens next (a watch once per burst of failures), so that line is left to `RUST_LOG`.
pub fn init_tracing(format: LogFormat, default_level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default_level},kube_client::client::builder=off"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs `main` on a multi-threaded runtime. A failure is printed as one line on stderr,
/// `error: …` with each of its causes once, and exits with its code.
pub fn run<E>(main: impl Future<Output = Result<Exit, (Exit, E)>>) -> ExitCode
where
    E: AsRef<dyn std::error::Error + Send + Sync + 'static>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Exit::Runtime.code());
        }
    };
    let exit = match runtime.block_on(main) {
        Ok(exit) => exit,
        Err((exit, error)) => {
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            eprintln!("error: {}", crate::source::advice::chain_line(error).replace('\n', " "));
            exit
        }
    };
    ExitCode::from(exit.code())
}

/// Resolves once SIGINT or SIGTERM arrives, for every server that awaits one: the
/// exporter's and the admission guard's listeners stop together. Call from the runtime.
pub fn shutdown_signal() -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    let (signal, received) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signalled().await;
        let _ = signal.send(true);
    });
    move || {
        let mut received = received.clone();
        Box::pin(async move {
            let _ = received.wait_for(|&stop| stop).await;
        })
    }
}

async fn signalled() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        classification: Classification,
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let flags = Flags::try_parse_from(["x"]).unwrap().classification;
        assert_eq!(flags.pod_selector, "pod-template-generation");
        assert_eq!(flags.nfd_managers, DEFAULT_NFD_MANAGERS.map(String::from));
        let conventions = flags.conventions();
        assert!(conventions.drain_taints.matches("ToBeDeletedByClusterAutoscaler"));
        assert!(!conventions.drain_taints.matches("dedicated"));
        assert_eq!(flags.lost_node_retention, 24 * 3600);
    }

    #[test]
    fn the_lost_node_retention_is_a_duration() {
        let retention = |text: &str| Flags::try_parse_from(["x", "--lost-node-retention", text]);
        assert_eq!(retention("90m").unwrap().classification.lost_node_retention, 5400);
        assert_eq!(retention("1h30m").unwrap().classification.lost_node_retention, 5400);
        assert_eq!(retention("3600s").unwrap().classification.lost_node_retention, 3600);
        let error = retention("0s").unwrap_err().to_string();
        assert!(error.contains("must be at least 1s"), "{error}");
        let error = retention("a day").unwrap_err().to_string();
        assert!(error.contains("write a duration such as 24h, 90m or 3600s"), "{error}");
    }

    #[test]
    fn drain_keys_and_nfd_managers_reach_the_conventions() {
        let flags = Flags::try_parse_from(["x", "--drain-taint-keys", "dedicated,spot/*", "--nfd-managers", "my-nfd"])
            .unwrap()
            .classification;
        let conventions = flags.conventions();
        assert!(conventions.drain_taints.matches("dedicated"));
        assert!(conventions.drain_taints.matches("spot/reclaim"));
        assert!(conventions.nfd_managers.contains("my-nfd"));
        assert!(!conventions.nfd_managers.contains(DEFAULT_NFD_MANAGERS[0]), "the list replaces the defaults");
    }

    #[test]
    fn exit_codes_are_the_documented_ones() {
        let codes = [
            Exit::Success,
            Exit::NeedsAction,
            Exit::Runtime,
            Exit::Config,
            Exit::Unreachable,
            Exit::Snapshot,
            Exit::Listen,
        ]
        .map(Exit::code);
        assert_eq!(codes, [0, 1, 1, 3, 4, 5, 6]);
    }

    #[test]
    fn listen_addresses_as_prometheus_exporters_take_them() {
        let parsed = |text: &str| parse_listen(text).map(|a| a.to_string());
        assert_eq!(parsed("0.0.0.0:18493").unwrap(), "0.0.0.0:18493");
        assert_eq!(parsed(":18493").unwrap(), "0.0.0.0:18493");
        assert_eq!(parsed("localhost:18493").unwrap(), "127.0.0.1:18493");
        assert_eq!(parsed("[::1]:18493").unwrap(), "[::1]:18493");
        for bad in ["18493", ":", ":port", "localhost:99999", "no-such-host.invalid:18493"] {
            let error = parse_listen(bad).unwrap_err();
            assert!(error.starts_with(&format!("{bad:?}: ")), "{error}");
        }
    }
}
