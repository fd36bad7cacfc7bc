//! The Helm chart rendered with helm-python-sdk (tests/chart/helm.py; no helm binary).

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Render the chart (release `mse` in `monitoring`) with `values`: file name → its object,
/// or `FILE#0`, `FILE#1`... → each object of a file that has several.
pub fn render(values: &Value) -> BTreeMap<String, Value> {
    let dir = std::env::temp_dir().join(format!(
        "misschedule-support-chart-{}-{}",
        std::process::id(),
        super::unix_time().as_nanos()
    ));
    let out = Command::new("python3")
        .args([
            "tests/chart/helm.py",
            "render",
            "charts/misschedule-exporter",
            dir.to_str().unwrap(),
            &values.to_string(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 with helm-python-sdk (scripts/test.sh installs it)");
    assert!(out.status.success(), "chart render failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut rendered = BTreeMap::new();
    for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        let several = docs.len() > 1;
        for (n, doc) in docs.into_iter().enumerate() {
            rendered.insert(if several { format!("{file}#{n}") } else { file.clone() }, doc);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    rendered
}
