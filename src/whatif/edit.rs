//! `kubectl label` and `kubectl taint` on a node, with kubectl's syntax, checks and
//! messages, applied to a copy: the node as the API server would store it, including who
//! would own the changed fields (`managedFields`), which the reasons read. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use crate::k8s::slim::{FlatLabels, LabelAndTaintOwner, NodeTaintsSpec, SlimNode};
use crate::model::Timestamp;
use crate::rules::validation::{is_label_value, is_qualified_name};

/// A change kubectl would refuse, in kubectl's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EditError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, EditError> {
    Err(EditError(message.into()))
}

const KEY_RULE: &str = "a key is [prefix/]name: the name at most 63 characters of [A-Za-z0-9-_.], alphanumeric at both ends; the prefix a DNS subdomain";
const VALUE_RULE: &str = "a value is empty or at most 63 characters of [A-Za-z0-9-_.], alphanumeric at both ends";

/// The field managers kubectl writes as.
pub const LABEL_MANAGER: &str = "kubectl-label";
pub const TAINT_MANAGER: &str = "kubectl-taint";

/// Split kubectl's arguments into the nodes and the changes: every node comes first
/// (`GetResourcesAndPairs`). A leading `node`/`nodes`/`no` and `node/NAME` are read as
/// kubectl reads them, so a kubectl command line can be pasted.
pub fn split_args(args: &[String], is_change: impl Fn(&str) -> bool, what: &str) -> Result<Targets, EditError> {
    let mut nodes = Vec::new();
    let mut changes = Vec::new();
    for arg in args {
        if is_change(arg) {
            changes.push(arg.clone());
        } else if !changes.is_empty() {
            return refuse(format!("all resources must be specified before {what} changes: {arg}"));
        } else {
            nodes.push(arg.clone());
        }
    }
    if nodes.first().is_some_and(|first| ["node", "nodes", "no"].contains(&first.as_str())) {
        nodes.remove(0);
    }
    let mut nodes: Vec<String> = nodes
        .into_iter()
        .map(|n| match n.split_once('/') {
            Some(("node" | "nodes" | "no", name)) if !name.is_empty() => Ok(name.to_owned()),
            Some(_) => refuse(format!("{n:?}: what-if changes nodes only; name them as NODE or node/NODE")),
            None => Ok(n),
        })
        .collect::<Result<_, _>>()?;
    // A node named twice is changed once, as kubectl does.
    let mut seen = std::collections::HashSet::new();
    nodes.retain(|n| seen.insert(n.clone()));
    Ok(Targets { nodes, changes })
}

/// The nodes named on the command line and the changes to make to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Targets {
    pub nodes: Vec<String>,
    pub changes: Vec<String>,
}

/// `kubectl label`'s changes: `KEY=VALUE` sets, `KEY-` removes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelEdit {
    pub set: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

impl LabelEdit {
    /// What `kubectl label` takes as a change rather than a resource.
    pub fn is_change(arg: &str) -> bool {
        (arg.contains('=') && !arg.starts_with('=')) || (arg.ends_with('-') && arg != "-")
    }

    pub fn parse(specs: &[String]) -> Result<Self, EditError> {
        let mut edit = LabelEdit::default();
        for spec in specs {
            if spec.contains('=') {
                let parts: Vec<&str> = spec.split('=').collect();
                let [key, value] = parts[..] else { return refuse(format!("invalid label spec: {spec}")) };
                if !is_qualified_name(key) {
                    return refuse(format!("invalid label spec: {spec}: {KEY_RULE}"));
                }
                if !is_label_value(value) {
                    return refuse(format!("invalid label value: {spec:?}: {VALUE_RULE}"));
                }
                edit.set.insert(key.to_owned(), value.to_owned());
            } else if let Some(key) = spec.strip_suffix('-') {
                edit.remove.push(key.to_owned());
            } else {
                return refuse(format!("unknown label spec: {spec}"));
            }
        }
        if edit.set.is_empty() && edit.remove.is_empty() {
            return refuse("at least one label update is required");
        }
        if edit.remove.iter().any(|key| edit.set.contains_key(key)) {
            return refuse("can not both modify and remove a label in the same command");
        }
        Ok(edit)
    }

