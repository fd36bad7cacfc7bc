//! The admission guard: what a change to a node or a DaemonSet would do to daemon pods,
//! said to whoever makes it before the API server stores it, and refused where a
//! DaemonSet asks for that.
//!
//! ```text
//!   AdmissionReview ─review─▶ Request ─Change::of─▶ Touched ─(the edge copies that part of
//!   the index: Index::excerpt)─▶ answer: whatif's simulate on the copy, rules::admission's
//!   decision, the words (warning) ─▶ Response ─review─▶ AdmissionReview
//! ```
//! The "before" is the exporter's index, not the request's `oldObject`: what the index holds
//! is what the controller acts on. Pure; `http/webhook` is the edge.

pub mod review;
pub mod warning;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use serde::Deserialize as _;

use self::review::{Request, Response};
use self::warning::{Bypass, PREFIX};
use crate::index::{Index, Touched};
use crate::k8s::slim::SlimNode;
use crate::model::{ObjectRef, Str};
use crate::report::explain::Selection;
use crate::rules::admission::{self, Decision};
use crate::whatif::Row;
use crate::whatif::simulate::{self, Outcome};

/// A request's object that the guard cannot read as the resource it claims to be.
#[derive(Debug, thiserror::Error)]
#[error("the request's object is not a valid {kind}: {source}")]
pub struct ChangeError {
    kind: &'static str,
    source: serde_json::Error,
}

/// What a request changes, as far as daemon pods go.
#[derive(Debug)]
pub enum Change {
    /// A node's labels or taints (UPDATE of `nodes`).
    Node { name: Str, after: Box<SlimNode>, bypass: Option<String> },
    /// A DaemonSet's placement (CREATE or UPDATE of `apps` `daemonsets`).
    DaemonSet { id: ObjectRef, after: Box<DaemonSet>, bypass: Option<String> },
    /// Anything else: the webhook's rules should not send it, and nothing is said.
    Other,
}

impl Change {
    pub fn of(request: &Request) -> Result<Change, ChangeError> {
        let resource = (request.resource.group.as_str(), request.resource.resource.as_str());
        let whole_object = request.sub_resource.is_empty();
        let change = match (resource, request.operation.as_str()) {
            (("", "nodes"), "UPDATE") if whole_object => {
                let after =
                    SlimNode::deserialize(&request.object).map_err(|source| ChangeError { kind: "Node", source })?;
                let name = after.metadata.name.clone().unwrap_or_else(|| request.name.clone());
                let bypass = admission::bypass(after.metadata.annotations.as_ref()).map(str::to_owned);
                Change::Node { name: name.as_str().into(), after: Box::new(after), bypass }
            }
            (("apps", "daemonsets"), "CREATE" | "UPDATE") if whole_object => {
                let mut after = DaemonSet::deserialize(&request.object)
                    .map_err(|source| ChangeError { kind: "DaemonSet", source })?;
                // A CREATE's object may leave the namespace to the request.
                let meta = &mut after.metadata;
                let namespace = meta.namespace.get_or_insert_with(|| request.namespace.clone()).clone();
                let name = meta.name.clone().unwrap_or_else(|| request.name.clone());
                let bypass = admission::bypass(meta.annotations.as_ref()).map(str::to_owned);
                let id = ObjectRef { namespace: namespace.as_str().into(), name: name.as_str().into() };
                Change::DaemonSet { id, after: Box::new(after), bypass }
            }
            _ => Change::Other,
        };
        Ok(change)
    }

    /// The part of the index the change can move, for `Index::excerpt`.
    pub fn touched(&self) -> Option<Touched<'_>> {
        match self {
            Change::Node { name, .. } => Some(Touched::Nodes(std::slice::from_ref(name))),
            Change::DaemonSet { id, .. } => Some(Touched::DaemonSet { namespace: &id.namespace, name: &id.name }),
            Change::Other => None,
        }
    }

    /// The `resource` label of the guard's self-metrics.
    pub fn resource(&self) -> &'static str {
        match self {
            Change::Node { .. } => RESOURCES[0],
            Change::DaemonSet { .. } => RESOURCES[1],
            Change::Other => "other",
        }
    }
}

