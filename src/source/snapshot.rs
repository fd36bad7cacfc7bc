//! Snapshot mode: read `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json --show-managed-fields`
//! (or `-o yaml`, multi-document YAML, or single objects) into the index.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::index::{Index, Indexed};
use crate::k8s::convert::ConvertError;
use crate::k8s::slim::{SlimNode, SlimPod};
use crate::rules::eligibility::NODE_NAME_KEY;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { path: PathBuf, offset: usize },
    #[error("{path}: not valid {format}: {message}")]
    Syntax { path: PathBuf, format: &'static str, message: String },
    #[error("{path}: object #{position} ({what}): {message}")]
    Object { path: PathBuf, position: usize, what: String, message: String },
    #[error(
        "{path}: object #{position} ({what}): unsupported kind {kind:?}; expected Node, DaemonSet, ControllerRevision or Pod"
    )]
    UnknownKind { path: PathBuf, position: usize, what: String, kind: String },
    #[error("{path}: {source}")]
    Invalid { path: PathBuf, source: ConvertError },
    #[error("{files}: {what}; make one with `{RECIPE}`")]
    Empty { files: String, what: &'static str },
    #[error("namespaces {namespace:?} not found in snapshot {files} (it holds {held})")]
    NoNamespace { namespace: String, files: String, held: String },
}

/// The objects of one or more snapshot files, by kind.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub nodes: Vec<(PathBuf, SlimNode)>,
    pub daemonsets: Vec<(PathBuf, DaemonSet)>,
    pub revisions: Vec<(PathBuf, ControllerRevision)>,
    pub pods: Vec<(PathBuf, SlimPod)>,
    /// The files read, in order: an answer names them.
    paths: Vec<PathBuf>,
}

/// How a snapshot is made: `--show-managed-fields`, since kubectl drops managedFields
/// otherwise and every `manager` would be unknown.
pub const RECIPE: &str =
    "kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json --show-managed-fields > snapshot.json";

impl Snapshot {
    pub fn read_files(paths: &[PathBuf]) -> Result<Self, SnapshotError> {
        let mut snapshot = Self::default();
        for path in paths {
            let bytes = std::fs::read(path).map_err(|source| SnapshotError::Read { path: path.clone(), source })?;
            snapshot.add_bytes(path, &bytes)?;
        }
        // Nothing to check against must not read as nothing misscheduled.
        let empty = |what| Err(SnapshotError::Empty { files: snapshot.files(), what });
        match (snapshot.nodes.is_empty(), snapshot.daemonsets.is_empty(), snapshot.pods.is_empty()) {
            (true, true, true) if snapshot.revisions.is_empty() => {
                empty("no Nodes, DaemonSets, ControllerRevisions or Pods")
            }
            (true, _, _) => empty("no Nodes, so no DaemonSet can be checked"),
            _ => Ok(snapshot),
        }
    }

    /// The files read, as an answer names them: `a.json, b.yaml`.
    pub fn files(&self) -> String {
        let names: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
        names.join(", ")
    }

    /// Every namespace in `wanted` holds something in the snapshot: a DaemonSet, a revision
    /// or a pod. A namespace it knows nothing of is a typo, or the wrong file.
    pub fn check_namespaces(&self, wanted: &[String]) -> Result<(), SnapshotError> {
        let mut held: Vec<&str> = (self.daemonsets.iter().map(|(_, d)| d.metadata.namespace.as_deref()))
            .chain(self.revisions.iter().map(|(_, r)| r.metadata.namespace.as_deref()))
            .chain(self.pods.iter().map(|(_, p)| p.metadata.namespace.as_deref()))
            .flatten()
            .collect();
        held.sort_unstable();
        held.dedup();
        match wanted.iter().find(|ns| !held.contains(&ns.as_str())) {
            None => Ok(()),
            Some(namespace) => Err(SnapshotError::NoNamespace {
                namespace: namespace.clone(),
                files: self.files(),
                held: if held.is_empty() { "no namespaced objects".to_owned() } else { held.join(", ") },
            }),
        }
    }

