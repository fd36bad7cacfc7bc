//! misschedule-exporter: serve, or `explain`, why DaemonSet pods are misscheduled.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use misschedule_exporter::cli::{self, Classification, Exit, LogFormat};
use misschedule_exporter::clock::unix_now;
use misschedule_exporter::guard::Policy;
use misschedule_exporter::http::auth::{Authenticator, ScrapeAuth};
use misschedule_exporter::http::reload::{self, Reload};
use misschedule_exporter::http::tls::ReloadingCert;
use misschedule_exporter::http::token_review::TokenReviewer;
use misschedule_exporter::http::{server, webhook};
use misschedule_exporter::once::Reading;
use misschedule_exporter::publish;
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::report::metrics;
use misschedule_exporter::report::scope::Origin;
use misschedule_exporter::report::text::{self, Output};
use misschedule_exporter::shared::Shared;
use misschedule_exporter::source::connect;
use misschedule_exporter::source::request::{Compression, Encoding};
use misschedule_exporter::source::snapshot::{self, Snapshot};
use misschedule_exporter::source::stream_list::ListMode;
use misschedule_exporter::source::watch;
use misschedule_exporter::telemetry::{CredentialFile, Telemetry};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// Tells Kubernetes operators why DaemonSet pods are misscheduled: each pod that
/// counts toward status.numberMisscheduled, with its node, a reason and the label
/// or taint key behind it, as Prometheus metrics or a table.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Address to serve /metrics, /healthz and /readyz on: IP:PORT, :PORT (every
    /// interface) or HOST:PORT.
    #[arg(long, env = "MISSCHEDULE_LISTEN", default_value = "0.0.0.0:18493", value_parser = cli::parse_listen)]
    listen: SocketAddr,

    #[command(flatten)]
    source: Source,

    #[command(flatten)]
    web: Web,

    #[command(flatten)]
    guard: Guard,

    /// Write Events on the DaemonSet, so `kubectl describe daemonset` says why: Misscheduled
    /// when a pod becomes misscheduled or its reason changes, NodeLost when a node loses its
    /// pod, NodeUncovered when a node's pod is not available for a reason that needs
    /// someone, Recovered when any is over. Warning, or Normal for what is expected (a drain,
    /// a DaemonSet change) and for recoveries. Needs create, get and patch on core
    /// events (get and patch count a repeat on an existing Event). Live mode only.
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
    /// `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json --show-managed-fields`
    /// (or -o yaml; without that flag kubectl drops who changed what).
    /// Repeat, or separate with commas in the env var.
    #[arg(long, env = "MISSCHEDULE_SNAPSHOT", value_delimiter = ',', global = true)]
    snapshot: Vec<PathBuf>,

    /// Only DaemonSets in this namespace (repeatable; default: all). Nodes are always watched.
    #[arg(short = 'n', long, env = "MISSCHEDULE_NAMESPACE", value_delimiter = ',', global = true)]
    namespace: Vec<String>,

    #[command(flatten)]
    classification: Classification,

    /// Seconds each watch call lasts before it is resumed; lower it below an idle
    /// timeout that a proxy or load balancer in front of the API server enforces.
    #[arg(long, env = "MISSCHEDULE_WATCH_TIMEOUT_SECONDS", default_value_t = watch::DEFAULT_TIMEOUT_SECONDS, value_parser = clap::value_parser!(u32).range(1..=i64::from(watch::DEFAULT_TIMEOUT_SECONDS)), global = true)]
    watch_timeout_seconds: u32,

    /// Seconds without an event or bookmark before a watch counts as stalled: it is closed,
    /// counted, and relisted. API servers since 1.27 send a bookmark each minute; older ones
    /// only just before each call's timeout, so there a watch is given that timeout plus 5 s
    /// until it has seen a bookmark mid-call.
    #[arg(long, env = "MISSCHEDULE_WATCH_STALL_SECONDS", default_value_t = watch::DEFAULT_STALL_SECONDS, value_parser = clap::value_parser!(u32).range(1..=3600), global = true)]
    watch_stall_seconds: u32,

    /// Serve the initial lists and relists from the API server's watch cache
    /// (resourceVersion=0) instead of reading them through to etcd, as kube-state-metrics'
    /// flag of the same name does: far cheaper for the API server and etcd in a large
    /// cluster, but a list may trail etcd by a moment (the watch then catches up). The
    /// cache answers each list in one piece, so --list-page-size does not apply.
    #[arg(long, env = "MISSCHEDULE_USE_APISERVER_CACHE", conflicts_with = "list_page_size")]
    use_apiserver_cache: bool,

    /// Ask the API server to gzip its large responses (paged lists over 128 KiB, and
    /// streamed lists), as Kubernetes clients do unless told not to. Off by default: in a cluster the bytes are cheap and
    /// the compression costs CPU at both ends; at 2,600,000 pods inflating the lists added
    /// about a quarter to this exporter's CPU to ready (docs/benchmarks.md). For a slow or
    /// metered link, turn it on. A kubeconfig's `disable-compression: true` still turns it off.
    #[arg(long, env = "MISSCHEDULE_APISERVER_COMPRESSION", global = true)]
    apiserver_compression: bool,

    /// How lists (the first, and each relist) are fetched: auto streams them where the API
    /// server can (sendInitialEvents, from its watch cache, one object at a time; 1.34 and
    /// later) and lists in pages where it refuses or ignores that; stream or pages force one.
    #[arg(long, env = "MISSCHEDULE_LIST_MODE", value_enum, default_value_t)]
    list_mode: ListMode,

    /// How pods and nodes are encoded: auto asks for protobuf and reads JSON if that comes.
    #[arg(long, env = "MISSCHEDULE_WIRE", value_enum, default_value_t)]
    wire: Encoding,

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

