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
use clap::Parser;
use k8s_openapi::api::core::v1::Service;
use misschedule_exporter::cli::{self, Classification, Exit, LogFormat};
use misschedule_exporter::clock::unix_now;
use misschedule_exporter::report::explain::{self, Explanation, Selection};
use misschedule_exporter::report::text::{self, Output};
use misschedule_exporter::shared::Shared;
use misschedule_exporter::source::{connect, list, watch};
use misschedule_exporter::telemetry::Telemetry;

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
    /// (NAMESPACE/SERVICE, optionally :PORT) instead of listing the cluster. The exporter
    /// classifies with its own flags; --drain-taint-keys, --nfd-managers and --pod-selector
    /// apply only to a live answer.
    #[arg(long, value_name = "NAMESPACE/SERVICE[:PORT]")]
    from_exporter: Option<String>,

    #[command(flatten)]
    classification: Classification,
}

type Failure = (Exit, anyhow::Error);

/// `--watch` redraws at most this often, however fast the cluster changes.
const WATCH_REDRAW_INTERVAL: Duration = Duration::from_millis(500);
/// `--from-exporter --watch` asks the exporter this often.
const EXPORTER_POLL_INTERVAL: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_tracing(LogFormat::Text, "warn");
    cli::run(run(cli))
}

async fn run(cli: Cli) -> Result<Exit, Failure> {
    let config =
        connect::config(cli.kubeconfig.as_deref(), cli.context.as_deref()).await.map_err(cli::connect_failure)?;
    let namespace = if cli.all_namespaces {
        None
    } else {
        Some(cli.namespace.clone().unwrap_or_else(|| config.default_namespace.clone()))
    };
    let client = connect::client(config).await.map_err(cli::connect_failure)?;
    let selection = Selection { namespace, daemonset: cli.daemonset.clone() };

    if let Some(target) = &cli.from_exporter {
        let target = ExporterService::parse(target).map_err(|e| (Exit::Config, e))?;
        let mut screen = Screen::new(cli.output);
        loop {
            let explanation = target.explain(&client, &selection).await.map_err(|e| (Exit::Unreachable, e))?;
            if !cli.watch {
                return answer(&cli, &explanation);
            }
            if !screen.show(explanation).map_err(|e| (Exit::Runtime, e))? {
                return Ok(Exit::Success);
            }
            tokio::time::sleep(EXPORTER_POLL_INTERVAL).await;
        }
    }

    let namespaces: Vec<String> = selection.namespace.iter().cloned().collect();
    let mut index = cli.classification.index(namespaces.len());
    index.set_now(unix_now());
    if !cli.watch {
        list::list_into(&mut index, &client, selection.namespace(), &cli.classification.pod_selector)
            .await
            .map_err(|e| (Exit::Unreachable, e.into()))?;
        return answer(&cli, &explain::explain(&index, &selection, unix_now()));
    }

    let shared = Arc::new(Shared::new(index));
    let config = watch::WatchConfig::new(namespaces, cli.classification.pod_selector.clone());
    let _watches = watch::spawn_all(client, &config, shared.clone(), Arc::new(Telemetry::default()));
    let mut screen = Screen::new(cli.output);
    let mut generations = shared.generations(WATCH_REDRAW_INTERVAL);
    while generations.next().await.is_some() {
        let explanation = {
            let index = shared.read();
            if !index.synced() {
                continue;
            }
            explain::explain(&index, &selection, unix_now())
        };
        if !screen.show(explanation).map_err(|e| (Exit::Runtime, e))? {
            break;
        }
    }
    Ok(Exit::Success)
}

/// Print the answer; with `--exit-code`, exit 1 when some pod is misscheduled.
fn answer(cli: &Cli, explanation: &Explanation) -> Result<Exit, Failure> {
    print!("{}", text::print(explanation, cli.output).map_err(|e| (Exit::Runtime, e.into()))?);
    Ok(if cli.exit_code && !explanation.misscheduled.is_empty() { Exit::Misscheduled } else { Exit::Success })
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
        let text = text::print(&explanation, self.output)?;
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

    async fn explain(&self, client: &kube::Client, selection: &Selection) -> anyhow::Result<Explanation> {
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
