//! `kubectl misschedule`: why DaemonSet pods are misscheduled, as a kubectl plugin.
//!
//! Live by default (one list of nodes, DaemonSets, revisions and pods; `--watch` keeps
//! watching), or `--from-exporter NS/SERVICE` to read a running exporter's `/explain`
//! through the API server's service proxy instead of building a second cache.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::Service;
use misschedule_exporter::index::Index;
use misschedule_exporter::report::explain::{self, Explanation, render};
use misschedule_exporter::source::connect::{self, ConnectError};
use misschedule_exporter::source::{list, watch};
use misschedule_exporter::telemetry::{Shared, unix_now};

/// Why DaemonSet pods are misscheduled: pod, node, reason, the label or taint key, who
/// changed it, and a suggested fix.
#[derive(Debug, Parser)]
#[command(name = "kubectl misschedule", bin_name = "kubectl misschedule", version)]
struct Cli {
    /// Namespace of the DaemonSets (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,

    /// DaemonSets in every namespace.
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    all_namespaces: bool,

    /// Only this DaemonSet.
    #[arg(long)]
    daemonset: Option<String>,

    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,

    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,

    /// Output format: table, wide (with the suggested fix and the nodes each DaemonSet
    /// skips), or the whole explanation as json or yaml.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    output: Output,

    /// Keep watching, and print again whenever the answer changes.
    #[arg(short = 'w', long)]
    watch: bool,

    /// Exit with 1 when any pod is misscheduled (for scripts).
    #[arg(long)]
    exit_code: bool,

    /// Read a running exporter's /explain through the API server's service proxy
    /// (NAMESPACE/SERVICE, optionally :PORT) instead of listing the cluster.
    #[arg(long, value_name = "NAMESPACE/SERVICE[:PORT]")]
    from_exporter: Option<String>,

    /// Label selector of the daemon pods (the DaemonSet controller sets it on every pod).
    #[arg(long, default_value = "pod-template-generation")]
    pod_selector: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Wide,
    Json,
    Yaml,
}

