//! `kubectl misschedule what-if`: the change read as kubectl reads it, the cluster (or a
//! snapshot) read once, the change run through the index (`whatif::simulate`), and the
//! answer printed. Nothing is written to the cluster: only lists and gets are made.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use k8s_openapi::api::apps::v1::DaemonSet;
use misschedule_exporter::cli::{self, Exit};
use misschedule_exporter::clock::unix_now;
use misschedule_exporter::k8s::slim::SlimNode;
use misschedule_exporter::report::explain::Selection;
use misschedule_exporter::source::manifest::read_daemonsets;
use misschedule_exporter::source::snapshot::Snapshot;
use misschedule_exporter::source::{connect, list};
use misschedule_exporter::whatif::edit::{LABEL_MANAGER, LabelEdit, TAINT_MANAGER, TaintEdit, split_args};
use misschedule_exporter::whatif::selector::NodeSelector;
use misschedule_exporter::whatif::{Answer, LookedAt, simulate, text};

use crate::{Cli, Failure, fresh_index, snapshot_index};

#[derive(Debug, Subcommand)]
pub enum Change {
    /// What `kubectl label node NODE... KEY=VALUE|KEY-` would do: NODE... then the
    /// changes, as kubectl takes them. Looks at DaemonSets in every namespace unless -n.
    Label(NodeChange),
    /// What `kubectl taint node NODE... KEY[=VALUE]:EFFECT|KEY[:EFFECT]-` would do.
    /// Looks at DaemonSets in every namespace unless -n.
    Taint(NodeChange),
    /// What `kubectl apply -f` of DaemonSets would do: an existing one is matched by
    /// namespace and name, anything else is new. Only placement counts; a new image is a
    /// rollout, not a change of which nodes run the pod. Whether the scheduler can then
    /// place a created pod (resources, host ports) is not predicted.
    Apply {
        /// A file of DaemonSets (JSON or YAML, several documents or a List); - reads stdin.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct NodeChange {
    /// The nodes (NODE or node/NODE; a leading `node` is read as kubectl's type), then the changes.
    #[arg(value_name = "NODE... CHANGE", required = true, num_args = 1..)]
    args: Vec<String>,

    /// Allow a label or taint that is already there to change value, as kubectl requires.
    #[arg(long)]
    overwrite: bool,

    /// The nodes this label selector selects, instead of names.
    #[arg(short = 'l', long, conflicts_with = "all")]
    selector: Option<String>,

    /// Every node.
    #[arg(long)]
    all: bool,

    /// The field manager kubectl would write as (kubectl-label, kubectl-taint): it decides
    /// reasons such as nfd_change.
    #[arg(long)]
    field_manager: Option<String>,
}

fn bad_input(error: impl Into<anyhow::Error>) -> Failure {
    (Exit::Config, error.into())
}

pub async fn run(cli: &Cli, change: &Change) -> Result<Exit, Failure> {
    let answer = match change {
        Change::Label(nodes) | Change::Taint(nodes) => {
            nodes_change(cli, nodes, matches!(change, Change::Label(_))).await?
        }
        Change::Apply { files } => apply(cli, files).await?,
    };
    print!("{}", text::print(&answer, cli.output).map_err(|e| (Exit::Runtime, e.into()))?);
    Ok(if cli.exit_code && answer.disrupts() { Exit::WouldDisrupt } else { Exit::Success })
}

/// The two ways of editing a node, parsed before anything is read.
enum Edit {
    Label(LabelEdit),
    Taint(TaintEdit),
}

async fn nodes_change(cli: &Cli, change: &NodeChange, label: bool) -> Result<Answer, Failure> {
    let (what, is_change): (&str, fn(&str) -> bool) =
        if label { ("label", LabelEdit::is_change) } else { ("taint", TaintEdit::is_change) };
    let targets = split_args(&change.args, is_change, what).map_err(bad_input)?;
    let selected = change.selector.is_some() || change.all;
    if targets.nodes.is_empty() && !selected {
        return Err(bad_input(anyhow!("name one or more nodes, or select them with -l or --all")));
    }
    if !targets.nodes.is_empty() && selected {
        return Err(bad_input(anyhow!("name cannot be provided when a selector is specified")));
    }
    let edit = if label {
        Edit::Label(LabelEdit::parse(&targets.changes).map_err(bad_input)?)
    } else {
        Edit::Taint(TaintEdit::parse(&targets.changes).map_err(bad_input)?)
    };
    let selector = change.selector.as_deref().map(NodeSelector::parse).transpose().map_err(bad_input)?;
    let selector_text = change.selector.clone().unwrap_or_default();
    let namespace = cli.scope.namespace.clone();

    let (mut index, current, source) = if cli.scope.snapshot.is_empty() {
        let (client, source) = connect_client(cli).await?;
        let mut index = fresh_index(cli, namespace.as_deref());
        let namespaces: Vec<String> = namespace.iter().cloned().collect();
        list::list_into(&mut index, &client, &namespaces, &cli.classification.pod_selector)
            .await
            .map_err(cli::list_failure)?;
        let mut current = Vec::new();
        if selected {
            current = list::nodes(&client, &selector_text).await.map_err(|e| (Exit::Unreachable, e.into()))?;
        }
        for name in &targets.nodes {
            match list::node(&client, name).await.map_err(|e| (Exit::Unreachable, e.into()))? {
                Some(node) => current.push(node),
                None => return Err(bad_input(anyhow!("nodes {name:?} not found"))),
            }
        }
        (index, current, source)
    } else {
        let snapshot = Snapshot::read_files(&cli.scope.snapshot).map_err(|e| (Exit::Snapshot, e.into()))?;
        let mut current = Vec::new();
        for name in &targets.nodes {
            let found = snapshot.nodes.iter().find(|(_, n)| n.metadata.name.as_deref() == Some(name.as_str()));
            let Some((_, node)) = found else {
                return Err(bad_input(anyhow!("nodes {name:?} not found in the snapshot")));
            };
            current.push(node.clone());
        }
        if selected {
            current.extend(
                snapshot
                    .nodes
                    .iter()
                    .filter(|(_, n)| selector.as_ref().is_none_or(|s| s.matches_pairs(n.labels.iter())))
                    .map(|(_, n)| n.clone()),
            );
        }
        let index = snapshot_index(cli, snapshot, namespace.as_deref())?;
        (index, current, snapshot_source(cli))
    };

    let now = unix_now();
    let manager = change.field_manager.as_deref().unwrap_or(if label { LABEL_MANAGER } else { TAINT_MANAGER });
    let mut edited: Vec<SlimNode> = Vec::with_capacity(current.len());
    for node in &current {
        let node = match &edit {
            Edit::Label(edit) => {
                let (node, warnings) = edit.apply(node, change.overwrite, manager, now).map_err(bad_input)?;
                warnings.iter().for_each(|w| eprintln!("warning: {w}"));
                node
            }
            Edit::Taint(edit) => edit.apply(node, change.overwrite, manager, now).map_err(bad_input)?,
        };
        edited.push(node);
    }
    let selection = Selection { namespace: namespace.clone(), daemonset: cli.scope.daemonset.clone() };
    let outcome = simulate::nodes(&mut index, &selection, current, edited).map_err(bad_input)?;
    // A --daemonset that names nothing is an error, said as every answer says it.
    let covered = misschedule_exporter::report::scope::LookedAt {
        source: source.clone(),
        namespace: namespace.clone(),
        daemonset: cli.scope.daemonset.clone(),
        daemonsets: outcome.daemonsets,
        ..Default::default()
    };
    covered.check().map_err(bad_input)?;
    let mut words = vec![what.to_owned()];
    words.extend(change.args.iter().cloned());
    if let Some(selector) = &change.selector {
        words.push(format!("-l {selector}"));
    }
    if change.all {
        words.push("--all".into());
    }
    if change.overwrite {
        words.push("--overwrite".into());
    }
    Ok(answer(words.join(" "), source, namespace, cli.scope.daemonset.clone(), outcome))
}

async fn apply(cli: &Cli, files: &[PathBuf]) -> Result<Answer, Failure> {
    let given = cli.scope.namespace.as_deref();
    // The manifests first: bad input fails before anything is read from the cluster.
    let live = cli.scope.snapshot.is_empty();
    let (connection, default_namespace) = if live {
        let config = connect::config(cli.scope.kubeconfig.as_deref(), cli.scope.context.as_deref())
            .await
            .map_err(cli::connect_failure)?;
        let namespace = config.default_namespace.clone();
        (Some(config), namespace)
    } else {
        (None, "default".to_owned())
    };
    let mut manifests = read_daemonsets(files, given, &default_namespace).map_err(bad_input)?;
    if let Some(name) = cli.scope.daemonset.as_deref() {
        manifests.retain(|ds| ds.metadata.name.as_deref() == Some(name));
        if manifests.is_empty() {
            return Err(bad_input(anyhow!("no DaemonSet named {name} in the manifests")));
        }
    }
    let namespace = one_namespace(&manifests);
    let (mut index, source) = match connection {
        Some(config) => {
            let source = format!("cluster {}", connect::server(&config));
            let client = connect::client(config).await.map_err(cli::connect_failure)?;
            let mut index = fresh_index(cli, namespace.as_deref());
            let namespaces: Vec<String> = namespace.iter().cloned().collect();
            list::list_into(&mut index, &client, &namespaces, &cli.classification.pod_selector)
                .await
                .map_err(cli::list_failure)?;
            (index, source)
        }
        None => {
            let snapshot = Snapshot::read_files(&cli.scope.snapshot).map_err(|e| (Exit::Snapshot, e.into()))?;
            (snapshot_index(cli, snapshot, namespace.as_deref())?, snapshot_source(cli))
        }
    };
    let names: Vec<String> = manifests.iter().map(|ds| ds.metadata.name.clone().unwrap_or_default()).collect();
    let outcome = simulate::daemonsets(&mut index, manifests).map_err(bad_input)?;
    let change = format!("apply -f {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" -f "));
    let daemonset = (names.len() == 1).then(|| names[0].clone());
    Ok(answer(change, source, namespace, daemonset, outcome))
}

/// The namespace every manifest is in, if they share one: only it need be listed.
fn one_namespace(manifests: &[DaemonSet]) -> Option<String> {
    let first = manifests.first()?.metadata.namespace.clone()?;
    manifests.iter().all(|ds| ds.metadata.namespace.as_ref() == Some(&first)).then_some(first)
}

fn answer(
    change: String,
    source: String,
    namespace: Option<String>,
    daemonset: Option<String>,
    outcome: simulate::Outcome,
) -> Answer {
    let looked_at =
        LookedAt { change, source, namespace, daemonset, daemonsets: outcome.daemonsets, nodes: outcome.nodes };
    Answer { looked_at, changes: outcome.changes, desired: outcome.desired, terminating: outcome.terminating }
}

async fn connect_client(cli: &Cli) -> Result<(kube::Client, String), Failure> {
    let config = connect::config(cli.scope.kubeconfig.as_deref(), cli.scope.context.as_deref())
        .await
        .map_err(cli::connect_failure)?;
    let source = format!("cluster {}", connect::server(&config));
    Ok((connect::client(config).await.map_err(cli::connect_failure)?, source))
}

fn snapshot_source(cli: &Cli) -> String {
    let files: Vec<String> = cli.scope.snapshot.iter().map(|f| f.display().to_string()).collect();
    format!("snapshot {}", files.join(", "))
}
