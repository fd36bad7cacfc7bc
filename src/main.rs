//! misschedule-exporter: serve, or `explain`, why DaemonSet pods are misscheduled.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::{Parser, Subcommand, ValueEnum};
use misschedule_exporter::http::auth::Authenticator;
use misschedule_exporter::http::server;
use misschedule_exporter::http::tls::ReloadingCert;
use misschedule_exporter::http::token_review::TokenReviewer;
use misschedule_exporter::index::{self, Index};
use misschedule_exporter::publish;
use misschedule_exporter::report::explain::{self, render_table};
use misschedule_exporter::report::metrics;
use misschedule_exporter::rules::attribution::{DEFAULT_NFD_MANAGERS, NfdManagers};
use misschedule_exporter::rules::reason::{Conventions, DrainTaints};
use misschedule_exporter::source::connect::{self, ConnectError};
use misschedule_exporter::source::snapshot::Snapshot;
use misschedule_exporter::source::watch;
use misschedule_exporter::telemetry::{Shared, unix_now};
use tokio::net::TcpListener;

/// Tells Kubernetes operators why DaemonSet pods are misscheduled: each pod that
/// counts toward status.numberMisscheduled, with its node, a reason and the label
/// or taint key behind it, as Prometheus metrics or a table.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Address to serve /metrics, /healthz and /readyz on.
    #[arg(long, env = "MISSCHEDULE_LISTEN", default_value = "0.0.0.0:18493")]
    listen: SocketAddr,

    #[command(flatten)]
    source: Source,

    #[command(flatten)]
    web: Web,

    /// Write a Warning Event (reason Misscheduled) on the DaemonSet when one of its pods
    /// becomes misscheduled or its reason changes, so `kubectl describe daemonset` says
    /// why. Needs create and patch on events.k8s.io events. Live mode only.
    #[arg(long, env = "MISSCHEDULE_EVENTS", conflicts_with = "snapshot")]
    events: bool,

    /// Log format on stderr (the level comes from RUST_LOG, default info).
    #[arg(long, env = "MISSCHEDULE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Where the cluster state comes from: a live cluster, or snapshot files.
#[derive(Debug, clap::Args)]
struct Source {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, env = "MISSCHEDULE_KUBECONFIG", global = true)]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of the current one.
    #[arg(long, env = "MISSCHEDULE_CONTEXT", global = true)]
    context: Option<String>,

    /// Read the cluster from files instead of watching it: the output of
    /// `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json` (or -o yaml).
    /// Repeat, or separate with commas in the env var.
    #[arg(long, env = "MISSCHEDULE_SNAPSHOT", value_delimiter = ',', global = true)]
    snapshot: Vec<PathBuf>,

    /// Only DaemonSets in this namespace (repeatable; default: all). Nodes are always watched.
    #[arg(short = 'n', long, env = "MISSCHEDULE_NAMESPACE", value_delimiter = ',', global = true)]
    namespace: Vec<String>,

    /// More taint keys that mean "node is being drained" (reason autoscaler_drain),
    /// added to the built-in list. A trailing * matches a prefix.
    #[arg(long, env = "MISSCHEDULE_DRAIN_TAINT_KEYS", value_delimiter = ',', global = true)]
    drain_taint_keys: Vec<String>,

    /// Field managers that are node-feature-discovery: a label or taint they own or
    /// removed is reason nfd_change, whatever its name. Replaces the default list.
    #[arg(long, env = "MISSCHEDULE_NFD_MANAGERS", value_delimiter = ',', global = true, default_values_t = DEFAULT_NFD_MANAGERS.map(String::from))]
    nfd_managers: Vec<String>,

    /// Server-side label selector for the pod watch. The DaemonSet controller puts
    /// this label on every pod it creates, so non-daemon pods are never fetched.
    #[arg(long, env = "MISSCHEDULE_POD_SELECTOR", default_value = "pod-template-generation", global = true)]
    pod_selector: String,

    /// Seconds each watch call lasts before it is resumed; lower it below an idle
    /// timeout that a proxy or load balancer in front of the API server enforces.
    #[arg(long, env = "MISSCHEDULE_WATCH_TIMEOUT_SECONDS", default_value_t = 290, value_parser = clap::value_parser!(u32).range(1..=290), global = true)]
    watch_timeout_seconds: u32,

    /// Serve the initial lists and relists from the API server's watch cache
    /// (resourceVersion=0) instead of reading them through to etcd, as kube-state-metrics'
    /// flag of the same name does: far cheaper for the API server and etcd in a large
    /// cluster, but a list may trail etcd by a moment (the watch then catches up). The
    /// cache answers each list in one piece, so --list-page-size does not apply.
    #[arg(long, env = "MISSCHEDULE_USE_APISERVER_CACHE", conflicts_with = "list_page_size")]
    use_apiserver_cache: bool,

    /// Ask the API server to gzip its large responses (lists over 128 KiB), as Kubernetes
    /// clients do unless told not to. Off by default: in a cluster the bytes are cheap and
    /// the compression costs CPU at both ends; at 2,600,000 pods inflating the lists added
    /// about a quarter to this exporter's CPU to ready (docs/benchmarks.md). For a slow or
    /// metered link, turn it on. A kubeconfig's `disable-compression: true` still turns it off.
    #[arg(long, env = "MISSCHEDULE_APISERVER_COMPRESSION", global = true)]
    apiserver_compression: bool,

    /// Objects per page of the initial lists and relists from etcd (limit/continue).
    /// Larger pages mean fewer round trips and more memory held at once.
    #[arg(long, env = "MISSCHEDULE_LIST_PAGE_SIZE", default_value_t = watch::DEFAULT_PAGE_SIZE, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    list_page_size: u32,
}

