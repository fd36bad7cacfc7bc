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

/// Render with `values`; returns file name → (raw text, parsed object). A file with several
/// objects (extraManifests) appears once per object, as `name#index`.
fn render(values: Value) -> BTreeMap<String, (String, Value)> {
    let dir = std::env::temp_dir().join(format!("misschedule-chart-{}-{}", std::process::id(), nonce()));
    let out = python(&["render", CHART, dir.to_str().unwrap(), &values.to_string()]);
    assert!(out.status.success(), "render failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        if docs.len() == 1 {
            files.insert(name, (text, docs.into_iter().next().unwrap()));
        } else {
            for (i, doc) in docs.into_iter().enumerate() {
                files.insert(format!("{name}#{i}"), (text.clone(), doc));
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    files
}

/// Rendering `values` fails, with `message` in the error.
fn render_fails(values: Value, message: &str) {
    let dir = std::env::temp_dir().join(format!("misschedule-chart-fail-{}-{}", std::process::id(), nonce()));
    let out = python(&["render", CHART, dir.to_str().unwrap(), &values.to_string()]);
    std::fs::remove_dir_all(&dir).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rendered {values}");
    assert!(stderr.contains(message), "{values}: {stderr}");
}

fn nonce() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn everything_on() -> Value {
    json!({"serviceMonitor": {"enabled": true}, "prometheusRule": {"enabled": true}, "grafanaDashboard": {"enabled": true}})
}

/// Every value the chart takes is in its README's table.
#[test]
fn readme_documents_every_value() {
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(Path::new(ROOT).join(CHART).join("values.yaml")).unwrap())
            .unwrap();
    let readme = std::fs::read_to_string(Path::new(ROOT).join(CHART).join("README.md")).unwrap();
    // Whole objects documented as one row.
    let atomic = ["podSecurityContext", "securityContext", "resources", "grafanaDashboard.labels"];
    let mut missing = Vec::new();
    let mut stack = vec![(String::new(), &values)];
    while let Some((path, value)) = stack.pop() {
        match value.as_object().filter(|map| !map.is_empty() && !atomic.contains(&path.as_str())) {
            Some(map) => stack
                .extend(map.iter().map(|(k, v)| (if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, v))),
            None => {
                // `a.b` or, in a row naming several, `.b` after `a.…`.
                let (parent, leaf) = path.rsplit_once('.').unwrap_or(("", &path));
                let named = readme.contains(&format!("`{path}`"))
                    || (readme.contains(&format!("`{parent}.")) && readme.contains(&format!("`.{leaf}`")))
                    || readme.contains(&format!("`{path}`,"));
                if !named {
                    missing.push(path);
                }
            }
        }
    }
    assert!(missing.is_empty(), "values missing from the chart README: {missing:?}");
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn lint_is_clean_in_strict_mode_with_every_value_set() {
    let mut kubernetes_auth = kitchen_sink();
    kubernetes_auth["web"] = json!({"kubernetesAuth": true});
    for values in [json!({}), everything_on_with_tls_and_auth(), kitchen_sink(), kubernetes_auth] {
        let out = python(&["lint", CHART, &values.to_string()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["errors"], json!([]), "{values}: {report}");
        let serious: Vec<_> =
            report["messages"].as_array().unwrap().iter().filter(|m| m["severity"].as_i64() >= Some(2)).collect();
        assert!(serious.is_empty(), "lint warnings or errors with {values}: {serious:?}");
    }
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn schema_rejects_bad_values() {
    for bad in [
        json!({"exporter": {"logFormat": "xml"}}),
        json!({"exporter": {"port": 0}}),
        json!({"exporter": {"lostNodeRetention": "a day"}}),
        json!({"prometheusRule": {"drainStuckSeconds": "45m"}}),
        json!({"prometheusRule": {"customRules": {"DaemonSetPodMisscheduled": {"for": "soon"}}}}),
        json!({"prometheusRule": {"customRules": {"DaemonSetPodMisscheduled": {"labels": {}}}}}),
        json!({"image": {"digest": "latest"}}),
        json!({"networkPolicy": {"apiServer": {"ports": []}}}),
        json!({"typoedKey": true}),
    ] {
        let out = python(&["validate", CHART, &bad.to_string()]);
        assert!(!out.status.success(), "accepted {bad}");
    }
    assert!(python(&["validate", CHART, &everything_on().to_string()]).status.success());
    // An umbrella chart passes its own globals to every subchart: they must be accepted.
    let umbrella =
        json!({"global": {"imageRegistry": "registry.internal", "storageClass": "fast", "anything": {"x": 1}}});
    let out = python(&["validate", CHART, &umbrella.to_string()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // ...and its `condition: misschedule-exporter.enabled` sets `enabled` at the root.
    for enabled in [true, false] {
        let out = python(&["validate", CHART, &json!({"enabled": enabled}).to_string()]);
        assert!(out.status.success(), "enabled: {enabled}: {}", String::from_utf8_lossy(&out.stdout));
    }
    assert!(!python(&["validate", CHART, &json!({"enabled": "yes"}).to_string()]).status.success());
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn default_objects_and_optional_ones() {
    let kinds = |files: &BTreeMap<String, (String, Value)>| -> Vec<String> {
        files.values().map(|(_, v)| v["kind"].as_str().unwrap().to_owned()).collect()
    };
    let mut defaults = kinds(&render(json!({})));
    defaults.sort();
    // The Pod is the `helm test` hook.
    assert_eq!(defaults, ["ClusterRole", "ClusterRoleBinding", "Deployment", "Pod", "Service", "ServiceAccount"]);
    let mut all = kinds(&render(everything_on()));
    all.sort();
    assert_eq!(
        all,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Pod",
            "PrometheusRule",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn cluster_role_is_exactly_read_only_on_four_resources_and_events() {
    let files = render(json!({}));
    let rules = &files["clusterrole.yaml"].1["rules"];
    assert_eq!(
        rules,
        &json!([
            {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets", "controllerrevisions"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]}
        ])
    );
    let binding = &files["clusterrolebinding.yaml"].1;
    assert_eq!(binding["roleRef"]["name"], files["clusterrole.yaml"].1["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], files["serviceaccount.yaml"].1["metadata"]["name"]);
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
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
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn exporter_flags_come_from_values() {
    let args = |values: Value| {
        let files = render(values);
        let args = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0]["args"];
        args.as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let set = args(json!({"exporter": {"namespaces": ["a", "b"], "drainTaintKeys": ["example.com/drain", "x/*"],
                                        "nfdManagers": ["nfd-master", "my-nfd"], "useApiserverCache": true,
                                        "apiserverCompression": true, "lostNodeRetention": "1h30m"}}));
    for expected in [
        "--namespace=a",
        "--namespace=b",
        "--drain-taint-keys=example.com/drain,x/*",
        "--nfd-managers=nfd-master,my-nfd",
        "--use-apiserver-cache",
        "--apiserver-compression",
        "--lost-node-retention=1h30m",
    ] {
        assert!(set.iter().any(|a| a == expected), "{expected} not in {set:?}");
    }
    // The cache answers in one piece: no page size beside it.
    assert!(!set.iter().any(|a| a.starts_with("--list-page-size")), "{set:?}");
    let default = args(json!({}));
    assert!(default.iter().any(|a| a == "--list-page-size=500"), "{default:?}");
    assert!(default.iter().any(|a| a == "--lost-node-retention=24h"), "{default:?}");
    assert!(!default.iter().any(|a| a == "--use-apiserver-cache" || a == "--apiserver-compression"), "{default:?}");
}

fn parse_yaml(path: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap()).unwrap()
}

fn rule<'a>(spec: &'a Value, alert: &str) -> Option<&'a Value> {
    spec["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).find(|r| r["alert"] == alert)
}

fn promtool_check(name: &str, spec: &Value) {
    let path = std::env::temp_dir().join(format!("misschedule-rendered-rules-{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, serde_json::to_string(spec).unwrap()).unwrap();
    let out = Command::new("promtool").args(["check", "rules"]).arg(&path).output().expect("promtool");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    std::fs::remove_file(&path).ok();
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn default_rules_and_dashboard_are_the_repository_files() {
    let files = render(everything_on());
    assert_eq!(files["prometheusrule.yaml"].1["spec"], parse_yaml("alerts/misschedule-exporter.rules.yaml"));
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("dashboards/misschedule-exporter.json")).unwrap(),
    )
    .unwrap();
    let configmap = &files["dashboard-configmap.yaml"].1;
    let shipped: Value =
        serde_json::from_str(configmap["data"]["misschedule-exporter.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, dashboard);
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
}

#[test]
#[ignore = "needs helm-python-sdk and promtool: scripts/test.sh runs it"]
fn drain_stuck_threshold_is_configurable_and_the_rules_stay_valid() {
    let files = render(json!({"prometheusRule": {"enabled": true, "drainStuckSeconds": 3600}}));
    let spec = &files["prometheusrule.yaml"].1["spec"];
    let stuck = rule(spec, "DaemonSetDrainStuck").unwrap();
    assert!(stuck["expr"].as_str().unwrap().trim_end().ends_with(") > 3600"), "{}", stuck["expr"]);
    // Only the threshold differs from the shipped expression.
    let shipped = parse_yaml("alerts/misschedule-exporter.rules.yaml");
    let shipped = rule(&shipped, "DaemonSetDrainStuck").unwrap()["expr"].as_str().unwrap().replace("> 2700", "> 3600");
    assert_eq!(stuck["expr"], shipped.as_str());
    promtool_check("drain", spec);
}

#[test]
#[ignore = "needs helm-python-sdk and promtool: scripts/test.sh runs it"]
fn rule_values_disable_override_and_label_alerts_as_data() {
    let files = render(json!({"prometheusRule": {
        "enabled": true,
        "disabled": {"DaemonSetMisscheduledUnexplained": true},
        "customRules": {"DaemonSetPodMisscheduled": {"for": "30m", "severity": "critical"}, "DaemonSetDrainStuck": {"for": "5m"}},
        "additionalRuleLabels": {"team": "platform"},
        "additionalRuleAnnotations": {"dashboard": "https://grafana.example/d/misschedule-exporter"},
        "runbookUrl": "https://wiki.example/runbooks/misschedule/",
    }}));
    let spec = &files["prometheusrule.yaml"].1["spec"];
    let shipped = parse_yaml("alerts/misschedule-exporter.rules.yaml");
    assert!(rule(spec, "DaemonSetMisscheduledUnexplained").is_none());
    let pod = rule(spec, "DaemonSetPodMisscheduled").unwrap();
    assert_eq!(pod["for"], "30m");
    assert_eq!(pod["labels"], json!({"severity": "critical", "team": "platform"}));
    assert_eq!(pod["expr"], rule(&shipped, "DaemonSetPodMisscheduled").unwrap()["expr"]);
    let stuck = rule(spec, "DaemonSetDrainStuck").unwrap();
    assert_eq!(stuck["for"], "5m");
    assert_eq!(stuck["labels"], json!({"severity": "warning", "team": "platform"}));
    let down = rule(spec, "MisscheduleExporterDown").unwrap();
    assert_eq!(down["for"], rule(&shipped, "MisscheduleExporterDown").unwrap()["for"]);
    assert_eq!(down["annotations"]["runbook_url"], "https://wiki.example/runbooks/misschedule#misscheduleexporterdown");
    assert_eq!(down["annotations"]["dashboard"], "https://grafana.example/d/misschedule-exporter");
    assert_eq!(
        down["annotations"]["summary"],
        rule(&shipped, "MisscheduleExporterDown").unwrap()["annotations"]["summary"]
    );
    let count = |spec: &Value| {
        spec["groups"].as_array().unwrap().iter().map(|g| g["rules"].as_array().unwrap().len()).sum::<usize>()
    };
    assert_eq!(count(spec), count(&shipped) - 1);
    promtool_check("custom", spec);

    // A typo in an alert name is an error, not a silently ignored value.
    render_fails(
        json!({"prometheusRule": {"enabled": true, "disabled": {"DaemonSetPodMisschedule": true}}}),
        "no alert named \"DaemonSetPodMisschedule\"",
    );
    render_fails(
        json!({"prometheusRule": {"enabled": true, "customRules": {"KubeDaemonSetMisScheduled": {"for": "1m"}}}}),
        "no alert named \"KubeDaemonSetMisScheduled\"",
    );
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn multi_cluster_shows_the_dashboards_cluster_variable() {
    let cluster_hide = |values: Value| -> Value {
        let files = render(values);
        let dashboard: Value = serde_json::from_str(
            files["dashboard-configmap.yaml"].1["data"]["misschedule-exporter.json"].as_str().unwrap(),
        )
        .unwrap();
        dashboard["templating"]["list"].as_array().unwrap().iter().find(|v| v["name"] == "cluster").unwrap()["hide"]
            .clone()
    };
    assert_eq!(cluster_hide(json!({"grafanaDashboard": {"enabled": true}})), 2);
    assert_eq!(cluster_hide(json!({"grafanaDashboard": {"enabled": true, "multiCluster": true}})), 0);
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn image_reference_from_registry_repository_tag_or_digest() {
    let image = |values: Value| -> String {
        render(values)["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(image(json!({})), "ghcr.io/misschedule-exporter/misschedule-exporter:0.1.0");
    assert_eq!(image(json!({"image": {"tag": "0.2.0"}})), "ghcr.io/misschedule-exporter/misschedule-exporter:0.2.0");
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(json!({"image": {"digest": digest, "tag": "ignored"}})),
        format!("ghcr.io/misschedule-exporter/misschedule-exporter@{digest}")
    );
    assert_eq!(
        image(json!({"global": {"imageRegistry": "registry.internal"}, "image": {"registry": "quay.io"}})),
        "registry.internal/misschedule-exporter/misschedule-exporter:0.1.0"
    );
    assert_eq!(image(json!({"image": {"registry": "", "repository": "me/mse"}})), "me/mse:0.1.0");
    // The test hook's image follows global.imageRegistry too.
    let files = render(json!({"global": {"imageRegistry": "registry.internal"}}));
    assert_eq!(files["readyz.yaml"].1["spec"]["containers"][0]["image"], "registry.internal/curlimages/curl:8.11.1");
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn service_monitor_job_label_relabelings_namespace_and_labels() {
    let files = render(json!({
        "fullnameOverride": "renamed",
        "serviceMonitor": {
            "enabled": true,
            "namespace": "prometheus",
            "additionalLabels": {"release": "kube-prometheus-stack"},
            "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "eu-1"}],
            "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "misschedule_exporter_http_.*"}],
        },
    }));
    let monitor = &files["servicemonitor.yaml"].1;
    assert_eq!(monitor["metadata"]["namespace"], "prometheus");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(monitor["spec"]["namespaceSelector"]["matchNames"], json!(["monitoring"]));
    // The job comes from this Service label, whose value does not follow fullnameOverride.
    let job_label = monitor["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(files["service.yaml"].1["metadata"]["name"], "renamed");
    assert_eq!(files["service.yaml"].1["metadata"]["labels"][job_label], "misschedule-exporter");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["relabelings"][0]["targetLabel"], "cluster");
    assert_eq!(endpoint["metricRelabelings"][0]["action"], "drop");
    assert_eq!(endpoint["honorLabels"], true);
    // In its own namespace by default, with no namespaceSelector.
    let monitor = &render(everything_on())["servicemonitor.yaml"].1;
    assert_eq!(monitor["metadata"]["namespace"], "monitoring");
    assert!(monitor["spec"].get("namespaceSelector").is_none());
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn basic_auth_reaches_the_exporter_and_the_service_monitor() {
    let files = render(json!({
        "serviceMonitor": {"enabled": true},
        "web": {"basicAuthSecret": {"name": "mse-basic", "usernameKey": "user", "passwordKey": "pass"}},
    }));
    let pod = &files["deployment.yaml"].1["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--auth-basic-password-file=/etc/misschedule-exporter/basic-auth/pass")
    );
    let user =
        container["env"].as_array().unwrap().iter().find(|e| e["name"] == "MISSCHEDULE_AUTH_BASIC_USER").unwrap();
    assert_eq!(user["valueFrom"]["secretKeyRef"], json!({"name": "mse-basic", "key": "user"}));
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "mse-basic");
    assert_eq!(
        files["servicemonitor.yaml"].1["spec"]["endpoints"][0]["basicAuth"],
        json!({"username": {"name": "mse-basic", "key": "user"}, "password": {"name": "mse-basic", "key": "pass"}})
    );
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn kubernetes_auth_grants_the_reviews_and_sends_prometheus_token() {
    let prometheus_sa =
        json!({"enabled": true, "kubernetesAuth": {"serviceAccountName": "kps-kube-prometheus-prometheus"}});
    let files = render(json!({"serviceMonitor": prometheus_sa, "web": {"kubernetesAuth": true}}));
    let rules = files["clusterrole.yaml"].1["rules"].as_array().unwrap().clone();
    assert_eq!(
        rules[3..],
        [
            json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
            json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}),
        ]
    );
    let args = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_array().unwrap().iter().any(|a| a == "--auth-kubernetes"));
    // A token from a Secret, which prometheus-operator accepts where it refuses bearerTokenFile
    // (arbitraryFSAccessThroughSMs.deny): a ServiceAccount-token Secret for Prometheus' account.
    let (monitor, secret) = (&files["servicemonitor.yaml#0"].1, &files["servicemonitor.yaml#1"].1);
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert!(endpoint.get("bearerTokenFile").is_none());
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "mse-misschedule-exporter-scrape-token", "key": "token"}})
    );
    assert_eq!((&secret["kind"], &secret["type"]), (&json!("Secret"), &json!("kubernetes.io/service-account-token")));
    assert_eq!(secret["metadata"]["name"], "mse-misschedule-exporter-scrape-token");
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.name"],
        "kps-kube-prometheus-prometheus"
    );
    // Or an existing Secret; and nothing at all is an error that says what to set.
    let existing = json!({"enabled": true, "kubernetesAuth": {"secret": {"name": "prom-token", "key": "t"}}});
    let files = render(json!({"serviceMonitor": existing, "web": {"kubernetesAuth": true}}));
    let endpoint = &files["servicemonitor.yaml"].1["spec"]["endpoints"][0];
    assert_eq!(endpoint["authorization"]["credentials"], json!({"name": "prom-token", "key": "t"}));
    render_fails(
        json!({"serviceMonitor": {"enabled": true}, "web": {"kubernetesAuth": true}}),
        "serviceMonitor.kubernetesAuth.serviceAccountName",
    );
    // Off by default: no review permissions at all.
    let files = render(json!({"serviceMonitor": {"enabled": true}}));
    assert_eq!(files["clusterrole.yaml"].1["rules"].as_array().unwrap().len(), 3, "the read-only rules alone");
    assert!(files["servicemonitor.yaml"].1["spec"]["endpoints"][0].get("authorization").is_none());
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn service_monitor_and_rule_knobs_kube_prometheus_stack_users_set() {
    let files = render(json!({
        "serviceMonitor": {"enabled": true, "annotations": {"team": "sre"}, "targetLabels": ["app.kubernetes.io/instance"],
                           "podTargetLabels": ["topology.kubernetes.io/zone"], "sampleLimit": 50000, "targetLimit": 2,
                           "labelLimit": 20, "labelNameLengthLimit": 64, "labelValueLengthLimit": 512},
        "prometheusRule": {"enabled": true, "keepFiringFor": "5m",
                           "customRules": {"DaemonSetDrainStuck": {"keepFiringFor": "15m"}},
                           "additionalRuleAnnotationsByAlert": {"DaemonSetPodMisscheduled": {"team": "storage"}}},
    }));
    let monitor = &files["servicemonitor.yaml"].1;
    assert_eq!(monitor["metadata"]["annotations"], json!({"team": "sre"}));
    let spec = &monitor["spec"];
    assert_eq!(spec["targetLabels"], json!(["app.kubernetes.io/instance"]));
    assert_eq!(spec["podTargetLabels"], json!(["topology.kubernetes.io/zone"]));
    for (knob, value) in [
        ("sampleLimit", 50000),
        ("targetLimit", 2),
        ("labelLimit", 20),
        ("labelNameLengthLimit", 64),
        ("labelValueLengthLimit", 512),
    ] {
        assert_eq!(spec[knob], value, "{knob}");
    }
    let rules = &files["prometheusrule.yaml"].1["spec"];
    assert_eq!(rule(rules, "DaemonSetPodMisscheduled").unwrap()["keep_firing_for"], "5m");
    assert_eq!(rule(rules, "DaemonSetDrainStuck").unwrap()["keep_firing_for"], "15m");
    assert_eq!(rule(rules, "DaemonSetPodMisscheduled").unwrap()["annotations"]["team"], "storage");
    assert!(rule(rules, "DaemonSetNodeLost").unwrap()["annotations"].get("team").is_none(), "only that alert");
    promtool_check("knobs", rules);
    render_fails(
        json!({"prometheusRule": {"enabled": true, "additionalRuleAnnotationsByAlert": {"NoSuchAlert": {"a": "b"}}}}),
        "there is no alert named \"NoSuchAlert\"",
    );
    // Unset, none of them appears.
    let files = render(json!({"serviceMonitor": {"enabled": true}, "prometheusRule": {"enabled": true}}));
    let spec = &files["servicemonitor.yaml"].1["spec"];
    assert!(
        ["targetLabels", "podTargetLabels", "sampleLimit", "labelLimit"].iter().all(|k| spec.get(k).is_none()),
        "{spec}"
    );
    assert!(
        rule(&files["prometheusrule.yaml"].1["spec"], "DaemonSetPodMisscheduled")
            .unwrap()
            .get("keep_firing_for")
            .is_none()
    );
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn events_grant_writing_events_only_when_enabled() {
    let files = render(json!({"events": {"enabled": true}}));
    let rules = files["clusterrole.yaml"].1["rules"].as_array().unwrap().clone();
    assert_eq!(rules[3..], [json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]})]);
    let container = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0];
    assert!(container["args"].as_array().unwrap().iter().any(|a| a == "--events"));
    // The Events name the replica that wrote them.
    let env = container["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "POD_NAME" && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"));

    let files = render(json!({}));
    let rules = files["clusterrole.yaml"].1["rules"].as_array().unwrap().clone();
    assert_eq!(
        rules[2..],
        [json!({"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]})],
        "read-only by default: the controller's FailedCreate Events"
    );
    let args = &files["deployment.yaml"].1["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(!args.as_array().unwrap().iter().any(|a| a == "--events"));
}

/// Values that turn on every optional object and knob.
fn kitchen_sink() -> Value {
    let mut values = everything_on();
    values["replicaCount"] = json!(2);
    values["events"] = json!({"enabled": true});
    values["guard"] = json!({"enabled": true, "exemptUsers": ["system:serviceaccount:nfd:nfd-master"]});
    values["commonLabels"] = json!({"team": "platform"});
    values["podDisruptionBudget"] = json!({"enabled": true});
    values["networkPolicy"] = json!({
        "enabled": true,
        "ingressFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prometheus"}}}],
        "apiServer": {"cidrs": ["10.0.0.1/32"], "ports": [6443]},
    });
    values["topologySpreadConstraints"] =
        json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]);
    values["extraManifests"] = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "{{ .Release.Name }}-extra"}, "data": {"a": "b"}},
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-extra\nstringData:\n  token: t\n",
    ]);
    values
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn the_guard_is_registered_safe_by_construction_with_a_certificate_it_trusts() {
    let files = render(
        json!({"guard": {"enabled": true, "timeoutSeconds": 2, "exemptUsers": ["system:serviceaccount:nfd:nfd-master"]}}),
    );
    let secret = &files["guard-webhook.yaml#0"].1;
    let config = &files["guard-webhook.yaml#1"].1;
    assert_eq!(
        (secret["kind"].as_str(), config["kind"].as_str()),
        (Some("Secret"), Some("ValidatingWebhookConfiguration"))
    );
    let webhooks = config["webhooks"].as_array().unwrap();
    assert_eq!(webhooks.len(), 2);
    for webhook in webhooks {
        assert_eq!(webhook["failurePolicy"], "Ignore");
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["timeoutSeconds"], 2);
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
        assert!(!webhook["matchConditions"].as_array().unwrap().is_empty());
        assert_eq!(
            webhook["clientConfig"]["service"],
            json!({"name": "mse-misschedule-exporter", "namespace": "monitoring", "path": "/validate", "port": 443})
        );
        // The CA the API server trusts signed the certificate the pods serve.
        assert_eq!(webhook["clientConfig"]["caBundle"], secret["data"]["ca.crt"]);
    }
    assert_eq!(webhooks[0]["rules"][0]["resources"], json!(["nodes"]));
    assert_eq!(webhooks[1]["rules"][0]["resources"], json!(["daemonsets"]));
    let dir = std::env::temp_dir().join(format!("misschedule-guard-cert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for key in ["ca.crt", "tls.crt"] {
        let pem =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, secret["data"][key].as_str().unwrap())
                .unwrap();
        std::fs::write(dir.join(key), pem).unwrap();
    }
    let verified = std::process::Command::new("openssl")
        .args(["verify", "-verify_hostname", "mse-misschedule-exporter.monitoring.svc", "-CAfile"])
        .arg(dir.join("ca.crt"))
        .arg(dir.join("tls.crt"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stdout));

    let pod = &files["deployment.yaml"].1["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    for arg in [
        "--webhook-listen=0.0.0.0:18494",
        "--webhook-tls-cert-file=/etc/misschedule-exporter/webhook/tls.crt",
        "--guard-exempt-user=system:serviceaccount:nfd:nfd-master",
    ] {
        assert!(args.contains(&arg), "{arg} not in {args:?}");
    }
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["secret"]["secretName"] == "mse-misschedule-exporter-webhook-tls")
    );
    let ports = &files["service.yaml"].1["spec"]["ports"];
    assert!(
        ports
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "webhook" && p["port"] == 443 && p["targetPort"] == "webhook")
    );

    // With cert-manager: its Certificate, a self-signed Issuer, and the cainjector's annotation.
    let files = render(json!({"guard": {"enabled": true, "certManager": {"enabled": true}}}));
    let kinds: Vec<&str> =
        (0..3).map(|i| files[&format!("guard-webhook.yaml#{i}")].1["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Issuer", "Certificate", "ValidatingWebhookConfiguration"]);
    let config = &files["guard-webhook.yaml#2"].1;
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "monitoring/mse-misschedule-exporter-webhook"
    );
    assert!(config["webhooks"][0]["clientConfig"].get("caBundle").is_none());
    assert_eq!(files["guard-webhook.yaml#1"].1["spec"]["secretName"], "mse-misschedule-exporter-webhook-tls");

    // The API server waits 3 s at most for a webhook that may not stand in the way.
    render_fails(json!({"guard": {"enabled": true, "timeoutSeconds": 10}}), "timeoutSeconds");
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn optional_objects_network_policy_pdb_spread_and_extra_manifests() {
    let files = render(kitchen_sink());
    // Every object the chart makes carries commonLabels; extraManifests are the user's own.
    for (name, (_, object)) in files.iter().filter(|(name, _)| !name.starts_with("extra-manifests")) {
        assert_eq!(object["metadata"]["labels"]["team"], "platform", "{name} lacks commonLabels");
    }
    let selector = &files["deployment.yaml"].1["spec"]["selector"]["matchLabels"];
    let policy = &files["networkpolicy.yaml"].1["spec"];
    assert_eq!(&policy["podSelector"]["matchLabels"], selector);
    assert_eq!(
        policy["ingress"],
        json!([{
            "ports": [{"port": "http-metrics", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prometheus"}}}],
        }, {
            // The API server calls the guard.
            "ports": [{"port": "webhook", "protocol": "TCP"}],
            "from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
        }])
    );
    assert_eq!(
        policy["egress"][0],
        json!({"ports": [{"port": 6443, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]})
    );
    let pdb = &files["poddisruptionbudget.yaml"].1["spec"];
    assert_eq!(pdb["minAvailable"], 1);
    assert_eq!(&pdb["selector"]["matchLabels"], selector);
    let spread = &files["deployment.yaml"].1["spec"]["template"]["spec"]["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(&spread["labelSelector"]["matchLabels"], selector, "the chart fills in its own pods");
    assert_eq!(files["extra-manifests.yaml#0"].1["metadata"]["name"], "mse-extra");
    assert_eq!(files["extra-manifests.yaml#1"].1["kind"], "Secret");

    // One replica: no PodDisruptionBudget, which would block every drain of its node.
    let mut one = kitchen_sink();
    one["replicaCount"] = json!(1);
    assert!(!render(one).contains_key("poddisruptionbudget.yaml"));
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn helm_test_hook_requests_readyz_through_the_service() {
    for (values, url) in [
        (json!({}), "http://mse-misschedule-exporter.monitoring.svc:18493/readyz"),
        (everything_on_with_tls_and_auth(), "https://mse-misschedule-exporter.monitoring.svc:18493/readyz"),
    ] {
        let files = render(values);
        let pod = &files["readyz.yaml"].1;
        assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
        let args = pod["spec"]["containers"][0]["args"].as_array().unwrap();
        assert_eq!(args.last().unwrap(), url);
        assert!(args.iter().any(|a| a == "--fail"));
    }
    assert!(!render(json!({"helmTest": {"enabled": false}})).contains_key("readyz.yaml"));
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn notes_tell_kube_prometheus_stack_users_about_the_release_label() {
    let notes = |values: Value| -> String {
        let out = python(&["notes", CHART, &values.to_string()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let without = notes(everything_on());
    assert!(
        without.contains("--set serviceMonitor.additionalLabels.release=<kube-prometheus-stack release name>"),
        "{without}"
    );
    assert!(without.contains("--set prometheusRule.labels.release=<kube-prometheus-stack release name>"), "{without}");
    let with = notes(json!({
        "serviceMonitor": {"enabled": true, "additionalLabels": {"release": "kps"}},
        "prometheusRule": {"enabled": true, "labels": {"release": "kps"}},
    }));
    assert!(!with.contains("release="), "{with}");
    // With the rules: the stock alerts they replace, to turn off.
    for stock in
        ["KubeDaemonSetMisScheduled: true", "KubeDaemonSetRolloutStuck: true", "KubeDaemonSetNotScheduled: true"]
    {
        assert!(with.contains(stock), "{with}");
    }
    assert!(!notes(json!({})).contains("KubeDaemonSet"), "no rules, nothing to replace");
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
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
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
#[ignore = "needs helm-python-sdk and kubernetes-validate: scripts/test.sh runs it"]
fn rendered_manifests_pass_kubernetes_validate_strict() {
    for (name, values) in
        [("plain", everything_on()), ("tls", everything_on_with_tls_and_auth()), ("kitchen-sink", kitchen_sink())]
    {
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
    let objects: usize = core
        .iter()
        .map(|p| {
            let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(p).unwrap()).unwrap();
            docs.iter().filter(|d| !d.is_null()).count()
        })
        .sum();
    assert!(objects >= 7, "{name}: only {objects} objects");
    // The oldest and newest Kubernetes our users run: the guard's ValidatingWebhookConfiguration
    // (matchConditions, GA in 1.30) included in the kitchen sink.
    for version in ["1.33.0", "1.37.0"] {
        let out = Command::new("kubernetes-validate")
            .args(["--strict", "--kubernetes-version", version])
            .args(&core)
            .output()
            .expect("kubernetes-validate is required (scripts/test.sh installs it)");
        let report = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name} on {version}: {report}");
        assert_eq!(report.matches(" passed for resource ").count(), objects, "{name} on {version}: {report}");
    }
    std::fs::remove_dir_all(&dir).ok();
    // The two prometheus-operator kinds have no bundled schema; their shape is checked above
    // (rules equal to alerts/ and promtool-valid; the ServiceMonitor's endpoint), and
    // tests/alerting.rs has a real Prometheus scrape the way that ServiceMonitor configures it.
}

/// promtool's unit test of `rules` (a rule file's spec) with `tests` (its `tests:` list).
fn promtool_test(name: &str, rules: &Value, tests: Value) {
    let dir = std::env::temp_dir().join(format!("misschedule-rule-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rules.yaml"), serde_json::to_string(rules).unwrap()).unwrap();
    let test = json!({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests});
    std::fs::write(dir.join("test.yaml"), serde_json::to_string(&test).unwrap()).unwrap();
    let out =
        Command::new("promtool").args(["test", "rules", "test.yaml"]).current_dir(&dir).output().expect("promtool");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "{name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs helm-python-sdk and promtool: scripts/test.sh runs it"]
fn name_override_moves_the_job_and_the_rules_and_dashboard_follow() {
    let files = render(
        json!({"nameOverride": "mse", "prometheusRule": {"enabled": true}, "grafanaDashboard": {"enabled": true}, "serviceMonitor": {"enabled": true}}),
    );
    // The job the ServiceMonitor produces: the value of its jobLabel on the Service.
    let service = &files["service.yaml"].1;
    let job_label = files["servicemonitor.yaml"].1["spec"]["jobLabel"].as_str().unwrap().to_owned();
    assert_eq!(service["metadata"]["labels"][&job_label], "mse");
    let spec = &files["prometheusrule.yaml"].1["spec"];
    let text = serde_json::to_string(spec).unwrap();
    assert!(!text.contains("job=\\\"misschedule-exporter\\\""), "a rule still selects the default job: {text}");
    let shipped = serde_json::to_string(&parse_yaml("alerts/misschedule-exporter.rules.yaml")).unwrap();
    let selectors = shipped.matches("job=\\\"misschedule-exporter\\\"").count();
    assert!(selectors > 10);
    assert_eq!(text.matches("job=\\\"mse\\\"").count(), selectors, "every exporter selector: {text}");
    assert!(text.contains("job=\\\"kube-state-metrics\\\""), "kube-state-metrics' job is not ours to move");
    let dashboard =
        files["dashboard-configmap.yaml"].1["data"]["misschedule-exporter.json"].as_str().unwrap().to_owned();
    assert!(!dashboard.contains("job=\\\"misschedule-exporter\\\"") && dashboard.contains("job=\\\"mse\\\""));
    promtool_check("name-override", spec);

    // The rules fire on that job's series and stay quiet on another's.
    let pod = |job: &str| {
        format!(
            "daemonset_misscheduled_pod_info{{job=\"{job}\",namespace=\"storage\",daemonset=\"ssd-agent\",pod=\"ssd-agent-y\",node=\"n2\",reason=\"label_drift\",key=\"disk\"}}"
        )
    };
    let up = |job: &str| format!("up{{job=\"{job}\",instance=\"10.0.0.1:18493\"}}");
    let annotations = |alert: &str, description: &str| {
        let rule = rule(spec, alert).unwrap();
        json!({"summary": rule["annotations"]["summary"], "runbook_url": rule["annotations"]["runbook_url"], "description": description})
    };
    let paged = json!([{
        "exp_labels": {"severity": "warning", "namespace": "storage", "daemonset": "ssd-agent", "pod": "ssd-agent-y", "node": "n2", "reason": "label_drift", "key": "disk"},
        "exp_annotations": annotations("DaemonSetPodMisscheduled", "Pod storage/ssd-agent-y of DaemonSet ssd-agent is misscheduled on node n2: reason label_drift, key disk. Run `misschedule-exporter explain -n storage --daemonset ssd-agent` for the fix."),
    }]);
    let down = json!([{
        "exp_labels": {"severity": "warning", "job": "mse"},
        "exp_annotations": annotations("MisscheduleExporterDown", "No misschedule-exporter target has been up for 10 minutes; misscheduled DaemonSet pods go unexplained."),
    }]);
    promtool_test(
        "name-override",
        spec,
        json!([
            {
                "interval": "1m",
                "input_series": [{"series": pod("mse"), "values": "1x20"}, {"series": up("mse"), "values": "1x20"}],
                "alert_rule_test": [
                    {"eval_time": "11m", "alertname": "DaemonSetPodMisscheduled", "exp_alerts": paged},
                    {"eval_time": "11m", "alertname": "MisscheduleExporterDown", "exp_alerts": []},
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": pod("misschedule-exporter"), "values": "1x20"},
                    {"series": up("misschedule-exporter"), "values": "1x20"},
                ],
                "alert_rule_test": [
                    {"eval_time": "11m", "alertname": "DaemonSetPodMisscheduled", "exp_alerts": []},
                    // Its own job's target is absent: the exporter is down, as far as these rules know.
                {"eval_time": "11m", "alertname": "MisscheduleExporterDown", "exp_alerts": down},
                ],
            },
        ]),
    );

    // With a jobLabel the Service lacks, prometheus-operator names the job after the Service.
    let files = render(
        json!({"nameOverride": "mse", "prometheusRule": {"enabled": true}, "serviceMonitor": {"enabled": true, "jobLabel": "team"}}),
    );
    let service_name = files["service.yaml"].1["metadata"]["name"].as_str().unwrap().to_owned();
    let text = serde_json::to_string(&files["prometheusrule.yaml"].1["spec"]).unwrap();
    assert!(text.contains(&format!("job=\\\"{service_name}\\\"")), "{service_name}: {text}");
}

#[test]
#[ignore = "needs helm-python-sdk: scripts/test.sh runs it"]
fn subchart_knobs_namespace_override_global_pull_secrets_and_release_label() {
    let files = render(json!({
        "namespaceOverride": "observability",
        "global": {"imagePullSecrets": ["regcred", {"name": "mirror"}]},
        "imagePullSecrets": [{"name": "regcred"}, {"name": "own"}],
        "releaseLabel": true,
        // Beside Prometheus, so it must select the exporter's namespace.
        "serviceMonitor": {"enabled": true, "namespace": "prometheus"},
        "prometheusRule": {"enabled": true},
        "grafanaDashboard": {"enabled": true},
        "networkPolicy": {"enabled": true},
        "podDisruptionBudget": {"enabled": true},
    }));
    // Every namespaced object, and whatever points at one.
    for (name, (_, object)) in &files {
        let kind = object["kind"].as_str().unwrap();
        if !matches!(kind, "ClusterRole" | "ClusterRoleBinding" | "ServiceMonitor") {
            assert_eq!(object["metadata"]["namespace"], "observability", "{name}");
        }
    }
    let binding = &files["clusterrolebinding.yaml"].1;
    assert_eq!(binding["subjects"][0]["namespace"], "observability");
    let monitor = &files["servicemonitor.yaml"].1;
    assert_eq!(monitor["spec"]["namespaceSelector"]["matchNames"], json!(["observability"]));
    let readyz = &files["readyz.yaml"].1;
    assert!(readyz["spec"]["containers"][0]["args"].to_string().contains(".observability.svc:"), "{readyz}");
    // Pull secrets: the umbrella's first, each once, strings and maps alike, on both pods.
    let pulls = json!([{"name": "regcred"}, {"name": "mirror"}, {"name": "own"}]);
    assert_eq!(files["deployment.yaml"].1["spec"]["template"]["spec"]["imagePullSecrets"], pulls);
    assert_eq!(readyz["spec"]["imagePullSecrets"], pulls);
    // kube-prometheus-stack's default selector.
    for file in ["servicemonitor.yaml", "prometheusrule.yaml"] {
        assert_eq!(files[file].1["metadata"]["labels"]["release"], "mse", "{file}");
    }
    assert!(files["deployment.yaml"].1["metadata"]["labels"].get("release").is_none(), "only where Prometheus selects");
    let notes = python(&["notes", CHART, &json!({"namespaceOverride": "observability"}).to_string()]);
    let notes = String::from_utf8_lossy(&notes.stdout);
    assert!(notes.contains("kubectl -n observability port-forward") && !notes.contains("-n monitoring"), "{notes}");
    // None of it by default.
    let plain = render(json!({"serviceMonitor": {"enabled": true}}));
    assert!(plain["servicemonitor.yaml"].1["metadata"]["labels"].get("release").is_none());
    assert!(plain["deployment.yaml"].1["spec"]["template"]["spec"].get("imagePullSecrets").is_none());
}