    /// The node after the change, as `manager` would write it at `now`. A label to remove
    /// that is not there is left out, as kubectl does (it says so, a warning, not an error).
    pub fn apply(
        &self,
        node: &SlimNode,
        overwrite: bool,
        manager: &str,
        now: Timestamp,
    ) -> Result<(SlimNode, Vec<String>), EditError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut labels: BTreeMap<String, String> =
            node.labels.iter().map(|(key, value)| (key.to_owned(), value.to_owned())).collect();
        if !overwrite {
            let taken: Vec<String> = self
                .set
                .iter()
                .filter_map(|(key, value)| {
                    let current = labels.get(key).filter(|current| *current != value)?;
                    Some(format!("'{key}' already has a value ({current}), and --overwrite is false"))
                })
                .collect();
            if !taken.is_empty() {
                return refuse(format!("node {name}: {}", taken.join(", ")));
            }
        }
        let mut warnings = Vec::new();
        for key in &self.remove {
            if labels.remove(key).is_none() {
                warnings.push(format!("node {name}: label {key:?} not found."));
            }
        }
        labels.extend(self.set.clone());
        let mut edited = node.clone();
        edited.labels = FlatLabels::from(&labels);
        if !self.set.is_empty() {
            let set: Vec<&str> = self.set.keys().map(String::as_str).collect();
            take_ownership(&mut edited, manager, now, |owner| owner.labels = owner.labels.edited(&set, |_| false));
            disown(&mut edited, manager, |owner| owner.labels = owner.labels.edited(&[], |key| set.contains(&key)));
        }
        Ok((edited, warnings))
    }
}

/// `kubectl taint`'s changes: `KEY[=VALUE]:EFFECT` adds, `KEY[:EFFECT]-` removes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaintEdit {
    pub add: Vec<Taint>,
    /// Key and, when given, effect.
    pub remove: Vec<(String, Option<String>)>,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl TaintEdit {
    /// What `kubectl taint` takes as a change rather than a resource.
    pub fn is_change(arg: &str) -> bool {
        arg.contains('=') || arg.contains(':') || arg.ends_with('-')
    }

    pub fn parse(specs: &[String]) -> Result<Self, EditError> {
        let mut edit = TaintEdit::default();
        for spec in specs {
            if let Some(removal) = spec.strip_suffix('-') {
                let taint = parse_taint(removal, spec)?;
                edit.remove.push((taint.key, Some(taint.effect).filter(|e| !e.is_empty())));
            } else {
                let taint = parse_taint(spec, spec)?;
                if taint.effect.is_empty() {
                    return refuse(format!("invalid taint spec: {spec}"));
                }
                if edit.add.iter().any(|t| t.key == taint.key && t.effect == taint.effect) {
                    return refuse(format!("duplicated taints with the same key and effect: {}", show(&taint)));
                }
                edit.add.push(taint);
            }
        }
        if edit.add.is_empty() && edit.remove.is_empty() {
            return refuse("at least one taint update is required");
        }
        let conflicts: Vec<String> = edit
            .add
            .iter()
            .filter(|t| {
                edit.remove.iter().any(|(key, effect)| *key == t.key && effect.as_ref().is_none_or(|e| *e == t.effect))
            })
            .map(show)
            .collect();
        if !conflicts.is_empty() {
            return refuse(format!(
                "can not both modify and remove the following taint(s) in the same command: {}",
                conflicts.join(", ")
            ));
        }
        Ok(edit)
    }

    /// The node after the change, as `manager` would write it at `now`: the new taints
    /// first, then the old ones they do not replace (kubectl's `reorganizeTaints`).
    pub fn apply(
        &self,
        node: &SlimNode,
        overwrite: bool,
        manager: &str,
        now: Timestamp,
    ) -> Result<SlimNode, EditError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let old = node.taints();
        let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
        if !overwrite {
            let existing: Vec<&str> =
                self.add.iter().filter(|t| old.iter().any(|o| same(o, t))).map(|t| t.key.as_str()).collect();
            if !existing.is_empty() {
                return refuse(format!(
                    "node {name} already has [{}] taint(s) with same effect(s) and --overwrite is false",
                    existing.join(" ")
                ));
            }
        }
        let mut taints = self.add.clone();
        taints.extend(old.iter().filter(|o| !self.add.iter().any(|t| same(o, t))).cloned());
        for (key, effect) in &self.remove {
            let before = taints.len();
            taints.retain(|t| !(t.key == *key && effect.as_ref().is_none_or(|e| *e == t.effect)));
            if taints.len() == before {
                let shown = effect.as_ref().map_or_else(|| key.clone(), |e| format!("{key}:{e}"));
                return refuse(format!("taint {shown:?} not found"));
            }
        }
        let mut edited = node.clone();
        edited.spec = Some(NodeTaintsSpec { taints: Some(taints) });
        // The taint list is atomic: whoever writes it owns all of it.
        take_ownership(&mut edited, manager, now, |owner| owner.taints = true);
        disown(&mut edited, manager, |owner| owner.taints = false);
        Ok(edited)
    }
}