/// Who may read /metrics, and over what. The probes stay open and plain.
#[derive(Debug, clap::Args)]
struct Web {
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key-file). Re-read when it changes.
    #[arg(long, env = "MISSCHEDULE_TLS_CERT_FILE", requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,

    /// PEM private key for --tls-cert-file. Re-read when it changes.
    #[arg(long, env = "MISSCHEDULE_TLS_KEY_FILE", requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,

    /// Require `Authorization: Bearer <token>` on /metrics, with the token read from this file.
    #[arg(long, env = "MISSCHEDULE_AUTH_BEARER_TOKEN_FILE")]
    auth_bearer_token_file: Option<PathBuf>,

    /// Require basic authentication on /metrics with this user name (needs --auth-basic-password-file).
    #[arg(long, env = "MISSCHEDULE_AUTH_BASIC_USER", requires = "auth_basic_password_file")]
    auth_basic_user: Option<String>,

    /// File holding the basic-auth password.
    #[arg(long, env = "MISSCHEDULE_AUTH_BASIC_PASSWORD_FILE", requires = "auth_basic_user")]
    auth_basic_password_file: Option<PathBuf>,

    /// Accept a bearer token on /metrics if the API server authenticates it (TokenReview) and
    /// lets its user `get` the non-resource URL /metrics (SubjectAccessReview), as
    /// kube-rbac-proxy does: kube-prometheus-stack's Prometheus presents its ServiceAccount
    /// token. Needs `create` on tokenreviews and subjectaccessreviews. Live mode only.
    #[arg(long, env = "MISSCHEDULE_AUTH_KUBERNETES", conflicts_with = "snapshot")]
    auth_kubernetes: bool,

    /// How often the TLS and auth files are checked for changes.
    #[arg(long, env = "MISSCHEDULE_CREDENTIALS_RELOAD_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    credentials_reload_seconds: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List misscheduled pods with node, reason, key, age and a suggested fix,
    /// then the reasons DaemonSets skip nodes. Works live or on --snapshot.
    Explain {
        /// Only this DaemonSet.
        #[arg(long)]
        daemonset: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// Exit codes (docs/operations.md). clap uses 2 for usage errors.
#[derive(Clone, Copy, Debug)]
enum Failure {
    Runtime = 1,
    Config = 3,
    Unreachable = 4,
    Snapshot = 5,
    Listen = 6,
}

type Outcome = Result<(), (Failure, anyhow::Error)>;

trait Classify<T> {
    fn or_exit(self, failure: Failure) -> Result<T, (Failure, anyhow::Error)>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn or_exit(self, failure: Failure) -> Result<T, (Failure, anyhow::Error)> {
        self.map_err(|e| (failure, e.into()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Failure::Runtime as u8);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((failure, error)) => {
            eprintln!("error: {error:#}");
            ExitCode::from(failure as u8)
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(cli: Cli) -> Outcome {
    let source = &cli.source;
    let mut index = Index::new(index::Config {
        conventions: Conventions {
            drain_taints: DrainTaints::with_extra(source.drain_taint_keys.iter().cloned()),
            nfd_managers: NfdManagers::new(source.nfd_managers.iter().cloned()),
        },
        namespace_scopes: source.namespace.len(),
    });
    index.set_now(unix_now());

    let live = source.snapshot.is_empty();
    let mut watches = None;
    let mut token_review = None;
    let mut events_client = None;
    let shared = if live {
        let client = connect(source).await?;
        if cli.events {
            events_client = Some(client.clone());
        }
        if cli.web.auth_kubernetes {
            token_review = Some(Arc::new(TokenReviewer::new(client.clone())));
        }
        let shared = Arc::new(Shared::new(index));
        let config = watch::WatchConfig {
            namespaces: source.namespace.clone(),
            pod_selector: source.pod_selector.clone(),
            timeout_seconds: source.watch_timeout_seconds,
            page_size: source.list_page_size,
            from_apiserver_cache: source.use_apiserver_cache,
        };
        watches = Some(watch::spawn_all(client, &config, shared.clone()));
        shared
    } else {
        Snapshot::read_files(&source.snapshot)
            .and_then(|snapshot| snapshot.load_into(&mut index, &source.namespace))
            .or_exit(Failure::Snapshot)?;
        warn_on_status_disagreement(&index);
        Arc::new(Shared::new(index))
    };

    match cli.command {
        Some(Command::Explain { daemonset, output }) => {
            if live {
                wait_until_synced(&shared).await?;
            }
            let index = shared.read();
            let explanation = explain::explain(&index, &source.namespace, daemonset.as_deref(), unix_now());
            let text = match output {
                Output::Table => render_table(&explanation),
                Output::Json => serde_json::to_string_pretty(&explanation).or_exit(Failure::Runtime)? + "\n",
            };
            print!("{text}");
            Ok(())
        }
        None => {
            let web = &cli.web;
            let tls = match (&web.tls_cert_file, &web.tls_key_file) {
                (Some(cert), Some(key)) => Some(ReloadingCert::load(cert, key).or_exit(Failure::Config)?),
                _ => None,
            };
            let acceptor = tls.as_ref().map(ReloadingCert::acceptor).transpose().or_exit(Failure::Config)?;
            let basic = web.auth_basic_user.as_deref().zip(web.auth_basic_password_file.as_deref());
            let credentials = Authenticator::load(web.auth_bearer_token_file.as_deref(), basic)
                .or_exit(Failure::Config)?
                .map(Arc::new);
            let listener = TcpListener::bind(cli.listen)
                .await
                .with_context(|| format!("cannot listen on {}", cli.listen))
                .or_exit(Failure::Listen)?;
            tracing::info!(
                listen = %cli.listen,
                mode = if live { "live" } else { "snapshot" },
                scheme = if tls.is_some() { "https" } else { "http" },
                auth = credentials.is_some(),
                auth_kubernetes = token_review.is_some(),
                events = events_client.is_some(),
                "serving /, /explain, /metrics, /healthz, /readyz"
            );
            let reloader = (tls.is_some() || credentials.is_some()).then(|| {
                let every = Duration::from_secs(web.credentials_reload_seconds);
                tokio::spawn(server::reload_credentials(tls, credentials.clone(), shared.clone(), every))
            });
            let events = events_client.map(|client| tokio::spawn(publish::events::run(client, shared.clone())));
            let exposition = Arc::new(metrics::Exposition::new(shared.clone()));
            let router = server::router(shared, exposition, server::ScrapeAuth { credentials, token_review });
            server::serve(listener, router, acceptor, shutdown_signal()).await.or_exit(Failure::Runtime)?;
            reloader.inspect(|task| task.abort());
            events.inspect(|task| task.abort());
            drop(watches);
            tracing::info!("shut down");
            Ok(())
        }
    }
}

async fn connect(source: &Source) -> Result<kube::Client, (Failure, anyhow::Error)> {
    let mut config =
        connect::config(source.kubeconfig.as_deref(), source.context.as_deref()).await.or_exit(Failure::Config)?;
    config.disable_compression |= !source.apiserver_compression;
    connect::client(config).await.map_err(|e| {
        let failure = match e {
            ConnectError::Unreachable { .. } | ConnectError::Timeout { .. } => Failure::Unreachable,
            ConnectError::Kubeconfig { .. } | ConnectError::Config(_) => Failure::Config,
        };
        (failure, e.into())
    })
}

async fn wait_until_synced(shared: &Shared) -> Outcome {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !shared.read().synced() {
        if tokio::time::Instant::now() > deadline {
            let waiting: Vec<_> = shared.not_ready().iter().map(|r| r.as_str()).collect();
            return Err((Failure::Unreachable, anyhow!("caches did not sync within 120s: {}", waiting.join(", "))));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A snapshot's DaemonSet status is the controller's truth: say so when we disagree.
fn warn_on_status_disagreement(index: &Index) {
    for view in index.daemonsets() {
        let Some(status) = view.ds.status else { continue };
        let ours = view.misscheduled_node_count() as i64;
        if status.number_misscheduled != ours {
            tracing::warn!(
                daemonset = %format!("{}/{}", view.ds.id.namespace, view.ds.id.name),
                status_number_misscheduled = status.number_misscheduled,
                exporter = ours,
                "misscheduled count disagrees with the DaemonSet status; the status lags the objects (higher after a node is deleted, lower on 1.33+ after a NoSchedule taint such as a drain): see docs/controller-semantics.md"
            );
        }
    }
}

async fn shutdown_signal() {
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
