//! `kubectl misschedule`: why DaemonSet pods are misscheduled, as a kubectl plugin.
//!
//! Live by default (one list of nodes, DaemonSets, revisions and pods; `--watch` keeps
//! watching), `--snapshot FILE` on a dump, or `--from-exporter NS/SERVICE` to read a
//! running exporter's `/explain` through the API server's service proxy instead of
//! building a second cache. `what-if` answers what a change would do before it is made.

mod exporter;
mod what_if;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use misschedule_exporter::cli::{self, Classification, Exit, LogFormat};
use misschedule_exporter::clock::unix_now;
use misschedule_exporter::index::Index;
use misschedule_exporter::once::Reading;
use misschedule_exporter::report::explain::{self, Explanation, Selection};
use misschedule_exporter::report::scope::Origin;
use misschedule_exporter::report::text::{self, Output};
use misschedule_exporter::shared::Shared;
use misschedule_exporter::source::snapshot::Snapshot;
use misschedule_exporter::source::{connect, watch};
use misschedule_exporter::telemetry::Telemetry;

use self::exporter::ExporterService;

/// Why DaemonSet pods are misscheduled: pod, node, reason, the label or taint key, who
/// changed it, and a suggested fix. `what-if` tells what a change would do first.
#[derive(Debug, Parser)]
#[command(name = "kubectl misschedule", bin_name = "kubectl misschedule", version)]
struct Cli {
    #[command(flatten)]
    scope: Scope,

    /// Output format: table, wide (with the suggested fix and the nodes each DaemonSet
    /// skips), or the whole answer as json or yaml.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,

    /// Exit with 1 when something needs action: a misscheduled pod or a lost node, unless
    /// its reason is an expected one (a drain, a DaemonSet change). what-if: when a pod
    /// would be deleted or misscheduled. For scripts and pre-merge checks.
    #[arg(long, global = true)]
    exit_code: bool,

    /// Keep watching, and print again whenever the answer changes.
    #[arg(short = 'w', long, conflicts_with = "snapshot")]
    watch: bool,

    /// Read a running exporter's /explain through the API server's service proxy
    /// (NAMESPACE/SERVICE, optionally :PORT) instead of listing the cluster. The exporter
    /// classifies with its own flags; --drain-taint-keys, --nfd-managers and --pod-selector
    /// apply only to a live answer.
    #[arg(long, value_name = "NAMESPACE/SERVICE[:PORT]", conflicts_with = "snapshot")]
    from_exporter: Option<String>,

    #[command(flatten)]
    classification: Classification,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Which DaemonSets, and where the cluster is read from: every command takes these.
#[derive(Debug, clap::Args)]
struct Scope {
    /// Namespace of the DaemonSets (default: the kubeconfig context's; with --snapshot,
    /// all; what-if label and taint: all).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,

    /// DaemonSets in every namespace.
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace", global = true)]
    all_namespaces: bool,

    /// Only this DaemonSet.
    #[arg(long, global = true)]
    daemonset: Option<String>,

    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,

    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,

    /// Answer from files instead of the cluster, offline: the output of `kubectl get
    /// nodes,daemonsets,controllerrevisions,pods -A -o json --show-managed-fields`
    /// (or -o yaml). Repeat, or separate with commas.
    #[arg(long, value_delimiter = ',', global = true)]
    snapshot: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What a change would do to daemon pods, before you make it: which the DaemonSet
    /// controller would delete, leave misscheduled, count again or create. Never writes.
    #[command(name = "what-if", subcommand)]
    WhatIf(what_if::Change),
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
    if let Some(Command::WhatIf(change)) = &cli.command {
        if cli.watch || cli.from_exporter.is_some() {
            let flag = if cli.watch { "--watch" } else { "--from-exporter" };
            return Err((Exit::Config, anyhow::anyhow!("{flag} does not apply to what-if")));
        }
        return what_if::run(&cli, change).await;
    }
    if !cli.scope.snapshot.is_empty() {
        let namespaces: Vec<String> = cli.scope.namespace.iter().cloned().collect();
        let snapshot = Snapshot::read_files(&cli.scope.snapshot).map_err(|e| (Exit::Snapshot, e.into()))?;
        let reading = Reading::snapshot(fresh_index(&cli, cli.scope.namespace.as_deref()), snapshot, namespaces)
            .map_err(|e| (Exit::Snapshot, e.into()))?;
        let selection = Selection { namespace: cli.scope.namespace.clone(), daemonset: cli.scope.daemonset.clone() };
        return answer(&cli, &reading.explain(&selection, unix_now()).map_err(|e| (Exit::Config, e.into()))?);
    }
    let config = connect::config(cli.scope.kubeconfig.as_deref(), cli.scope.context.as_deref())
        .await
        .map_err(cli::connect_failure)?;
    let namespace = if cli.scope.all_namespaces {
        None
    } else {
        Some(cli.scope.namespace.clone().unwrap_or_else(|| config.default_namespace.clone()))
    };
    let server = connect::server(&config);
    let client = connect::client(config).await.map_err(cli::connect_failure)?;
    let selection = Selection { namespace, daemonset: cli.scope.daemonset.clone() };
    let namespaces: Vec<String> = selection.namespace.iter().cloned().collect();