    /// Parse one file's contents; `path` only names it in errors.
    pub fn add_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
        if !self.paths.iter().any(|p| p == path) {
            self.paths.push(path.to_owned());
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| SnapshotError::NotUtf8 { path: path.to_owned(), offset: e.valid_up_to() })?;
        let mut position = 0;
        for document in parse_documents(path, text)? {
            self.add_value(path, document, &mut position)?;
        }
        Ok(())
    }

    /// `position` counts objects, not the Lists around them: the first item of a List is
    /// object #1.
    fn add_value(&mut self, path: &Path, value: Value, position: &mut usize) -> Result<(), SnapshotError> {
        let is_list = value.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
        if !is_list {
            *position += 1;
        }
        let what = describe(&value);
        let object_error = |message: String| SnapshotError::Object {
            path: path.to_owned(),
            position: *position + usize::from(is_list),
            what: what.clone(),
            message,
        };
        let kind = match value.get("kind") {
            Some(Value::String(kind)) => kind.clone(),
            Some(_) => return Err(object_error("`kind` is not a string".into())),
            None if value.is_object() => return Err(object_error("no `kind`".into())),
            None => return Err(object_error("not an object".into())),
        };
        if kind == "List" || kind.ends_with("List") {
            let items = match value.get("items") {
                Some(Value::Array(items)) => items.clone(),
                Some(Value::Null) | None => Vec::new(),
                Some(_) => return Err(object_error("`items` is not a list".into())),
            };
            for item in items {
                self.add_value(path, item, position)?;
            }
            return Ok(());
        }
        check_sizes(&value).map_err(object_error)?;
        let at = path.to_owned();
        match kind.as_str() {
            "Node" => self.nodes.push((at, typed(value).map_err(object_error)?)),
            "DaemonSet" => self.daemonsets.push((at, typed(value).map_err(object_error)?)),
            "ControllerRevision" => self.revisions.push((at, typed(value).map_err(object_error)?)),
            "Pod" => self.pods.push((at, typed(value).map_err(object_error)?)),
            _ => {
                return Err(SnapshotError::UnknownKind { path: path.to_owned(), position: *position, what, kind });
            }
        }
        Ok(())
    }

    /// Load everything into the index as one initial list per resource, keeping
    /// only objects in `namespaces` (all when empty).
    pub fn load_into(self, index: &mut Index, namespaces: &[String]) -> Result<(), SnapshotError> {
        let keep = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            namespaces.is_empty() || meta.namespace.as_ref().is_some_and(|ns| namespaces.contains(ns))
        };
        load(index, self.nodes, |_| true)?;
        load(index, self.daemonsets, |d| keep(&d.metadata))?;
        load(index, self.revisions, |r| keep(&r.metadata))?;
        load(index, self.pods, |p| keep(&p.metadata))?;
        Ok(())
    }
}

fn load<K: Indexed>(
    index: &mut Index,
    objects: Vec<(PathBuf, K)>,
    keep: impl Fn(&K) -> bool,
) -> Result<(), SnapshotError> {
    // The relist converts one object at a time, so on an error `current` names its file.
    let current = Cell::new(PathBuf::new());
    let listed = objects.into_iter().filter(|(_, o)| keep(o)).map(|(path, obj)| {
        current.set(path);
        obj
    });
    index.relist(listed).map_err(|source| SnapshotError::Invalid { path: current.take(), source })
}

/// The API server's limits on names, label keys and values (and so on taints). An object
/// beyond them cannot have come from a cluster; refusing it keeps a corrupt or hostile
/// file from turning into megabyte-long series.
const MAX_NAME: usize = 253;
const MAX_NAMESPACE: usize = 63;
const MAX_QUALIFIED_KEY: usize = 253 + 1 + 63;
const MAX_LABEL_VALUE: usize = 63;

