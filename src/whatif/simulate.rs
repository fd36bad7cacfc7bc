//! A change run through the index, as the exporter would see it happen: each pair the
//! change can move is read before and after from the index's own views (eligibility,
//! claimed pods, the reasons), and `effect` says what the controller would do. The index
//! is the caller's copy; nothing is written anywhere else.

use std::collections::HashMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::runtime::watcher::Event;

use super::effect::{Effect, Fit, effect};
use super::{Desired, Row, Terminating, WhatIfError};
use crate::index::{DaemonSetView, Index};
use crate::k8s::convert;
use crate::k8s::slim::SlimNode;
use crate::model::interner::Interner;
use crate::model::{ObjectRef, Str, Uid};
use crate::report::explain::Selection;
use crate::rules::eligibility::{Skip, selector_matches};

/// What a change does: the rows, and desired before and after per DaemonSet it concerns.
#[derive(Debug, Default)]
pub struct Outcome {
    pub changes: Vec<Row>,
    pub desired: Vec<Desired>,
    pub terminating: Vec<Terminating>,
    /// The DaemonSets looked at.
    pub daemonsets: usize,
    /// The nodes looked at.
    pub nodes: usize,
}

/// The reason a `create` row gives for a DaemonSet that does not exist yet.
pub const NEW_DAEMONSET: &str = "daemonset_created";

/// `kubectl label` or `kubectl taint` on `current` (the nodes as the edit read them),
/// giving `edited`, for the DaemonSets `selection` covers.
pub fn nodes(
    index: &mut Index,
    selection: &Selection,
    current: Vec<SlimNode>,
    edited: Vec<SlimNode>,
) -> Result<Outcome, WhatIfError> {
    // The versions the edit read, so that before is what the edit was made on.
    for node in current {
        index.apply(Event::Apply(node))?;
    }
    edited_nodes(index, selection, edited)
}

/// The nodes as the index holds them, changed to `edited` (the admission guard's question:
/// the index's copy is the "before").
pub fn edited_nodes(index: &mut Index, selection: &Selection, edited: Vec<SlimNode>) -> Result<Outcome, WhatIfError> {
    let names: Vec<Str> = edited.iter().filter_map(|n| n.metadata.name.as_deref().map(Str::from)).collect();
    let scope: Vec<ObjectRef> = index
        .daemonsets()
        .iter()
        .filter(|v| selection.covers(&v.ds.id.namespace, &v.ds.id.name))
        .map(|v| v.ds.id.clone())
        .collect();
    let before = capture(index, &scope, &names);
    for node in edited {
        index.apply(Event::Apply(node))?;
    }
    let mut outcome = diff(index, &scope, &names, &before);
    outcome.desired.retain(|d| d.before != d.after || outcome.changes.iter().any(|r| r.concerns(d)));
    Ok(outcome)
}

/// `kubectl apply -f` of `manifests`, each with its namespace set.
pub fn daemonsets(index: &mut Index, manifests: Vec<DaemonSet>) -> Result<Outcome, WhatIfError> {
    let mut scope: Vec<ObjectRef> = Vec::new();
    let mut placed = Vec::new();
    for mut manifest in manifests {
        let id = check(index, &mut manifest, &scope)?;
        scope.push(id);
        placed.push(manifest);
    }
    let names: Vec<Str> = index.node_names().into_iter().cloned().collect();
    let before = capture(index, &scope, &names);
    for manifest in placed {
        index.apply(Event::Apply(manifest))?;
    }
    Ok(diff(index, &scope, &names, &before))
}

/// Give `manifest` the identity of the DaemonSet it would update (or a new one), and
/// refuse what the API server would refuse.
fn check(index: &Index, manifest: &mut DaemonSet, seen: &[ObjectRef]) -> Result<ObjectRef, WhatIfError> {
    let meta = &manifest.metadata;
    let (Some(namespace), Some(name)) = (meta.namespace.clone(), meta.name.clone()) else {
        return Err(WhatIfError::Manifest("a DaemonSet without metadata.name".into()));
    };
    let what = format!("DaemonSet {namespace}/{name}");
    let id = ObjectRef { namespace: namespace.as_str().into(), name: name.as_str().into() };
    if seen.contains(&id) {
        return Err(WhatIfError::Manifest(format!("{what} is given twice")));
    }
    let existing = index.daemonset(&namespace, &name).map(|v| (v.ds.uid.clone(), v.ds.selector.clone()));
    manifest.metadata.uid =
        Some(existing.as_ref().map_or_else(|| format!("what-if/{namespace}/{name}"), |e| e.0.to_string()));
    manifest.metadata.deletion_timestamp = None;
    let mut interner = Interner::default();
    let converted = convert::daemonset(manifest, &mut interner)?;
    let template_labels =
        manifest.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.as_ref());
    let labels = interner.labels(template_labels.into_iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())));
    if !converted.is_synced_by_controller() || !selector_matches(&converted.selector, &labels) {
        return Err(WhatIfError::Manifest(format!(
            "{what}: spec.selector is missing, invalid or does not match spec.template.metadata.labels; the API server would refuse it"
        )));
    }
    if let Some((_, selector)) = existing
        && selector != converted.selector
    {
        return Err(WhatIfError::Manifest(format!(
            "{what}: spec.selector differs from the DaemonSet's, and it is immutable: the API server would refuse the apply"
        )));
    }
    Ok(id)
}