    if let Some(target) = &cli.from_exporter {
        let target = ExporterService::parse(target).map_err(|e| (Exit::Config, e))?;
        let mut screen = Screen::new(cli.output);
        loop {
            let explanation = target.explain(&client, &selection).await?;
            if !cli.watch {
                return answer(&cli, &explanation);
            }
            if !screen.show(explanation).map_err(|e| (Exit::Runtime, e))? {
                return Ok(Exit::Success);
            }
            tokio::time::sleep(EXPORTER_POLL_INTERVAL).await;
        }
    }

    let index = fresh_index(&cli, selection.namespace());
    if !cli.watch {
        let reading = Reading::cluster(index, &client, &server, namespaces, &cli.classification.pod_selector)
            .await
            .map_err(cli::list_failure)?;
        let explanation = reading.explain(&selection, unix_now()).map_err(|e| (Exit::Config, e.into()))?;
        let exit = answer(&cli, &explanation)?;
        // A manager or a lost node this list could not know, a running exporter may: name
        // the one there is.
        let tabular = matches!(cli.output, Output::Table | Output::Wide);
        let unknown = explanation.looked_at.as_ref().is_some_and(|l| l.lost_unknown().is_some());
        if tabular
            && (unknown || explanation.has_unknown_manager())
            && let Some(service) = exporter::discover(&client).await
        {
            println!("An exporter runs in this cluster: kubectl misschedule --from-exporter {service}");
        }
        return Ok(exit);
    }

    // The first list, as a one-shot answer makes it, fails fast and says why, and checks the
    // filter; the watches then take over from an empty index.
    let pods = &cli.classification.pod_selector;
    Reading::cluster(fresh_index(&cli, selection.namespace()), &client, &server, namespaces.clone(), pods)
        .await
        .map_err(cli::list_failure)?
        .explain(&selection, unix_now())
        .map_err(|e| (Exit::Config, e.into()))?;
    let origin = Origin::watched(format!("cluster {server}"), namespaces.clone()).since(unix_now());
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
            explain::explain(&index, &selection, &origin, unix_now())
        };
        if let Some(Err(error)) = explanation.looked_at.as_ref().map(|l| l.check()) {
            return Err((Exit::Config, error.into()));
        }
        if !screen.show(explanation).map_err(|e| (Exit::Runtime, e))? {
            break;
        }
    }
    Ok(Exit::Success)
}

/// The index of the snapshot files, with the DaemonSets, revisions and pods of `namespace`
/// (or all).
fn snapshot_index(cli: &Cli, snapshot: Snapshot, namespace: Option<&str>) -> Result<Index, Failure> {
    let mut index = fresh_index(cli, namespace);
    let namespaces: Vec<String> = namespace.into_iter().map(str::to_owned).collect();
    snapshot.load_into(&mut index, &namespaces).map_err(|e| (Exit::Snapshot, e.into()))?;
    Ok(index)
}

/// An empty index that classifies by the flags, for one namespace or all.
fn fresh_index(cli: &Cli, namespace: Option<&str>) -> Index {
    let mut index = cli.classification.index(usize::from(namespace.is_some()));
    index.set_now(unix_now());
    index
}

/// Print the answer; with `--exit-code`, exit 1 when something needs action.
fn answer(cli: &Cli, explanation: &Explanation) -> Result<Exit, Failure> {
    print!("{}", text::print(explanation, cli.output).map_err(|e| (Exit::Runtime, e.into()))?);
    Ok(if cli.exit_code && explanation.needs_action() { Exit::NeedsAction } else { Exit::Success })
}

/// What `--watch` prints: each new answer (ages alone do not make one). On a terminal it
/// replaces the last; in a pipe they follow one another as `kubectl get -w` does: JSON
/// objects back to back, YAML documents after `---`, tables after `--- changed, as of T`.
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
        let as_of = explanation.looked_at.as_ref().map_or("", |l| l.as_of.as_str());
        let separator = match (self.terminal, self.output, self.shown.is_some()) {
            (true, _, _) => "\x1b[2J\x1b[H".to_owned(),
            (false, Output::Yaml, _) => "---\n".to_owned(),
            // Each new table says when it changed: the ages alone do not.
            (false, Output::Table | Output::Wide, true) => format!("\n--- changed, as of {as_of}\n"),
            (false, _, _) => String::new(),
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