pub(super) fn check_sizes(value: &Value) -> Result<(), String> {
    let too_long =
        |what: String, len: usize, max: usize| Err(format!("{what} is {len} bytes; Kubernetes allows at most {max}"));
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    for (pointer, what, max) in [
        ("/metadata/name", "metadata.name", MAX_NAME),
        ("/metadata/namespace", "metadata.namespace", MAX_NAMESPACE),
        ("/spec/nodeName", NODE_NAME_KEY, MAX_NAME),
    ] {
        if let Some(s) = text(pointer).filter(|s| s.len() > max) {
            return too_long(what.to_owned(), s.len(), max);
        }
    }
    if let Some(labels) = value.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, label_value) in labels {
            if key.len() > MAX_QUALIFIED_KEY {
                return too_long(format!("label key {:?}", abbreviate(key)), key.len(), MAX_QUALIFIED_KEY);
            }
            if let Some(v) = label_value.as_str().filter(|v| v.len() > MAX_LABEL_VALUE) {
                return too_long(format!("label {:?}'s value", abbreviate(key)), v.len(), MAX_LABEL_VALUE);
            }
        }
    }
    for taint in value.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten() {
        let field = |name: &str| taint.get(name).and_then(Value::as_str).unwrap_or("");
        let (key, taint_value) = (field("key"), field("value"));
        if key.len() > MAX_QUALIFIED_KEY {
            return too_long(format!("taint key {:?}", abbreviate(key)), key.len(), MAX_QUALIFIED_KEY);
        }
        if taint_value.len() > MAX_LABEL_VALUE {
            return too_long(format!("taint {:?}'s value", abbreviate(key)), taint_value.len(), MAX_LABEL_VALUE);
        }
    }
    Ok(())
}

/// At most 64 characters of `s`, for error messages.
fn abbreviate(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

pub(super) fn typed<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// "Kind namespace/name" for error messages, from whatever the object has.
pub(super) fn describe(value: &Value) -> String {
    let field = |path: &str| value.pointer(path).and_then(Value::as_str);
    let kind = field("/kind").unwrap_or("object");
    let (kind, namespace, name) =
        (abbreviate(kind), field("/metadata/namespace").map(abbreviate), field("/metadata/name").map(abbreviate));
    match (namespace, name) {
        (Some(ns), Some(name)) => format!("{kind} {ns}/{name}"),
        (None, Some(name)) => format!("{kind} {name}"),
        _ => format!("{kind} without a name"),
    }
}

/// JSON (one or more concatenated values) when it looks like JSON, else multi-document YAML.
pub(super) fn parse_documents(path: &Path, text: &str) -> Result<Vec<Value>, SnapshotError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut values = Vec::new();
        for value in serde_json::Deserializer::from_str(trimmed).into_iter::<Value>() {
            let value = value.map_err(|e| SnapshotError::Syntax {
                path: path.to_owned(),
                format: "JSON",
                message: e.to_string(),
            })?;
            match value {
                Value::Array(items) => values.extend(items),
                other => values.push(other),
            }
        }
        return Ok(values);
    }
    let documents: Vec<Value> = serde_saphyr::from_multiple(trimmed).map_err(|e| SnapshotError::Syntax {
        path: path.to_owned(),
        format: "YAML",
        // The parser adds a drawing of the line after the first; an error is one line.
        message: e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned(),
    })?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// A snapshot's DaemonSet status is the controller's truth: say so when we disagree.
