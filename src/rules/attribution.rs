//! Who made the change: the field manager that wrote the label or taint behind a
//! misscheduled pod (`kubectl-label`, `nfd-master`, `cluster-autoscaler`…).
//!
//! A node's `managedFields` name one owner per label key and one for the whole taint
//! list (an atomic list: whoever writes it last owns it). That answers "who set this"
//! but not "who removed that label", nor "who added this taint" once someone else has
//! rewritten the list since. So the index keeps, per node, what it saw happen
//! (`carry_over`), and the lookups here read both.

use crate::model::{FieldOwner, Node, Placement, Str};

/// node-feature-discovery's field managers (`--nfd-managers` replaces them).
pub const DEFAULT_NFD_MANAGERS: [&str; 3] = ["nfd-master", "nfd-worker", "nfd-topology-updater"];

#[derive(Clone, Debug)]
pub struct NfdManagers(Vec<String>);

impl Default for NfdManagers {
    fn default() -> Self {
        Self(DEFAULT_NFD_MANAGERS.map(String::from).to_vec())
    }
}

impl NfdManagers {
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self(names.into_iter().map(Into::into).filter(|n: &String| !n.trim().is_empty()).collect())
    }

    pub fn contains(&self, manager: &str) -> bool {
        self.0.iter().any(|m| m == manager)
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }
}

/// The newest of the owners matching `owns`: shared ownership is possible with
/// server-side apply; the latest writer is the likelier author.
fn newest(owners: &[FieldOwner], owns: impl Fn(&FieldOwner) -> bool) -> Option<&Str> {
    owners.iter().filter(|o| owns(o)).max_by_key(|o| o.time).map(|o| &o.owns.manager)
}

fn taint_list_owner(node: &Node) -> Option<&Str> {
    newest(&node.managers.owners, |o| o.owns.taints)
}

fn label_owner<'a>(node: &'a Node, key: &str) -> Option<&'a Str> {
    newest(&node.managers.owners, |o| o.owns.labels.iter().any(|k| **k == *key))
}

fn find<'a>(pairs: &'a [(Str, Str)], key: &str) -> Option<&'a Str> {
    pairs.iter().find(|(k, _)| **k == *key).map(|(_, manager)| manager)
}

/// Who added the taint `key`: seen live, or else the taint list's owner.
pub fn taint_manager<'a>(node: &'a Node, key: &str) -> Option<&'a Str> {
    find(node.managers.taint_added_by(), key).or_else(|| taint_list_owner(node))
}

/// Who set the label `key` (its owner), or, when it is gone, who removed it (seen live).
pub fn label_manager<'a>(node: &'a Node, key: &str) -> Option<&'a Str> {
    if node.labels.contains_key(key) { label_owner(node, key) } else { find(node.managers.label_removed_by(), key) }
}

/// The manager that wrote this update: an owner entry that is new or has a new time.
/// The API server stamps an entry only when its manager set or changed a field, so a
/// pure removal has no writer here (`None`), nor has a write in the same second.
fn writer<'a>(old: &[FieldOwner], new: &'a [FieldOwner]) -> Option<&'a Str> {
    new.iter()
        .filter(|n| !old.iter().any(|o| o.owns.manager == n.owns.manager && o.time == n.time))
        .max_by_key(|n| n.time)
        .map(|n| &n.owns.manager)
}

/// Carry what was seen from `old` into `new`, the next version of the same node.
/// `selected` says whether some DaemonSet selects on a label key: only those removals
/// are remembered, which bounds the memory by what can misschedule a pod.
pub fn carry_over(old: &Node, new: &mut Node, selected: impl Fn(&str) -> bool) {
    let writer = writer(&old.managers.owners, &new.managers.owners).cloned();
    let list_owner = taint_list_owner(new).cloned();

    // Each taint's author, kept only where it differs from the list owner (the default).
    let mut taint_added_by = Vec::new();
    for taint in &new.taints {
        let was_there = old.taints.iter().any(|t| t.key == taint.key);
        let by =
            if was_there { taint_manager(old, &taint.key).cloned() } else { list_owner.clone().or(writer.clone()) };
        if let Some(by) = by.filter(|by| Some(by) != list_owner.as_ref()) {
            taint_added_by.push((taint.key.clone(), by));
        }
    }

    let mut label_removed_by: Vec<(Str, Str)> =
        old.managers.label_removed_by().iter().filter(|(key, _)| !new.labels.contains_key(key)).cloned().collect();
    for key in old.labels.keys().filter(|k| !new.labels.contains_key(k) && selected(k)) {
        // The remover, or, if it left no trace, the label's last owner.
        if let Some(by) = writer.clone().or_else(|| label_owner(old, key).cloned()) {
            label_removed_by.retain(|(k, _)| k != key);
            label_removed_by.push((key.clone(), by));
        }
    }

    new.managers.set_seen(taint_added_by, label_removed_by);
}

/// Whether a template's nodeSelector or required node affinity names the label `key`.
pub fn selects_label(placement: &Placement, key: &str) -> bool {
    placement.node_selector.iter().any(|(k, _)| **k == *key)
        || placement
            .required_terms
            .iter()
            .flatten()
            .flat_map(|term| &term.match_expressions)
            .any(|requirement| *requirement.key == *key)
}
