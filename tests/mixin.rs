//! The mixin (mixin/, jsonnet) is the one source of the rule file, the dashboard and the chart's
//! formats of both (the job and DaemonSetDrainStuck's threshold left open): the checked-in files
//! are exactly what it renders, and its `_config` really reaches every expression.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn jsonnet(code: &str) -> Value {
    let out = Command::new("jsonnet")
        .args(["-e", code])
        .current_dir(ROOT)
        .output()
        .expect("jsonnet is required (scripts/test.sh installs Debian's)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs jsonnet: scripts/test.sh runs it"]
fn checked_in_files_are_what_the_mixin_renders() {
    let out = Command::new("bash").arg("scripts/mixin.sh").arg("--check").current_dir(ROOT).output().unwrap();
    assert!(
        out.status.success(),
        "scripts/mixin.sh --check:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every PromQL expression of the mixin, alerts and dashboard panels alike.
fn expressions(mixin: &Value) -> Vec<String> {
    let rules =
        mixin["prometheusAlerts"]["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap());
    let panels = mixin["grafanaDashboards"]["misschedule-exporter.json"]["panels"].as_array().unwrap();
    rules
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .chain(
            panels
                .iter()
                .flat_map(|p| p["targets"].as_array().unwrap())
                .map(|t| t["expr"].as_str().unwrap().to_owned()),
        )
        .collect()
}

#[test]
#[ignore = "needs jsonnet and promtool: scripts/test.sh runs it"]
fn config_reaches_every_expression() {
    let custom = jsonnet(
        r#"local m = (import "mixin/mixin.libsonnet") + { _config+:: {
             misscheduleExporterSelector: 'job="mse"', kubeStateMetricsSelector: 'job="ksm"',
             clusterLabel: 'k8s_cluster', drainStuckSeconds: 3600,
             runbookURLPattern: 'https://wiki.example/%s', showMultiCluster: true } };
           { prometheusAlerts: m.prometheusAlerts, grafanaDashboards: m.grafanaDashboards }"#,
    );
    for expr in expressions(&custom) {
        let theirs = expr.contains("kube_daemonset_status_number_misscheduled");
        let rest = expr.replace("kube_daemonset_status_number_misscheduled", "");
        let ours = rest.contains("daemonset_") || rest.contains("misschedule_exporter_") || rest.contains("up{");
        assert!(!expr.contains("misschedule-exporter") && !expr.contains("kube-state-metrics"), "{expr}");
        assert!(!ours || expr.contains(r#"job="mse""#), "selector missing: {expr}");
        assert!(!theirs || expr.contains(r#"job="ksm""#), "kube-state-metrics selector missing: {expr}");
        assert!(!expr.contains("(cluster") && !expr.contains(" cluster=") && !expr.contains("{cluster"), "{expr}");
    }
    let rules = custom["prometheusAlerts"]["groups"][0]["rules"].as_array().unwrap();
    for rule in rules {
        let by_cluster = rule["expr"].as_str().unwrap().contains("k8s_cluster");
        let absent_only = rule["alert"] == "MisscheduleExporterDown";
        assert!(by_cluster || absent_only, "{} ignores the cluster label", rule["alert"]);
        assert!(rule["annotations"]["runbook_url"].as_str().unwrap().starts_with("https://wiki.example/"));
        assert!(rule["annotations"]["description"].as_str().unwrap().contains("$labels.k8s_cluster"));
    }
    let stuck = rules.iter().find(|r| r["alert"] == "DaemonSetDrainStuck").unwrap();
    assert!(stuck["expr"].as_str().unwrap().trim_end().ends_with("> 3600"));
    let vars = custom["grafanaDashboards"]["misschedule-exporter.json"]["templating"]["list"].as_array().unwrap();
    let cluster = vars.iter().find(|v| v["name"] == "cluster").unwrap();
    assert_eq!(cluster["hide"], 0);
    assert!(cluster["definition"].as_str().unwrap().contains(", k8s_cluster)"));

    // The customised rules are still valid Prometheus rules.
    let path = std::env::temp_dir().join(format!("misschedule-mixin-custom-{}.json", std::process::id()));
    std::fs::write(&path, custom["prometheusAlerts"].to_string()).unwrap();
    let out = Command::new("promtool").args(["check", "rules"]).arg(&path).output().expect("promtool");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    std::fs::remove_file(path).ok();
}

#[test]
fn summaries_are_static_and_descriptions_name_the_cluster() {
    let rules: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("alerts/misschedule-exporter.rules.yaml")).unwrap(),
    )
    .unwrap();
    for rule in rules["groups"][0]["rules"].as_array().unwrap() {
        let annotations = &rule["annotations"];
        // Alertmanager keeps an annotation in CommonAnnotations only if every grouped alert has the same.
        assert!(!annotations["summary"].as_str().unwrap().contains("{{"), "{}: templated summary", rule["alert"]);
        assert!(
            annotations["description"]
                .as_str()
                .unwrap()
                .contains("{{ with $labels.cluster }} in cluster {{ . }}{{ end }}"),
            "{}: description does not name the cluster",
            rule["alert"]
        );
    }
}
