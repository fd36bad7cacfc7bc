//! `what-if apply -f`: DaemonSet manifests read as `kubectl apply -f` reads them: JSON or
//! multi-document YAML, Lists flattened, `-` for stdin, and the namespace from the object,
//! else `-n`, else the context's.

use std::io::Read;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::Value;

use super::snapshot::{SnapshotError, check_sizes, describe, parse_documents, typed};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Parse(#[from] SnapshotError),
    #[error("{path}: object #{position} ({what}): {problem}")]
    Object { path: PathBuf, position: usize, what: String, problem: String },
    #[error("{0}: no DaemonSet in it")]
    Empty(PathBuf),
}

/// The DaemonSets in `paths`, each with its namespace: the object's, which must agree
/// with `namespace` when that was given (`-n`), else `default_namespace`.
pub fn read_daemonsets(
    paths: &[PathBuf],
    namespace: Option<&str>,
    default_namespace: &str,
) -> Result<Vec<DaemonSet>, ManifestError> {
    let mut out = Vec::new();
    for path in paths {
        let bytes = read(path)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| SnapshotError::NotUtf8 { path: path.clone(), offset: e.valid_up_to() })?;
        let mut objects = Vec::new();
        for document in parse_documents(path, text)? {
            flatten(document, &mut objects);
        }
        if objects.is_empty() {
            return Err(ManifestError::Empty(path.clone()));
        }
        for (i, value) in objects.into_iter().enumerate() {
            let what = describe(&value);
            let error = |problem: String| ManifestError::Object {
                path: path.clone(),
                position: i + 1,
                what: what.clone(),
                problem,
            };
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
            let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            if kind != "DaemonSet" || api_version != "apps/v1" {
                return Err(error(format!(
                    "what-if apply takes DaemonSets (apps/v1), not {}; leave the other objects out, e.g. yq 'select(.kind == \"DaemonSet\")'",
                    if kind.is_empty() {
                        "an object without a kind".to_owned()
                    } else {
                        format!("{api_version} {kind}")
                    }
                )));
            }
            check_sizes(&value).map_err(error)?;
            let mut ds: DaemonSet = typed(value).map_err(error)?;
            match (ds.metadata.namespace.as_deref(), namespace) {
                (Some(own), Some(given)) if own != given => {
                    return Err(error(format!(
                        "the namespace from the provided object {own:?} does not match the namespace {given:?}. You must pass '--namespace={own}' to perform this operation."
                    )));
                }
                (Some(_), _) => {}
                (None, given) => ds.metadata.namespace = Some(given.unwrap_or(default_namespace).to_owned()),
            }
            if ds.metadata.name.as_deref().is_none_or(str::is_empty) {
                return Err(error("no metadata.name".into()));
            }
            out.push(ds);
        }
    }
    Ok(out)
}

fn read(path: &Path) -> Result<Vec<u8>, ManifestError> {
    let mut bytes = Vec::new();
    let result = if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map(|_| ())
    };
    result.map_err(|source| ManifestError::Read { path: path.to_owned(), source })?;
    Ok(bytes)
}

/// A `List` (or `DaemonSetList`) gives its items; anything else is one object.
fn flatten(value: Value, out: &mut Vec<Value>) {
    let is_list = value.get("kind").and_then(Value::as_str).is_some_and(|k| k == "List" || k.ends_with("List"));
    match value {
        Value::Object(mut map) if is_list => {
            if let Some(Value::Array(items)) = map.remove("items") {
                for item in items {
                    flatten(item, out);
                }
            }
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str, namespace: Option<&str>) -> Result<Vec<DaemonSet>, ManifestError> {
        let dir = std::env::temp_dir().join(format!("manifest-{}-{}", std::process::id(), text.len()));
        std::fs::write(&dir, text).unwrap();
        let read = read_daemonsets(std::slice::from_ref(&dir), namespace, "default");
        std::fs::remove_file(&dir).unwrap();
        read
    }

    const DS: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  selector: {matchLabels: {app: a}}\n  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: a, image: a}]}}\n";

    #[test]
    fn namespaces_come_from_the_object_then_the_flag_then_the_context() {
        let read = read_text(DS, None).unwrap();
        assert_eq!(read[0].metadata.namespace.as_deref(), Some("default"));
        assert_eq!(read_text(DS, Some("ops")).unwrap()[0].metadata.namespace.as_deref(), Some("ops"));
        let own = DS.replace("{name: agent}", "{name: agent, namespace: mon}");
        assert_eq!(read_text(&own, None).unwrap()[0].metadata.namespace.as_deref(), Some("mon"));
        let error = read_text(&own, Some("ops")).unwrap_err().to_string();
        assert!(error.contains("does not match the namespace \"ops\""), "{error}");
    }

    #[test]
    fn only_daemonsets_and_each_error_names_the_object() {
        let two = format!("{DS}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm}}\n");
        let error = read_text(&two, None).unwrap_err().to_string();
        assert!(
            error.contains("object #2 (ConfigMap cm): what-if apply takes DaemonSets (apps/v1), not v1 ConfigMap"),
            "{error}"
        );
        let list = r#"{"kind":"List","items":[{"apiVersion":"apps/v1","kind":"DaemonSet","spec":{}}]}"#;
        let error = read_text(list, None).unwrap_err().to_string();
        assert!(error.contains("object #1 (DaemonSet without a name)"), "{error}");
        assert!(read_text("kind: [", None).unwrap_err().to_string().contains("not valid YAML"));
        assert!(read_text("# nothing\n", None).unwrap_err().to_string().ends_with("no DaemonSet in it"));
    }
}
