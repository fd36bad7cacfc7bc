//! What an answer looked at. "No misscheduled daemon pods" is true only of what was read, so
//! every explanation names its source, its namespace and DaemonSet, how much it checked and
//! when, and a filter that names nothing is an error, not an empty answer.

use serde::{Deserialize, Serialize};

use crate::model::Timestamp;

/// Which DaemonSets an explanation covers: the `/explain` and `/` query, and the
/// `explain` and `kubectl misschedule` flags, which send it as that query to an exporter.
/// Unknown query parameters are refused, so a typo is not read as "all".
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Only this namespace; none or empty (as an HTML form sends) means all.
    pub namespace: Option<String>,
    /// Only DaemonSets of this name.
    pub daemonset: Option<String>,
}

impl Selection {
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|s| !s.is_empty())
    }

    pub fn daemonset(&self) -> Option<&str> {
        self.daemonset.as_deref().filter(|s| !s.is_empty())
    }

    pub fn covers(&self, namespace: &str, name: &str) -> bool {
        self.namespace().is_none_or(|ns| ns == namespace) && self.daemonset().is_none_or(|ds| ds == name)
    }

    /// As a URL query string (`namespace=…&daemonset=…`; empty for everything).
    pub fn to_query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(ns) = self.namespace() {
            query.append_pair("namespace", ns);
        }
        if let Some(ds) = self.daemonset() {
            query.append_pair("daemonset", ds);
        }
        query.finish()
    }
}

/// Where an index came from and what it holds: the caller's, since the index cannot know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// `cluster SERVER` or `snapshot FILE, …`.
    pub source: String,
    /// The namespaces whose DaemonSets were read; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Read once (a list, a snapshot) rather than watched: the nodes a DaemonSet lost are
    /// unknown to it, since a pod the controller deleted leaves nothing to read.
    pub read_once: bool,
    /// When the watch began: what happened before is unknown to it (a node lost then).
    pub watching_since: Option<Timestamp>,
}

impl Origin {
    /// A source watched as it changes: an exporter, `kubectl misschedule --watch`.
    pub fn watched(source: impl Into<String>, namespaces: Vec<String>) -> Self {
        Self { source: source.into(), namespaces, read_once: false, watching_since: None }
    }

    /// The watch began at `at`.
    pub fn since(self, at: Timestamp) -> Self {
        Self { watching_since: Some(at), ..self }
    }

    /// A source read once: a one-shot list, a snapshot.
    pub fn read_once(source: impl Into<String>, namespaces: Vec<String>) -> Self {
        Self { read_once: true, ..Self::watched(source, namespaces) }
    }

    /// A namespace this index never read cannot be answered for, however empty it looks.
    pub fn check(&self, selection: &Selection) -> Result<(), ScopeError> {
        match selection.namespace() {
            Some(ns) if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == ns) => {
                Err(ScopeError::NamespaceNotRead {
                    namespace: ns.to_owned(),
                    origin: self.source.clone(),
                    read: self.namespaces.join(", "),
                })
            }
            _ => Ok(()),
        }
    }

    /// Whether DaemonSets outside `selection` were read, so that their count means something.
    pub fn reads_beyond(&self, selection: &Selection) -> bool {
        selection.daemonset().is_some()
            || match selection.namespace() {
                None => false,
                Some(ns) => self.namespaces.is_empty() || self.namespaces.iter().any(|n| n != ns),
            }
    }
}

/// A filter that names what is not there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("namespace {namespace} was not read: {origin} holds only {read}")]
    NamespaceNotRead { namespace: String, origin: String, read: String },
    #[error("daemonsets.apps {name:?} not found {scope} ({origin})")]
    DaemonSetNotFound { name: String, scope: String, origin: String },
    #[error("namespaces {namespace:?} not found ({origin})")]
    NamespaceNotFound { namespace: String, origin: String },
}

/// What the answer covers, as `/explain`, `-o json` and `-o yaml` carry it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookedAt {
    /// `cluster SERVER`, `snapshot FILE, …`, or `exporter NAMESPACE/SERVICE` (read from it).
    pub source: String,
    /// The namespace of the DaemonSets (comma-separated when several were read); none
    /// means every namespace.
    pub namespace: Option<String>,
    pub daemonset: Option<String>,
    /// How many DaemonSets the answer covers, and the nodes they were checked against.
    pub daemonsets: usize,
    pub nodes: usize,
    /// Misscheduled nodes of DaemonSets the selection left out, counted as
    /// `status.numberMisscheduled` counts them; none when those were not read.
    pub misscheduled_elsewhere: Option<usize>,
    /// When the answer was computed, RFC 3339.
    pub as_of: String,
    /// What makes the answer doubtful: each watch that is failing (the answer is then the
    /// last known state), in one line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// When the watching source began to watch, RFC 3339: a node lost before then, or
    /// while an exporter was restarting, is not in the answer. None when read once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watching_since: Option<String>,
    /// The source was read once, so lost nodes are unknown to it ([`Origin::read_once`]).
    /// Said in the tables and on the page; the JSON shape stays as it is, and its `source`
    /// (`cluster …` from a one-shot command, `snapshot …`) tells the same.
    #[serde(skip)]
    pub read_once: bool,
}

