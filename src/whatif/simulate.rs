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
use crate::rules::eligibility::selector_matches;

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
    let names: Vec<Str> = current.iter().filter_map(|n| n.metadata.name.as_deref().map(Str::from)).collect();
    // The versions the edit read, so that before is what the edit was made on.
    for node in current {
        index.apply(Event::Apply(node))?;
    }
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
    let after = capture(index, &scope, &names);
    let mut outcome = diff(&scope, &names, &before, &after);
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
    let after = capture(index, &scope, &names);
    Ok(diff(&scope, &names, &before, &after))
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
    let labels = interner.labels(template_labels.into_iter().flatten());
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

/// One side of the change for one DaemonSet: `None` when it does not exist (yet).
struct Side {
    desired: usize,
    pairs: Vec<Pair>,
}

/// One (DaemonSet, node) pair.
struct Pair {
    fit: Fit,
    /// Why the node is skipped: the `daemonset_ineligible_nodes` reason and key.
    skip: Option<(&'static str, Str)>,
    pods: Vec<PodState>,
}

struct PodState {
    name: Str,
    uid: Uid,
    running: bool,
    /// The misscheduled pod's reason and key.
    verdict: Option<(&'static str, Str)>,
}

fn capture(index: &Index, scope: &[ObjectRef], nodes: &[Str]) -> Vec<Option<Side>> {
    scope.iter().map(|id| index.daemonset(&id.namespace, &id.name).map(|view| side(&view, nodes))).collect()
}

fn side(view: &DaemonSetView<'_>, nodes: &[Str]) -> Side {
    let verdicts: HashMap<&Uid, (&'static str, Str)> = view
        .misscheduled_pods()
        .into_iter()
        .map(|p| (&p.pod.uid, (p.classification.reason.as_str(), p.classification.key)))
        .collect();
    let pair = |node: &Str| {
        let skip = view.skip(node);
        let pods = view
            .pods_on(node)
            .into_iter()
            .map(|pod| PodState {
                name: pod.id.name.clone(),
                uid: pod.uid.clone(),
                running: pod.deletion.is_none(),
                verdict: verdicts.get(&pod.uid).cloned(),
            })
            .collect();
        Pair { fit: Fit::of(skip), skip: skip.map(|s| (s.reason().as_str(), s.shared_key())), pods }
    };
    Side { desired: view.eligible_nodes(), pairs: nodes.iter().map(pair).collect() }
}

fn diff(scope: &[ObjectRef], nodes: &[Str], before: &[Option<Side>], after: &[Option<Side>]) -> Outcome {
    let mut outcome = Outcome { daemonsets: scope.len(), nodes: nodes.len(), ..Outcome::default() };
    for ((id, before), after) in scope.iter().zip(before).zip(after) {
        let Some(after) = after else { continue };
        outcome.desired.push(Desired {
            namespace: id.namespace.to_string(),
            daemonset: id.name.to_string(),
            before: before.as_ref().map_or(0, |b| b.desired),
            after: after.desired,
        });
        for (i, node) in nodes.iter().enumerate() {
            let was = before.as_ref().map(|b| &b.pairs[i]);
            let now = &after.pairs[i];
            let fit = was.map_or(Fit::Stop, |p| p.fit);
            let row = |pod: &str, effect: Effect, (reason, key): (&str, Str)| Row {
                namespace: id.namespace.to_string(),
                daemonset: id.name.to_string(),
                node: node.to_string(),
                pod: pod.to_owned(),
                effect,
                reason: reason.to_owned(),
                key: key.to_string(),
            };
            if now.pods.is_empty() {
                if let Some(effect) = effect(fit, now.fit, false) {
                    let why =
                        was.map_or((NEW_DAEMONSET, Str::from("")), |p| p.skip.clone().unwrap_or(("", Str::from(""))));
                    outcome.changes.push(row("", effect, why));
                }
                continue;
            }
            // A pod already terminating is no change: the controller neither deletes it
            // again nor creates one beside it until it is gone. It is named apart.
            let Some(effect) = effect(fit, now.fit, true) else { continue };
            for pod in now.pods.iter().filter(|p| !p.running) {
                outcome.terminating.push(Terminating {
                    namespace: id.namespace.to_string(),
                    daemonset: id.name.to_string(),
                    node: node.to_string(),
                    pod: pod.name.to_string(),
                });
            }
            for pod in now.pods.iter().filter(|p| p.running) {
                let earlier = was.and_then(|p| p.pods.iter().find(|b| b.uid == pod.uid));
                let verdict = match effect {
                    Effect::Recover => {
                        earlier.and_then(|p| p.verdict.clone()).or_else(|| was.and_then(|p| p.skip.clone()))
                    }
                    _ => pod.verdict.clone().or_else(|| now.skip.clone()),
                };
                outcome.changes.push(row(&pod.name, effect, verdict.unwrap_or(("", Str::from("")))));
            }
        }
    }
    outcome.desired.sort_by(|a, b| (&a.namespace, &a.daemonset).cmp(&(&b.namespace, &b.daemonset)));
    outcome.changes.sort_by(|a, b| {
        (&a.namespace, &a.daemonset, &a.node, &a.pod).cmp(&(&b.namespace, &b.daemonset, &b.node, &b.pod))
    });
    outcome
}
