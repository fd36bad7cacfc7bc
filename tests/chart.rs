//! The Helm chart, rendered and linted with helm-python-sdk (Helm v4's SDK),
//! validated with kubernetes-validate, and checked for what it promises:
//! least-privilege RBAC, hardened defaults, and the very same rules and
//! dashboard as `alerts/` and `dashboards/`. The live half (server-side dry-run,
//! and the exporter running on the chart's own ClusterRole) is in controlplane.rs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CHART: &str = "charts/misschedule-exporter";

fn python(args: &[&str]) -> std::process::Output {
    Command::new("python3")
        .arg(Path::new(ROOT).join("tests/chart/helm.py"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("python3 with helm-python-sdk is required (scripts/test.sh installs it)")
}

/// Render with `values`; returns file name → (raw text, parsed object).
fn render(values: Value) -> BTreeMap<String, (String, Value)> {
    let dir = std::env::temp_dir().join(format!("misschedule-chart-{}-{}", std::process::id(), nonce()));
    let out = python(&["render", CHART, dir.to_str().unwrap(), &values.to_string()]);
    assert!(out.status.success(), "render failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        assert_eq!(docs.len(), 1, "{}", path.display());
        files
            .insert(path.file_name().unwrap().to_string_lossy().into_owned(), (text, docs.into_iter().next().unwrap()));
    }
    std::fs::remove_dir_all(&dir).ok();
    files
}

fn nonce() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn everything_on() -> Value {
    json!({"serviceMonitor": {"enabled": true}, "prometheusRule": {"enabled": true}, "grafanaDashboard": {"enabled": true}})
}

#[test]
fn lint_is_clean_in_strict_mode() {
    let out = python(&["lint", CHART]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], json!([]), "{report}");
    let serious: Vec<_> =
        report["messages"].as_array().unwrap().iter().filter(|m| m["severity"].as_i64() >= Some(2)).collect();
    assert!(serious.is_empty(), "lint warnings or errors: {serious:?}");
}

#[test]
fn schema_rejects_bad_values() {
    for bad in [
        json!({"exporter": {"logFormat": "xml"}}),
        json!({"exporter": {"port": 0}}),
        json!({"prometheusRule": {"drainStuckSeconds": "45m"}}),
        json!({"typoedKey": true}),
    ] {
        let out = python(&["validate", CHART, &bad.to_string()]);
        assert!(!out.status.success(), "accepted {bad}");
    }
    assert!(python(&["validate", CHART, &everything_on().to_string()]).status.success());
}

#[test]
fn default_objects_and_optional_ones() {
    let kinds = |files: &BTreeMap<String, (String, Value)>| -> Vec<String> {
        files.values().map(|(_, v)| v["kind"].as_str().unwrap().to_owned()).collect()
    };
    let mut defaults = kinds(&render(json!({})));
    defaults.sort();
    assert_eq!(defaults, ["ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"]);
    let mut all = kinds(&render(everything_on()));
    all.sort();
    assert_eq!(
        all,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PrometheusRule",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
}

#[test]
fn cluster_role_is_exactly_read_only_on_four_resources() {
    let files = render(json!({}));
    let rules = &files["clusterrole.yaml"].1["rules"];
    assert_eq!(
        rules,
        &json!([
            {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets", "controllerrevisions"], "verbs": ["get", "list", "watch"]}
        ])
    );
    let binding = &files["clusterrolebinding.yaml"].1;
    assert_eq!(binding["roleRef"]["name"], files["clusterrole.yaml"].1["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], files["serviceaccount.yaml"].1["metadata"]["name"]);
}

#[test]
fn hardened_defaults() {
    let files = render(json!({}));
    let pod = &files["deployment.yaml"].1["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(container["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert_eq!(container["ports"][0]["containerPort"], 18493);
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--listen=0.0.0.0:18493"), "{args:?}");
    let monitor = &render(everything_on())["servicemonitor.yaml"].1;
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true, "keep the exporter's namespace/pod/node labels");
}

#[test]
fn exporter_flags_come_from_values() {
    let files = render(json!({"exporter": {"namespaces": ["a", "b"], "drainTaintKeys": ["example.com/drain", "x/*"]}}));
    let args = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0]["args"];
    for expected in ["--namespace=a", "--namespace=b", "--drain-taint-keys=example.com/drain,x/*"] {
        assert!(args.as_array().unwrap().iter().any(|a| a == expected), "{expected} not in {args}");
    }
}

/// The text of a block scalar or mapping in `text` that starts after `marker`, de-indented by `indent`.
fn embedded(text: &str, marker: &str, indent: usize) -> String {
    let start = text.find(marker).unwrap_or_else(|| panic!("{marker} not in rendered text")) + marker.len();
    let mut out = String::new();
    for line in text[start..].lines().skip(1) {
        if !line.is_empty() && !line.starts_with(&" ".repeat(indent)) {
            break;
        }
        out.push_str(line.get(indent..).unwrap_or(""));
        out.push('\n');
    }
    out
}

#[test]
fn rules_and_dashboard_are_the_repository_files_byte_for_byte() {
    let files = render(everything_on());
    let rules = std::fs::read_to_string(Path::new(ROOT).join("alerts/misschedule-exporter.rules.yaml")).unwrap();
    assert_eq!(embedded(&files["prometheusrule.yaml"].0, "\nspec:", 2).trim_end(), rules.trim_end());
    let dashboard = std::fs::read_to_string(Path::new(ROOT).join("dashboards/misschedule-exporter.json")).unwrap();
    assert_eq!(
        embedded(&files["dashboard-configmap.yaml"].0, "misschedule-exporter.json: |-", 4).trim_end(),
        dashboard.trim_end()
    );
    assert_eq!(files["dashboard-configmap.yaml"].1["metadata"]["labels"]["grafana_dashboard"], "1");
}

#[test]
fn drain_stuck_threshold_is_configurable_and_the_rules_stay_valid() {
    let files = render(json!({"prometheusRule": {"enabled": true, "drainStuckSeconds": 3600}}));
    let spec = &files["prometheusrule.yaml"].1["spec"];
    let stuck =
        spec["groups"][0]["rules"].as_array().unwrap().iter().find(|r| r["alert"] == "DaemonSetDrainStuck").unwrap();
    assert!(stuck["expr"].as_str().unwrap().trim_end().ends_with(") > 3600"), "{}", stuck["expr"]);
    let path = std::env::temp_dir().join(format!("misschedule-rendered-rules-{}.yaml", std::process::id()));
    std::fs::write(&path, serde_json::to_string(spec).unwrap()).unwrap();
    let out = Command::new("promtool").args(["check", "rules"]).arg(&path).output().expect("promtool");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Everything on, with HTTPS from a TLS Secret and a bearer token from another.
fn everything_on_with_tls_and_auth() -> Value {
    let mut values = everything_on();
    values["web"] = json!({"tlsSecretName": "mse-tls", "bearerTokenSecret": {"name": "mse-scrape", "key": "token"}});
    values["serviceMonitor"]["tlsConfig"] =
        json!({"ca": {"secret": {"name": "mse-tls", "key": "ca.crt"}}, "serverName": "mse.monitoring.svc"});
    values
}

#[test]
fn tls_and_auth_mount_their_secrets_and_reach_the_service_monitor() {
    let files = render(everything_on_with_tls_and_auth());
    let pod = &files["deployment.yaml"].1["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for flag in [
        "--tls-cert-file=/etc/misschedule-exporter/tls/tls.crt",
        "--tls-key-file=/etc/misschedule-exporter/tls/tls.key",
        "--auth-bearer-token-file=/etc/misschedule-exporter/auth/token",
    ] {
        assert!(args.contains(&flag), "{flag} missing from {args:?}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(container["livenessProbe"]["httpGet"]["scheme"], "HTTPS");
    let mounts: Vec<&str> =
        container["volumeMounts"].as_array().unwrap().iter().map(|m| m["mountPath"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["/etc/misschedule-exporter/tls", "/etc/misschedule-exporter/auth"]);
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "mse-tls");
    assert_eq!(pod["volumes"][1]["secret"]["secretName"], "mse-scrape");
    let endpoint = &files["servicemonitor.yaml"].1["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["tlsConfig"]["serverName"], "mse.monitoring.svc");
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "mse-scrape", "key": "token"}})
    );

    // Off by default: plain HTTP, no Secrets.
    let files = render(everything_on());
    let container = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["readinessProbe"]["httpGet"]["scheme"], "HTTP");
    assert!(container.get("volumeMounts").is_none());
    assert!(files["servicemonitor.yaml"].1["spec"]["endpoints"][0].get("authorization").is_none());
}

#[test]
fn rendered_manifests_pass_kubernetes_validate_strict() {
    for (name, values) in [("plain", everything_on()), ("tls", everything_on_with_tls_and_auth())] {
        validate_strict(name, values);
    }
}

fn validate_strict(name: &str, values: Value) {
    let dir: PathBuf = std::env::temp_dir().join(format!("misschedule-validate-{name}-{}", std::process::id()));
    let out = python(&["render", CHART, dir.to_str().unwrap(), &values.to_string()]);
    assert!(out.status.success());
    let core: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !std::fs::read_to_string(p).unwrap().contains("monitoring.coreos.com"))
        .collect();
    assert_eq!(core.len(), 6);
    let out = Command::new("kubernetes-validate")
        .arg("--strict")
        .args(&core)
        .output()
        .expect("kubernetes-validate is required (scripts/test.sh installs it)");
    let report = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}");
    assert_eq!(report.matches(" passed for resource ").count(), core.len(), "{report}");
    // The two prometheus-operator kinds have no bundled schema; their shape is checked above
    // (rules byte-identical and promtool-valid; ServiceMonitor endpoint and honorLabels).
}