impl LookedAt {
    /// `in namespace default`, `in DaemonSet default/agent`, `in every namespace`.
    pub fn scope(&self) -> String {
        match (self.namespace.as_deref(), self.daemonset.as_deref()) {
            (Some(ns), Some(ds)) => format!("in DaemonSet {ns}/{ds}"),
            (None, Some(ds)) => format!("in DaemonSets named {ds} in any namespace"),
            (Some(ns), None) if ns.contains(',') => format!("in namespaces {ns}"),
            (Some(ns), None) => format!("in namespace {ns}"),
            (None, None) => "in any namespace".to_owned(),
        }
    }

    /// A named DaemonSet that the answer does not cover is not there.
    pub fn check(&self) -> Result<(), ScopeError> {
        match self.daemonset.as_deref() {
            Some(name) if self.daemonsets == 0 => Err(ScopeError::DaemonSetNotFound {
                name: name.to_owned(),
                scope: match self.namespace.as_deref() {
                    Some(ns) => format!("in namespace {ns}"),
                    None => "in any namespace".to_owned(),
                },
                origin: self.source.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Why an answer read once lists no lost node, and who would know: none when it
    /// watched, or checked no DaemonSet.
    pub fn lost_unknown(&self) -> Option<String> {
        if !self.read_once || self.daemonsets == 0 {
            return None;
        }
        let look = if self.source.starts_with("snapshot") { "a snapshot" } else { "one look at the cluster" };
        Some(format!(
            "Lost nodes: unknown to {look}, where a node whose daemon pod the controller deleted looks like one the \
             DaemonSet never wanted; an exporter watching the cluster remembers them \
             (kubectl misschedule --from-exporter NAMESPACE/SERVICE)."
        ))
    }

    /// The source, and since when it has watched: `cluster https://…, watched since …`.
    pub fn source_line(&self) -> String {
        match &self.watching_since {
            Some(since) => format!("{}, watched since {since}", self.source),
            None => self.source.clone(),
        }
    }

    /// What an empty answer says, naming what it looked at:
    /// `No misscheduled daemon pods in namespace default: 2 DaemonSets on 5 nodes checked
    /// (cluster https://…). 3 are misscheduled in other namespaces: use -A.`
    pub fn all_clear(&self) -> String {
        let scope = self.scope();
        let mut line = if self.daemonsets == 0 {
            format!("No DaemonSets {scope} ({}).", self.source_line())
        } else {
            format!(
                "No misscheduled daemon pods {scope}: {} on {} checked ({}).",
                plural(self.daemonsets, "DaemonSet"),
                plural(self.nodes, "node"),
                self.source_line()
            )
        };
        if let Some(elsewhere @ 1..) = self.misscheduled_elsewhere {
            let (verb, hint) = match self.daemonset {
                Some(_) => ("in other DaemonSets", "leave out --daemonset"),
                None => ("in other namespaces", "use -A"),
            };
            let are = if elsewhere == 1 { "is" } else { "are" };
            line.push_str(&format!(" {elsewhere} {are} misscheduled {verb}: {hint}."));
        }
        line.push('\n');
        line
    }
}

pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looked_at(namespace: Option<&str>, daemonset: Option<&str>, daemonsets: usize) -> LookedAt {
        LookedAt {
            source: "cluster https://k8s:6443".into(),
            namespace: namespace.map(Into::into),
            daemonset: daemonset.map(Into::into),
            daemonsets,
            nodes: 5,
            misscheduled_elsewhere: None,
            as_of: "2026-11-25T00:00:00Z".into(),
            warnings: vec![],
            read_once: false,
            watching_since: None,
        }
    }

    #[test]
    fn a_watched_answer_says_since_when() {
        let watched = LookedAt { watching_since: Some("2026-11-25T00:00:00Z".into()), ..looked_at(None, None, 2) };
        assert_eq!(
            watched.all_clear(),
            "No misscheduled daemon pods in any namespace: 2 DaemonSets on 5 nodes checked \
             (cluster https://k8s:6443, watched since 2026-11-25T00:00:00Z).\n"
        );
        let json = serde_json::to_value(&watched).unwrap();
        assert_eq!(json["watching_since"], "2026-11-25T00:00:00Z");
        assert!(serde_json::to_value(looked_at(None, None, 2)).unwrap().get("watching_since").is_none());
    }

    #[test]
    fn a_selection_covers_what_it_names_and_travels_as_a_query() {
        let all = Selection::default();
        assert!(all.covers("ns", "agent"));
        assert_eq!(all.to_query(), "");
        // An empty value, as an HTML form sends it, means all.
        let blank = Selection { namespace: Some(String::new()), daemonset: Some(String::new()) };
        assert!(blank.covers("ns", "agent"));
        assert_eq!(blank.to_query(), "");
        let one = Selection { namespace: Some("kube system".into()), daemonset: Some("a&b".into()) };
        assert!(one.covers("kube system", "a&b"));
        assert!(!one.covers("kube system", "other"));
        assert!(!one.covers("default", "a&b"));
        assert_eq!(one.to_query(), "namespace=kube+system&daemonset=a%26b");
    }

    #[test]
    fn an_empty_answer_names_what_it_looked_at() {
        let default = looked_at(Some("default"), None, 2);
        assert_eq!(
            default.all_clear(),
            "No misscheduled daemon pods in namespace default: 2 DaemonSets on 5 nodes checked (cluster https://k8s:6443).\n"
        );
        let elsewhere = LookedAt { misscheduled_elsewhere: Some(3), ..default.clone() };
        assert!(elsewhere.all_clear().ends_with(" 3 are misscheduled in other namespaces: use -A.\n"));
        let none = LookedAt { misscheduled_elsewhere: Some(0), ..default };
        assert!(!none.all_clear().contains("other"), "nothing elsewhere goes unsaid");
        let empty = looked_at(None, None, 0);
        assert_eq!(empty.all_clear(), "No DaemonSets in any namespace (cluster https://k8s:6443).\n");
        let one = LookedAt { misscheduled_elsewhere: Some(1), ..looked_at(Some("a"), Some("b"), 1) };
        assert_eq!(
            one.all_clear(),
            "No misscheduled daemon pods in DaemonSet a/b: 1 DaemonSet on 5 nodes checked (cluster https://k8s:6443). 1 is misscheduled in other DaemonSets: leave out --daemonset.\n"
        );
    }

    #[test]
    fn lost_nodes_are_unknown_to_what_was_read_once() {
        let watched = looked_at(Some("ns"), None, 2);
        assert_eq!(watched.lost_unknown(), None, "a watch saw the pods go");
        let once = LookedAt { read_once: true, ..watched };
        let note = once.lost_unknown().unwrap();
        assert!(note.starts_with("Lost nodes: unknown to one look at the cluster, where "), "{note}");
        let snapshot = LookedAt { source: "snapshot a.json".into(), ..once.clone() };
        assert!(snapshot.lost_unknown().unwrap().starts_with("Lost nodes: unknown to a snapshot, where "));
        assert_eq!(LookedAt { daemonsets: 0, ..once }.lost_unknown(), None, "no DaemonSet, nothing to lose");
        assert!(Origin::read_once("x", vec![]).read_once && !Origin::watched("x", vec![]).read_once);
    }

    #[test]
    fn a_named_daemonset_that_is_not_there_is_an_error() {
        assert_eq!(looked_at(Some("ns"), Some("agent"), 1).check(), Ok(()));
        assert_eq!(looked_at(Some("ns"), None, 0).check(), Ok(()), "a namespace without DaemonSets is an answer");
        let error = looked_at(Some("ns"), Some("nope"), 0).check().unwrap_err().to_string();
        assert_eq!(error, "daemonsets.apps \"nope\" not found in namespace ns (cluster https://k8s:6443)");
        let error = looked_at(None, Some("nope"), 0).check().unwrap_err().to_string();
        assert!(error.contains("not found in any namespace"), "{error}");
    }

    #[test]
    fn a_namespace_that_was_not_read_is_an_error() {
        let origin = Origin::watched("cluster x", vec!["a".into(), "b".into()]);
        let select = |ns: &str| Selection { namespace: Some(ns.into()), daemonset: None };
        assert_eq!(origin.check(&select("a")), Ok(()));
        let error = origin.check(&select("c")).unwrap_err().to_string();
        assert_eq!(error, "namespace c was not read: cluster x holds only a, b");
        assert_eq!(Origin::watched("cluster x", vec![]).check(&select("c")), Ok(()));
    }

    #[test]
    fn others_are_counted_only_where_they_were_read() {
        let select = |ns: Option<&str>, ds: Option<&str>| Selection {
            namespace: ns.map(Into::into),
            daemonset: ds.map(Into::into),
        };
        let all = Origin::watched("x", vec![]);
        let one = Origin::watched("x", vec!["a".into()]);
        assert!(!all.reads_beyond(&select(None, None)));
        assert!(all.reads_beyond(&select(Some("a"), None)));
        assert!(!one.reads_beyond(&select(Some("a"), None)), "only a was read");
        assert!(one.reads_beyond(&select(Some("a"), Some("agent"))));
    }
}