/// The admission guard (docs/guard.md): warns before a node or DaemonSet change deletes or
/// strands daemon pods, and refuses it for DaemonSets annotated `misschedule.io/guard: deny`.
#[derive(Debug, clap::Args)]
struct Guard {
    /// Serve the validating admission webhook, `POST /validate`, over HTTPS on this address.
    #[arg(long, env = "MISSCHEDULE_WEBHOOK_LISTEN", value_parser = cli::parse_listen, conflicts_with = "snapshot",
          requires_all = ["webhook_tls_cert_file", "webhook_tls_key_file"])]
    webhook_listen: Option<SocketAddr>,

    /// PEM certificate chain of the webhook, which the API server verifies against the
    /// webhook configuration's caBundle. Re-read when it changes.
    #[arg(long, env = "MISSCHEDULE_WEBHOOK_TLS_CERT_FILE", requires = "webhook_listen")]
    webhook_tls_cert_file: Option<PathBuf>,

    /// PEM private key for --webhook-tls-cert-file. Re-read when it changes.
    #[arg(long, env = "MISSCHEDULE_WEBHOOK_TLS_KEY_FILE", requires = "webhook_listen")]
    webhook_tls_key_file: Option<PathBuf>,

    /// A user whose changes the guard warns about but never refuses, such as nfd-master's
    /// ServiceAccount (system:serviceaccount:NAMESPACE:NAME). Repeat, or separate with commas.
    #[arg(long = "guard-exempt-user", env = "MISSCHEDULE_GUARD_EXEMPT_USERS", value_delimiter = ',')]
    guard_exempt_users: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List misscheduled pods with node, reason, key, age and a suggested fix,
    /// then the reasons DaemonSets skip nodes: one list of the cluster, or --snapshot.
    /// Like kubectl, the kubeconfig context's namespace unless -n or -A (a snapshot: all).
    Explain {
        /// DaemonSets in every namespace.
        #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
        all_namespaces: bool,
        /// Only this DaemonSet.
        #[arg(long)]
        daemonset: Option<String>,
        /// Output format: table, wide (with the suggested fix and the nodes each DaemonSet
        /// skips), or the whole explanation as json or yaml.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

type Outcome = Result<Exit, (Exit, anyhow::Error)>;

trait OrExit<T> {
    fn or_exit(self, exit: Exit) -> Result<T, (Exit, anyhow::Error)>;
}

impl<T, E: Into<anyhow::Error>> OrExit<T> for Result<T, E> {
    fn or_exit(self, exit: Exit) -> Result<T, (Exit, anyhow::Error)> {
        self.map_err(|e| (exit, e.into()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A one-shot command logs only what went wrong, as kubectl does.
    let level = if cli.command.is_some() { "warn" } else { "info" };
    cli::init_tracing(cli.log_format, level);
    cli::run(run(cli))
}

async fn run(cli: Cli) -> Outcome {
    if let Some(Command::Explain { all_namespaces, daemonset, output }) = &cli.command {
        return explain_once(&cli.source, *all_namespaces, daemonset.clone(), *output).await;
    }
    let source = &cli.source;
    let mut index = source.classification.index(source.namespace.len());
    index.set_now(unix_now());

    let live = source.snapshot.is_empty();
    let telemetry = Arc::new(Telemetry::default());
    let mut watches = None;
    let mut token_review = None;
    let mut events_client = None;
    let (shared, origin) = if live {
        let (client, server, compression) = connect(source).await?;
        if cli.events {
            events_client = Some(client.clone());
        }
        if cli.web.auth_kubernetes {
            token_review = Some(Arc::new(TokenReviewer::new(client.clone())));
        }
        let shared = Arc::new(Shared::new(index));
        let config = watch::WatchConfig {
            timeout_seconds: source.watch_timeout_seconds,
            page_size: source.list_page_size,
            from_apiserver_cache: source.use_apiserver_cache,
            list_mode: source.list_mode,
            compression,
            encoding: source.wire,
            stall_after: Duration::from_secs(source.watch_stall_seconds.into()),
            ..watch::WatchConfig::new(source.namespace.clone(), source.classification.pod_selector.clone())
        };
        watches = Some(watch::spawn_all(client, &config, shared.clone(), telemetry.clone()));
        (shared, Origin::watched(format!("cluster {server}"), source.namespace.clone()).since(unix_now()))
    } else {
        let snapshot = Snapshot::read_files(&source.snapshot).or_exit(Exit::Snapshot)?;
        let origin = Origin::read_once(format!("snapshot {}", snapshot.files()), source.namespace.clone());
        snapshot.load_into(&mut index, &source.namespace).or_exit(Exit::Snapshot)?;
        snapshot::warn_on_status_disagreement(&index);
        (Arc::new(Shared::new(index)), origin)
    };

    let web = &cli.web;
    let tls = match (&web.tls_cert_file, &web.tls_key_file) {
        (Some(cert), Some(key)) => Some(ReloadingCert::load(CredentialFile::Tls, cert, key).or_exit(Exit::Config)?),
        _ => None,
    };
    let acceptor = tls.as_ref().map(ReloadingCert::acceptor).transpose().or_exit(Exit::Config)?;
    let basic = web.auth_basic_user.as_deref().zip(web.auth_basic_password_file.as_deref());
    let credentials =
        Authenticator::load(web.auth_bearer_token_file.as_deref(), basic).or_exit(Exit::Config)?.map(Arc::new);
    let listener = TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.listen))
        .or_exit(Exit::Listen)?;
    tracing::info!(
        listen = %cli.listen,
        mode = if live { "live" } else { "snapshot" },
        scheme = if tls.is_some() { "https" } else { "http" },
        auth = credentials.is_some(),
        auth_kubernetes = token_review.is_some(),
        events = events_client.is_some(),
        "serving /, /explain, /metrics, /healthz, /readyz"
    );
    let mut reloadable: Vec<Arc<dyn Reload>> = tls
        .map(|cert| cert as Arc<dyn Reload>)
        .into_iter()
        .chain(credentials.clone().map(|auth| auth as Arc<dyn Reload>))
        .collect();
    let shutdown = cli::shutdown_signal();
    let guard = &cli.guard;
    let webhook = match (guard.webhook_listen, &guard.webhook_tls_cert_file, &guard.webhook_tls_key_file) {
        (Some(at), Some(cert), Some(key)) => {
            let cert = ReloadingCert::load(CredentialFile::WebhookTls, cert, key).or_exit(Exit::Config)?;
            let acceptor = cert.acceptor().or_exit(Exit::Config)?;
            reloadable.push(cert);
            let listener =
                TcpListener::bind(at).await.with_context(|| format!("cannot listen on {at}")).or_exit(Exit::Listen)?;
            tracing::info!(listen = %at, "serving the admission guard's POST /validate over https");
            let policy = Policy { exempt_users: guard.guard_exempt_users.clone() };
            let router = webhook::router(shared.clone(), telemetry.clone(), policy);
            Some(tokio::spawn(server::serve(listener, router, Some(acceptor), shutdown())))
        }
        _ => None,
    };
    let reloader = (!reloadable.is_empty()).then(|| {
        let every = Duration::from_secs(web.credentials_reload_seconds);
        tokio::spawn(reload::reload_credentials(reloadable, telemetry.clone(), every))
    });
    let events = events_client.map(|client| {
        let namespaces = source.namespace.clone();
        tokio::spawn(publish::events::run(client, namespaces, shared.clone(), telemetry.clone()))
    });
    // The watches stamp the index's clock with each event; this keeps it moving in a
    // quiet cluster, so that lost nodes past their retention go.
    let clock = live.then(|| tokio::spawn(keep_time(shared.clone())));
    let mut self_metrics = Registry::default();
    telemetry.register(&mut self_metrics, shared.clone());
    let exposition = Arc::new(metrics::Exposition::new(shared.clone(), self_metrics));
    let router = server::router(shared, exposition, ScrapeAuth { credentials, token_review }, origin);
    server::serve(listener, router, acceptor, shutdown()).await.or_exit(Exit::Runtime)?;
    if let Some(webhook) = webhook {
        let _ = webhook.await;
    }
    reloader.inspect(|task| task.abort());
    events.inspect(|task| task.abort());
    clock.inspect(|task| task.abort());
    drop(watches);
    tracing::info!("shut down");
    Ok(Exit::Success)
}

/// A client, the API server's address an answer names, and whether the watches ask for gzip.
async fn connect(source: &Source) -> Result<(kube::Client, String, Compression), (Exit, anyhow::Error)> {
    let mut config =
        connect::config(source.kubeconfig.as_deref(), source.context.as_deref()).await.map_err(cli::connect_failure)?;
    let compression = connect::watch_compression(&mut config, source.apiserver_compression);
    let server = connect::server(&config);
    Ok((connect::client(config).await.map_err(cli::connect_failure)?, server, compression))
}

/// `explain`: one list of the cluster (or the snapshot) and one answer, failing in seconds
/// with one line. The namespace is kubectl's: the context's unless -n or -A; a snapshot's
/// is every namespace.
async fn explain_once(source: &Source, all_namespaces: bool, daemonset: Option<String>, output: Output) -> Outcome {
    let mut index = source.classification.index(source.namespace.len());
    index.set_now(unix_now());
    let reading = if source.snapshot.is_empty() {
        let mut config = connect::config(source.kubeconfig.as_deref(), source.context.as_deref())
            .await
            .map_err(cli::connect_failure)?;
        config.disable_compression |= !source.apiserver_compression;
        let namespaces = match (all_namespaces, source.namespace.is_empty()) {
            (true, _) => Vec::new(),
            (false, true) => vec![config.default_namespace.clone()],
            (false, false) => source.namespace.clone(),
        };
        let server = connect::server(&config);
        let client = connect::client(config).await.map_err(cli::connect_failure)?;
        let pods = &source.classification.pod_selector;
        Reading::cluster(index, &client, &server, namespaces, pods).await.map_err(cli::list_failure)?
    } else {
        let snapshot = Snapshot::read_files(&source.snapshot).or_exit(Exit::Snapshot)?;
        Reading::snapshot(index, snapshot, source.namespace.clone()).or_exit(Exit::Snapshot)?
    };
    let namespace = match reading.origin.namespaces.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    };
    let explanation = reading.explain(&Selection { namespace, daemonset }, unix_now()).or_exit(Exit::Config)?;
    print!("{}", text::print(&explanation, output).or_exit(Exit::Runtime)?);
    Ok(Exit::Success)
}

/// Stamp the index's clock once a minute, whether or not anything happens.
async fn keep_time(shared: Arc<Shared>) {
    let mut ticks = tokio::time::interval(Duration::from_secs(60));
    loop {
        ticks.tick().await;
        shared.update(|index| index.set_now(unix_now()));
    }
}