/// The resources the webhook is registered for, as the `resource` label spells them.
pub const RESOURCES: [&str; 2] = ["nodes", "daemonsets"];

/// What the operator configured.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Users whose changes are warned about, never refused (`--guard-exempt-user`).
    pub exempt_users: Vec<String>,
}

/// How a review ended, for the self-metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Let through with nothing to say.
    Allowed,
    /// Let through with warnings.
    Warned,
    Denied,
    /// Let through unchecked: the index has not synced.
    Unsynced,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [Verdict::Allowed, Verdict::Warned, Verdict::Denied, Verdict::Unsynced];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Warned => "warned",
            Verdict::Denied => "denied",
            Verdict::Unsynced => "unsynced",
        }
    }
}

/// The answer while the index is not synced: let through, saying it was not checked.
pub fn unsynced(waiting_for: &[&str]) -> (Verdict, Response) {
    let why = format!(
        "the exporter has not synced its caches yet ({}); this change's effect on daemon pods is unknown",
        waiting_for.join(", ")
    );
    (Verdict::Unsynced, not_checked(why).1)
}

/// Let through, saying why it was not checked: the guard never stands in the way of what
/// it cannot judge, and never stays silent about it either.
pub fn not_checked(why: impl std::fmt::Display) -> (Verdict, Response) {
    let warning = format!("{PREFIX}not checked: {why}");
    (Verdict::Warned, Response { allowed: true, warnings: vec![warning], ..Response::default() })
}

/// The answer to `change`, made by `request`, from `excerpt` (the index's copy of what the
/// change touches, which the simulation changes).
pub fn answer(mut excerpt: Index, change: Change, request: &Request, policy: &Policy) -> (Verdict, Response) {
    // The protection the DaemonSets have now, not what the change would give them.
    let protected: Vec<ObjectRef> =
        excerpt.daemonsets().iter().filter(|v| v.ds.refuses_disruption).map(|v| v.ds.id.clone()).collect();
    let (simulated, bypass, how) = match change {
        Change::Other => return (Verdict::Allowed, Response { allowed: true, ..Response::default() }),
        Change::Node { name, after, bypass } => {
            if !excerpt.has_node(&name) {
                return not_checked(format!(
                    "node {name} is not in the exporter's index yet; this change's effect on daemon pods is unknown"
                ));
            }
            (
                simulate::edited_nodes(&mut excerpt, &Selection::default(), vec![*after]),
                bypass,
                Bypass::Node(name.to_string()),
            )
        }
        Change::DaemonSet { after, bypass, .. } => {
            (simulate::daemonsets(&mut excerpt, vec![*after]), bypass, Bypass::DaemonSet)
        }
    };
    let outcome: Outcome = match simulated {
        Ok(outcome) => outcome,
        Err(error) => return not_checked(error),
    };
    let is_protected = |r: &Row| protected.iter().any(|id| *id.namespace == *r.namespace && *id.name == *r.daemonset);
    let disrupted: Vec<&Row> = outcome.changes.iter().filter(|r| r.effect.disrupts() && is_protected(r)).collect();
    let exempt = policy.exempt_users.contains(&request.user_info.username);
    let mut response =
        Response { allowed: true, warnings: warning::effect_lines(&outcome.changes), ..Response::default() };
    match admission::decide(!disrupted.is_empty(), bypass.as_deref(), exempt) {
        Decision::Allow => {}
        Decision::Bypassed(why) => {
            response.warnings.push(format!("{PREFIX}not refused: {} says {why:?}", admission::BYPASS_ANNOTATION));
            if !request.dry_run {
                response.audit = BTreeMap::from([("bypass".to_owned(), why.to_owned())]);
            }
        }
        Decision::Exempt => response
            .warnings
            .push(format!("{PREFIX}not refused: user {} is exempt from the guard", request.user_info.username)),
        Decision::Refuse => {
            response.allowed = false;
            response.refusal = Some(warning::refusal(&disrupted, &how));
        }
    }
    let verdict = match (response.allowed, response.warnings.is_empty()) {
        (false, _) => Verdict::Denied,
        (true, false) => Verdict::Warned,
        (true, true) => Verdict::Allowed,
    };
    (verdict, response)
}