/// `kubectl taint`'s `parseTaint`: `KEY`, `KEY:EFFECT` or `KEY=VALUE:EFFECT`.
fn parse_taint(text: &str, spec: &str) -> Result<Taint, EditError> {
    let parts: Vec<&str> = text.split(':').collect();
    let (key, value, effect) = match parts[..] {
        [key] => (key, "", ""),
        [key_value, effect] => {
            if !EFFECTS.contains(&effect) {
                return refuse(format!("invalid taint effect: {effect}, unsupported taint effect"));
            }
            let kv: Vec<&str> = key_value.split('=').collect();
            match kv[..] {
                [key] => (key, "", effect),
                [key, value] if is_label_value(value) => (key, value, effect),
                [_, _] => return refuse(format!("invalid taint spec: {spec}, {VALUE_RULE}")),
                _ => return refuse(format!("invalid taint spec: {spec}")),
            }
        }
        _ => return refuse(format!("invalid taint spec: {spec}")),
    };
    if !is_qualified_name(key) {
        return refuse(format!("invalid taint spec: {spec}, {KEY_RULE}"));
    }
    let value = Some(value.to_owned()).filter(|v| !v.is_empty());
    Ok(Taint { key: key.into(), value, effect: effect.into(), time_added: None })
}

fn show(taint: &Taint) -> String {
    match &taint.value {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// `manager`'s Update entry, stamped `now`, with `own` added to what it owns: the API
/// server records an update this way.
fn take_ownership(node: &mut SlimNode, manager: &str, now: Timestamp, own: impl FnOnce(&mut LabelAndTaintOwner)) {
    let index = match node.owners.iter().position(|o| o.is_update_by(manager)) {
        Some(index) => index,
        None => {
            node.owners.push(LabelAndTaintOwner {
                manager: manager.into(),
                update: true,
                ..LabelAndTaintOwner::default()
            });
            node.owners.len() - 1
        }
    };
    let owner = &mut node.owners[index];
    owner.time = now;
    own(owner);
}

/// An update takes the fields it changes from every other manager; an entry left owning
/// neither labels nor taints no longer counts as an owner.
fn disown(node: &mut SlimNode, manager: &str, drop: impl Fn(&mut LabelAndTaintOwner)) {
    node.owners.iter_mut().filter(|o| !o.is_update_by(manager)).for_each(drop);
    node.owners.retain(LabelAndTaintOwner::owns_any);
}