pub fn warn_on_status_disagreement(index: &Index) {
    for view in index.daemonsets() {
        let Some(status) = view.ds.status else { continue };
        let ours = view.misscheduled_node_count() as i64;
        if status.number_misscheduled != ours {
            tracing::warn!(
                daemonset = %format!("{}/{}", view.ds.id.namespace, view.ds.id.name),
                status_number_misscheduled = status.number_misscheduled,
                exporter = ours,
                "misscheduled count disagrees with the DaemonSet status; the status lags the objects (higher after a node is deleted, lower on 1.33+ after a NoSchedule taint such as a drain): see docs/controller-semantics.md"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Snapshot, SnapshotError> {
        let mut s = Snapshot::default();
        s.add_bytes(Path::new("snap.json"), text.as_bytes()).map(|()| s)
    }

    #[test]
    fn reads_a_kubectl_list_and_single_objects() {
        let list = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u"}}]}"#;
        let s = parse(list).unwrap();
        assert_eq!((s.nodes.len(), s.pods.len()), (1, 1));
        let yaml =
            "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n";
        assert_eq!(parse(yaml).unwrap().nodes.len(), 2);
    }

    #[test]
    fn errors_name_the_file_and_object() {
        let truncated = r#"{"kind":"List","items":[{"kind":"Node""#;
        let err = parse(truncated).unwrap_err().to_string();
        assert!(err.starts_with("snap.json: not valid JSON"), "{err}");

        let unknown = r#"{"kind":"List","items":[{"kind":"Secret","metadata":{"name":"s","namespace":"x"}}]}"#;
        let err = parse(unknown).unwrap_err().to_string();
        assert!(err.contains("object #1 (Secret x/s): unsupported kind \"Secret\""), "{err}");

        let wrong_type = r#"{"kind":"Node","metadata":{"name":"n","labels":{"a":1}}}"#;
        let err = parse(wrong_type).unwrap_err().to_string();
        assert!(err.contains("(Node n)") && err.contains("invalid type"), "{err}");

        let bad_yaml = "kind: Node\nmetadata: {name: [unclosed\n";
        let err = parse(bad_yaml).unwrap_err().to_string();
        assert!(err.contains("not valid YAML"), "{err}");

        let mut s = Snapshot::default();
        let err = s.add_bytes(Path::new("bin"), b"kind: Node\xff").unwrap_err().to_string();
        assert_eq!(err, "bin: not UTF-8 text (invalid byte at offset 10)");
    }

    #[test]
    fn values_beyond_the_api_servers_limits_are_rejected_by_name() {
        let huge = "v".repeat(1 << 20);
        let label = format!(r#"{{"kind":"Node","metadata":{{"name":"n1","labels":{{"pool":"{huge}"}}}}}}"#);
        let err = parse(&label).unwrap_err().to_string();
        assert_eq!(
            err,
            "snap.json: object #1 (Node n1): label \"pool\"'s value is 1048576 bytes; Kubernetes allows at most 63"
        );
        let taint = format!(
            r#"{{"kind":"Node","metadata":{{"name":"n1"}},"spec":{{"taints":[{{"key":"{huge}","effect":"NoSchedule"}}]}}}}"#
        );
        let err = parse(&taint).unwrap_err().to_string();
        assert!(err.contains("(Node n1): taint key \"vvvv") && err.contains("…\" is 1048576 bytes"), "{err}");
        let name = format!(r#"{{"kind":"Pod","metadata":{{"name":"{huge}","namespace":"ns"}}}}"#);
        let err = parse(&name).unwrap_err().to_string();
        assert!(err.len() < 300, "the error stays short: {} bytes", err.len());
        assert!(err.contains("metadata.name is 1048576 bytes"), "{err}");
        // At the limits exactly, objects are fine.
        let at_limit = format!(
            r#"{{"kind":"Node","metadata":{{"name":"{}","labels":{{"{}":"{}"}}}}}}"#,
            "n".repeat(253),
            "k".repeat(317),
            "v".repeat(63)
        );
        assert_eq!(parse(&at_limit).unwrap().nodes.len(), 1);
    }

    #[test]
    fn objects_missing_required_fields_are_rejected_by_name() {
        let mut index = Index::default();
        let pod_without_uid = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"}}"#;
        let err = parse(pod_without_uid).unwrap().load_into(&mut index, &[]).unwrap_err().to_string();
        assert_eq!(err, "snap.json: Pod ns/p: missing metadata.uid");
    }
}