/// Exit codes: 1 is `--exit-code`'s "something is misscheduled"; clap uses 2.
const MISSCHEDULED: u8 = 1;
const CONFIG: u8 = 3;
const UNREACHABLE: u8 = 4;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(UNREACHABLE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err((code, error)) => {
            eprintln!("error: {error:#}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, anyhow::Error);

async fn run(cli: Cli) -> Result<u8, Failure> {
    let config = connect::config(cli.kubeconfig.as_deref(), cli.context.as_deref()).await.map_err(connect_failure)?;
    let namespace = if cli.all_namespaces {
        None
    } else {
        Some(cli.namespace.clone().unwrap_or_else(|| config.default_namespace.clone()))
    };
    let client = connect::client(config).await.map_err(connect_failure)?;
    let filter = Filter { namespace, daemonset: cli.daemonset.clone() };

    if let Some(target) = &cli.from_exporter {
        let target = ExporterService::parse(target).map_err(|e| (CONFIG, e))?;
        let mut screen = Screen::new(cli.output);
        loop {
            let explanation = target.explain(&client, &filter).await.map_err(|e| (UNREACHABLE, e))?;
            if !cli.watch {
                print!("{}", format(&explanation, cli.output).map_err(|e| (CONFIG, e))?);
                return Ok(exit_code(&cli, &explanation));
            }
            if !screen.show(explanation).map_err(|e| (CONFIG, e))? {
                return Ok(0);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    if !cli.watch {
        let mut index = Index::default();
        index.set_now(unix_now());
        list::list_into(&mut index, &client, filter.namespace.as_deref(), &cli.pod_selector)
            .await
            .map_err(|e| (UNREACHABLE, e.into()))?;
        let explanation = filter.explain(&index);
        print!("{}", format(&explanation, cli.output).map_err(|e| (CONFIG, e))?);
        return Ok(exit_code(&cli, &explanation));
    }

    let mut index = Index::default();
    index.set_now(unix_now());
    let shared = Arc::new(Shared::new(index));
    let config = watch::WatchConfig {
        namespaces: filter.namespace.iter().cloned().collect(),
        pod_selector: cli.pod_selector.clone(),
        timeout_seconds: 290,
        page_size: watch::DEFAULT_PAGE_SIZE,
        from_apiserver_cache: false,
    };
    let _watches = watch::spawn_all(client, &config, shared.clone());
    let mut screen = Screen::new(cli.output);
    let mut seen = None;
    loop {
        let explanation = {
            let index = shared.read();
            if index.synced() && seen != Some(index.generation()) {
                seen = Some(index.generation());
                Some(filter.explain(&index))
            } else {
                None
            }
        };
        if let Some(explanation) = explanation
            && !screen.show(explanation).map_err(|e| (CONFIG, e))?
        {
            return Ok(0);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn connect_failure(e: ConnectError) -> Failure {
    let code = match e {
        ConnectError::Unreachable { .. } | ConnectError::Timeout { .. } => UNREACHABLE,
        ConnectError::Kubeconfig { .. } | ConnectError::Config(_) => CONFIG,
    };
    (code, e.into())
}

fn exit_code(cli: &Cli, explanation: &Explanation) -> u8 {
    if cli.exit_code && !explanation.misscheduled.is_empty() { MISSCHEDULED } else { 0 }
}

struct Filter {
    /// `None`: every namespace.
    namespace: Option<String>,
    daemonset: Option<String>,
}

impl Filter {
    fn explain(&self, index: &Index) -> Explanation {
        let namespaces: Vec<String> = self.namespace.iter().cloned().collect();
        explain::explain(index, &namespaces, self.daemonset.as_deref(), unix_now())
    }
}

fn format(explanation: &Explanation, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Table => render(explanation, false),
        Output::Wide => render(explanation, true),
        Output::Json => serde_json::to_string_pretty(explanation)? + "\n",
        Output::Yaml => serde_saphyr::to_string(explanation).context("cannot write YAML")?,
    })
}

/// What `--watch` prints: each new answer (ages alone do not make one). On a terminal it
/// replaces the last; in a pipe they follow one another as `kubectl get -w` does: JSON
/// objects back to back, YAML documents after `---`, tables after a blank line.
struct Screen {
    output: Output,
    terminal: bool,
    shown: Option<Explanation>,
}

impl Screen {
    fn new(output: Output) -> Self {
        Screen { output, terminal: std::io::stdout().is_terminal(), shown: None }
    }

    /// Whether anyone still reads: false once the pipe is closed (`| head`).
    fn show(&mut self, explanation: Explanation) -> anyhow::Result<bool> {
        if self.shown.as_ref().is_some_and(|shown| shown.same_answer(&explanation)) {
            return Ok(true);
        }
        let text = format(&explanation, self.output)?;
        let separator = match (self.terminal, self.output, self.shown.is_some()) {
            (true, _, _) => "\x1b[2J\x1b[H",
            (false, Output::Yaml, _) => "---\n",
            (false, Output::Table | Output::Wide, true) => "\n",
            (false, _, _) => "",
        };
        let mut stdout = std::io::stdout().lock();
        match write!(stdout, "{separator}{text}").and_then(|()| stdout.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
            Err(e) => return Err(e).context("cannot write to stdout"),
        }
        self.shown = Some(explanation);
        Ok(true)
    }
}

/// A running exporter's Service, reached through the API server's service proxy
/// (`get` on `services/proxy` in its namespace is all the caller needs).
struct ExporterService {
    namespace: String,
    /// `NAME` or `NAME:PORT`, as the proxy path takes it.
    service: String,
}

impl ExporterService {
    fn parse(target: &str) -> anyhow::Result<Self> {
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

    async fn explain(&self, client: &kube::Client, filter: &Filter) -> anyhow::Result<Explanation> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(ns) = &filter.namespace {
            query.append_pair("namespace", ns);
        }
        if let Some(ds) = &filter.daemonset {
            query.append_pair("daemonset", ds);
        }
        let service = self.with_port(client).await?;
        let path = format!("/api/v1/namespaces/{}/services/{service}/proxy/explain?{}", self.namespace, query.finish());
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