/// The reason and key a row gives.
type Why = (&'static str, Str);

/// One DaemonSet before the change: only what the diff needs, so that a change to every
/// node of a large cluster keeps a few bytes per pair, not the pods.
struct Before {
    desired: usize,
    /// Per node asked about: the controller's answer, and why it skips the node.
    pairs: Vec<(Fit, Option<Why>)>,
    /// The misscheduled pods' reason and key: what a pod that recovers had.
    verdicts: HashMap<Uid, Why>,
}

/// Each DaemonSet of `scope` before the change; `None` for one that does not exist yet.
fn capture(index: &Index, scope: &[ObjectRef], nodes: &[Str]) -> Vec<Option<Before>> {
    let before = |view: DaemonSetView<'_>| Before {
        desired: view.eligible_nodes(),
        pairs: nodes.iter().map(|node| (Fit::of(view.skip(node)), why_skipped(view.skip(node)))).collect(),
        verdicts: verdicts(&view, nodes),
    };
    scope.iter().map(|id| index.daemonset(&id.namespace, &id.name).map(before)).collect()
}

fn why_skipped(skip: Option<&Skip>) -> Option<Why> {
    skip.map(|s| (s.reason().as_str(), s.shared_key()))
}

/// The reasons of the misscheduled pods on `nodes`: a change to one node classifies that
/// node's pods, not every misscheduled pod of the cluster.
fn verdicts(view: &DaemonSetView<'_>, nodes: &[Str]) -> HashMap<Uid, Why> {
    let misscheduled = if nodes.len() >= view.misscheduled_node_count() {
        view.misscheduled_pods()
    } else {
        view.misscheduled_pods_on(nodes)
    };
    let verdicts = misscheduled.into_iter();
    verdicts.map(|p| (p.pod.uid.clone(), (p.classification.reason.as_str(), p.classification.key))).collect()
}

/// The index now (after the change) against `before`, pair by pair.
fn diff(index: &Index, scope: &[ObjectRef], nodes: &[Str], before: &[Option<Before>]) -> Outcome {
    let mut outcome = Outcome { daemonsets: scope.len(), nodes: nodes.len(), ..Outcome::default() };
    let nothing = || ("", Str::from(""));
    for (id, before) in scope.iter().zip(before) {
        let Some(view) = index.daemonset(&id.namespace, &id.name) else { continue };
        outcome.desired.push(Desired {
            namespace: id.namespace.to_string(),
            daemonset: id.name.to_string(),
            before: before.as_ref().map_or(0, |b| b.desired),
            after: view.eligible_nodes(),
        });
        let mut after_verdicts = None;
        for (i, node) in nodes.iter().enumerate() {
            let (fit, why_before) =
                before.as_ref().map_or((Fit::Stop, None), |b| (b.pairs[i].0, b.pairs[i].1.as_ref()));
            let skip = view.skip(node);
            let now = Fit::of(skip);
            // The same answer before and after moves nothing (`effect` agrees): most pairs stop here.
            if now == fit {
                continue;
            }
            let row = |pod: &str, effect: Effect, (reason, key): Why| Row {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                node: node.to_string(),
                pod: pod.to_owned(),
                effect,
                reason: reason.to_owned(),
                key: key.to_string(),
            };
            let pods = view.pods_on(node);
            if pods.is_empty() {
                if let Some(effect) = effect(fit, now, false) {
                    let why = match before {
                        None => (NEW_DAEMONSET, Str::from("")),
                        Some(_) => why_before.cloned().unwrap_or_else(nothing),
                    };
                    outcome.changes.push(row("", effect, why));
                }
                continue;
            }
            // A pod already terminating is no change: the controller neither deletes it
            // again nor creates one beside it until it is gone. It is named apart.
            let Some(effect) = effect(fit, now, true) else { continue };
            for pod in pods.iter().filter(|p| p.deletion().is_some()) {
                outcome.terminating.push(Terminating {
                    namespace: id.namespace.to_string(),
                    daemonset: id.name.to_string(),
                    node: node.to_string(),
                    pod: pod.id.name(),
                });
            }
            for pod in pods.iter().filter(|p| p.deletion().is_none()) {
                let verdict = match effect {
                    Effect::Recover => {
                        let had = before.as_ref().and_then(|b| b.verdicts.get(&pod.uid));
                        had.or(why_before).cloned()
                    }
                    _ => {
                        let verdicts = after_verdicts.get_or_insert_with(|| verdicts(&view, nodes));
                        verdicts.get(&pod.uid).cloned().or_else(|| why_skipped(skip))
                    }
                };
                outcome.changes.push(row(&pod.id.name(), effect, verdict.unwrap_or_else(nothing)));
            }
        }
    }
    outcome.desired.sort_by(|a, b| (&a.namespace, &a.daemonset).cmp(&(&b.namespace, &b.daemonset)));
    outcome.changes.sort_by(|a, b| {
        (&a.namespace, &a.daemonset, &a.node, &a.pod).cmp(&(&b.namespace, &b.daemonset, &b.node, &b.pod))
    });
    outcome
}
