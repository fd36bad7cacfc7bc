//! What users have today beside what the exporter says, side by side on the lab: the same
//! real Prometheus scrapes kube-state-metrics and the exporter, and evaluates kubernetes-mixin's
//! three DaemonSet alerts (tests/fixtures/kubernetes-mixin-daemonset.rules.yaml) next to
//! ours (alerts/misschedule-exporter.rules.yaml). Two scenes on three DaemonSets:
//!
//! - a node drained for scale-down: the cluster-autoscaler taint on a node running all three;
//! - nfd-master dropping the GPU label from a node: the controller deletes the pod at once.
//!
//! After each, the test records what kube-state-metrics exposes, which alerts are pending or
//! firing (and so would page after their `for`), and what the exporter's metrics, Events,
//! page and plugin say; and it asserts the claims docs/compared.md makes. With
//! `COMPARED_MD=FILE` (scripts/compare.sh) it writes that page.

mod support;

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::cluster::*;
use support::nfd::set_feature;
use support::plugin::{expose_exporter, kubectl_plugin};
use support::prometheus::Prometheus;

const GPU: &str = "feature.node.kubernetes.io/pci-10de.present";
const DAEMONSETS: [&str; 3] = ["node-agent", "log-agent", "gpu-agent"];
/// The three DaemonSets' alerts in kubernetes-mixin, and ours that speak of DaemonSets.
const STOCK: [&str; 3] = ["KubeDaemonSetMisScheduled", "KubeDaemonSetNotScheduled", "KubeDaemonSetRolloutStuck"];
const OURS: [&str; 6] = [
    "DaemonSetPodMisscheduled",
    "DaemonSetDrainStuck",
    "DaemonSetNodeLost",
    "DaemonSetCoverageFlapping",
    "DaemonSetMisscheduledUnexplained",
    "DaemonSetRolloutStuck",
];
/// How long each scene runs before it is recorded: long enough for every rule to have been
/// evaluated on what the change did many times over (scrape and evaluation every second).
const OBSERVE: Duration = Duration::from_secs(20);

struct Lab {
    cp: ControlPlane,
    admin: Cluster,
    exporter: Exporter,
    prometheus: Prometheus,
}

impl Lab {
    fn kubeconfig(&self) -> &str {
        self.cp.get("ADMIN_KUBECONFIG")
    }

    /// `kube_daemonset_status_*` per DaemonSet: now, and the highest misscheduled count since `window`.
    fn ksm(&self, window: Duration) -> String {
        let mut out = String::from(
            "| DaemonSet | desired | current | available | misscheduled now | misscheduled, most in the scene |\n|---|---|---|---|---|---|\n",
        );
        let value = |expr: &str| {
            let result = self.prometheus.query(expr);
            result.first().and_then(|r| r["value"][1].as_str()).unwrap_or("(no series)").to_owned()
        };
        for ds in DAEMONSETS {
            let metric = |name: &str| value(&format!("{name}{{job=\"kube-state-metrics\",daemonset=\"{ds}\"}}"));
            let most = value(&format!(
                "max_over_time(kube_daemonset_status_number_misscheduled{{job=\"kube-state-metrics\",daemonset=\"{ds}\"}}[{}s])",
                window.as_secs().max(1)
            ));
            writeln!(
                out,
                "| {ds} | {} | {} | {} | {} | {most} |",
                metric("kube_daemonset_status_desired_number_scheduled"),
                metric("kube_daemonset_status_current_number_scheduled"),
                metric("kube_daemonset_status_number_available"),
                metric("kube_daemonset_status_number_misscheduled"),
            )
            .unwrap();
        }
        out
    }

    /// The alerts of `names` Prometheus holds: (name, state, labels worth showing, description).
    fn alerts(&self, names: &[&str]) -> Vec<(String, String, String, String)> {
        let mut alerts: Vec<_> = self
            .prometheus
            .alerts()
            .into_iter()
            .filter(|a| names.contains(&a["labels"]["alertname"].as_str().unwrap_or_default()))
            .map(|a| {
                let labels = &a["labels"];
                let shown: Vec<String> = ["daemonset", "node", "reason", "key"]
                    .into_iter()
                    .filter_map(|l| labels[l].as_str().map(|v| format!("{l}={v}")))
                    .collect();
                (
                    labels["alertname"].as_str().unwrap_or_default().to_owned(),
                    a["state"].as_str().unwrap_or_default().to_owned(),
                    shown.join(", "),
                    a["annotations"]["description"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        alerts.sort();
        alerts
    }

    fn alert_table(&self, names: &[&str]) -> String {
        let alerts = self.alerts(names);
        if alerts.is_empty() {
            return "none pending or firing\n".to_owned();
        }
        let mut out = String::from("| alert | state | labels | description |\n|---|---|---|---|\n");
        for (name, state, labels, description) in alerts {
            writeln!(out, "| {name} | {state} | {labels} | {} |", description.replace('|', "\\|")).unwrap();
        }
        out
    }

    /// The exporter's own series about DaemonSets that are not zero.
    fn exporter_series(&self) -> String {
        let metrics = self.exporter.metrics();
        let lines: Vec<&str> = metrics
            .lines()
            .filter(|l| {
                l.starts_with("daemonset_misscheduled_pod_info")
                    || l.starts_with("daemonset_lost_node_info")
                    || (l.starts_with("daemonset_node_losses_total") && !l.ends_with(" 0"))
            })
            .collect();
        if lines.is_empty() { "(none)\n".to_owned() } else { lines.join("\n") + "\n" }
    }

    /// What `kubectl describe ds NAME` lists under Events: the controller's and the exporter's.
    fn described_events(&self, ds: &str) -> String {
        let out = std::process::Command::new("kubectl")
            .args(["--kubeconfig", self.kubeconfig(), "-n", NS, "describe", "ds", ds])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        text.split_once("Events:").map_or("(none)".to_owned(), |(_, events)| format!("Events:{}", events.trim_end()))
    }

    fn plugin(&self, args: &[&str]) -> String {
        let out = kubectl_plugin(self.kubeconfig()).args(["-n", NS]).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The page's text, as a person reads it: the headings and the rows, cells split by `|`.
    fn page_text(&self) -> String {
        let (_, html) = self.exporter.get("/").unwrap();
        let body = html.split_once("<body").map_or(html.as_str(), |(_, b)| b);
        let mut text = String::new();
        let mut tag: Option<String> = None;
        for c in body.chars() {
            match (c, tag.as_mut()) {
                ('<', _) => tag = Some(String::new()),
                ('>', Some(t)) => {
                    let closing = t.starts_with('/');
                    let name = t.trim_start_matches('/').split_whitespace().next().unwrap_or("").to_owned();
                    match name.as_str() {
                        "tr" | "h1" | "h2" | "p" | "li" | "div" | "nav" => text.push('\n'),
                        "td" | "th" if !closing => text.push_str(" | "),
                        _ => text.push(' '),
                    }
                    tag = None;
                }
                (_, Some(t)) => t.push(c),
                (_, None) => text.push(c),
            }
        }
        let lines: Vec<String> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .map(|l| l.trim_matches(|c| c == ' ' || c == '|').to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        let text = lines.join("\n");
        [("&#39;", "'"), ("&quot;", "\""), ("&gt;", ">"), ("&lt;", "<"), ("&amp;", "&")]
            .into_iter()
            .fold(text, |text, (entity, c)| text.replace(entity, c))
    }

    /// The most misscheduled nodes kube-state-metrics reported for any of the DaemonSets since `since`.
    fn ksm_most_misscheduled(&self, since: Instant) -> f64 {
        let expr = format!(
            "max(max_over_time(kube_daemonset_status_number_misscheduled{{job=\"kube-state-metrics\"}}[{}s]))",
            since.elapsed().as_secs().max(1)
        );
        let result = self.prometheus.query(&expr);
        result.first().and_then(|r| r["value"][1].as_str()?.parse().ok()).unwrap_or(f64::NAN)
    }

    /// One scene's section of docs/compared.md: what was done, what was seen (`seen`, a
    /// summary written from the recorded values), then the record.
    fn record(&self, title: &str, what: &str, seen: &str, since: Instant) -> String {
        let mut out = format!(
            "## {title}\n\n{what}\n\n{seen}\n\nRecorded {:.0} s after the change.\n\n",
            since.elapsed().as_secs_f64()
        );
        out += "### kube-state-metrics\n\n";
        out += &self.ksm(since.elapsed());
        out += "\n### kubernetes-mixin's alerts on it\n\n";
        out += &self.alert_table(&STOCK);
        out += "\n### misschedule-exporter\n\nMetrics:\n\n```\n";
        out += &self.exporter_series();
        out += "```\n\nIts alerts (`alerts/misschedule-exporter.rules.yaml`):\n\n";
        out += &self.alert_table(&OURS);
        for ds in DAEMONSETS {
            write!(out, "\n`kubectl describe ds {ds}`:\n\n```\n{}\n```\n", self.described_events(ds)).unwrap();
        }
        out += "\nThe page (`/`), as text:\n\n```\n";
        out += &self.page_text();
        out += "\n```\n\n`kubectl misschedule -n monitoring` (one look at the cluster):\n\n```\n";
        out += &self.plugin(&[]);
        out += "```\n\n`kubectl misschedule -n monitoring --from-exporter monitoring/misschedule-exporter -o wide`:\n\n```\n";
        out += &self.plugin(&["--from-exporter", "monitoring/misschedule-exporter", "-o", "wide"]);
        out += "```\n\n";
        out
    }

    /// Wait until Prometheus holds an alert `name` (pending or firing) for `ds`.
    async fn await_alert(&self, name: &str, ds: &str) {
        let started = Instant::now();
        while !self.alerts(&[name]).iter().any(|(_, _, labels, _)| labels.contains(&format!("daemonset={ds}"))) {
            assert!(started.elapsed() < STEP_TIMEOUT, "{name} for {ds} never pending: {:#?}", self.prometheus.alerts());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn daemonset(name: &str, node_selector: Value) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"nodeSelector": node_selector,
                                       "containers": [{"name": "agent", "image": format!("registry.example/{name}:1")}]}}}
    }))
    .unwrap()
}

fn prometheus_config(ksm: &str, exporter_port: u16) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: ['{root}/tests/fixtures/kubernetes-mixin-daemonset.rules.yaml', '{root}/alerts/misschedule-exporter.rules.yaml']\n\
         scrape_configs:\n\
         \x20 - job_name: kube-state-metrics\n    static_configs: [{{targets: ['{ksm}']}}]\n\
         \x20 - job_name: misschedule-exporter\n    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab and Prometheus: scripts/test.sh runs it"]
async fn kube_state_metrics_and_the_stock_alerts_beside_the_exporter() {
    let cp = ControlPlane::start_lab("compared", &LabOptions { components: &["nfd", "ksm"], ..Default::default() });
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    agent_scene(&admin, &["n1", "n2", "n3"]).await;
    admin.daemonsets.delete("agent", &Default::default()).await.unwrap();
    for node in ["n1", "n2", "n3"] {
        set_feature(&admin, node, GPU, Some("true")).await;
    }
    for (name, selector) in [("node-agent", json!({})), ("log-agent", json!({})), ("gpu-agent", json!({GPU: "true"}))] {
        admin.daemonsets.create(&PostParams::default(), &daemonset(name, selector)).await.unwrap();
    }
    for ds in DAEMONSETS {
        admin.wait_bound(ds, 3).await;
    }
    grant_exporter(&admin, &READ).await;
    grant_events(&admin).await;
    let exporter =
        Exporter::spawn_on("0.0.0.0", &["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--events"], Stdio::inherit());
    expose_exporter(&admin, exporter.port, "n3").await;
    let ksm = cp.get("KSM_URL").trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(Prometheus::dir("compared"), &prometheus_config(&ksm, exporter.port));
    let lab = Lab { cp, admin, exporter, prometheus };
    lab.prometheus
        .wait_for("count(kube_daemonset_status_desired_number_scheduled{job=\"kube-state-metrics\"} == 3) == 3");
    lab.prometheus.wait_for("up{job=\"misschedule-exporter\"} == 1");
    expect(&lab.admin, &lab.exporter, "baseline", Default::default()).await;

    let mut doc = format!(
        "# kube-state-metrics and the stock alerts, beside misschedule-exporter\n\n\
         Written by `tests/compared.rs` (`scripts/compare.sh`); do not edit by hand. The lab: Kubernetes {} \
         (`tests/lab/lab.sh`), KWOK nodes n1, n2, n3 (and lab-control-plane, where nfd-master runs), \
         nfd-master {}, kube-state-metrics {}. One Prometheus scrapes both every second and evaluates \
         kubernetes-mixin's `KubeDaemonSetMisScheduled`, `KubeDaemonSetNotScheduled` and \
         `KubeDaemonSetRolloutStuck` as kube-prometheus-stack ships them, and the exporter's rules. \
         A scene is recorded {} s after its change: long before any `for:` ends, so an alert \
         *pending* there pages once its `for` (10 or 15 minutes) has passed if nothing changes, and \
         one that is not pending never will for this change. Three DaemonSets run in namespace \
         `monitoring`: node-agent and log-agent everywhere, gpu-agent on the nodes with \
         `{GPU}=true`, a label nfd-master sets from NodeFeature objects.\n\n",
        lab.cp.get("K8S_VERSION"),
        lab.cp.get("NFD_VERSION"),
        lab.cp.get("KSM_VERSION"),
        OBSERVE.as_secs()
    );

    // The drain. cluster-autoscaler cannot be built here (tests/lab/lab.sh says why), so the
    // taint it puts on a node it scales down is put by kubectl, and its eviction of the
    // daemon pods (--daemonset-eviction-for-occupied-nodes) does not happen.
    let changed = Instant::now();
    let now = support::unix_time().as_secs();
    support::plugin::kubectl(
        lab.kubeconfig(),
        &["taint", "node", "n1", &format!("ToBeDeletedByClusterAutoscaler={now}:NoSchedule")],
    );
    let drained = DAEMONSETS.map(|ds| row(ds, "n1", "autoscaler_drain", "ToBeDeletedByClusterAutoscaler"));
    let started = Instant::now();
    while reported_rows(&lab.exporter.metrics()) != drained.clone().into() {
        assert!(started.elapsed() < STEP_TIMEOUT, "the exporter never showed the drain");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(OBSERVE.saturating_sub(changed.elapsed())).await;
    // Nothing of ours pages for a drain: it is expected.
    assert_eq!(lab.alerts(&OURS), vec![], "a drain pages nothing of ours");
    let counted = lab.ksm_most_misscheduled(changed);
    let stock = lab.alerts(&STOCK);
    let seen = if counted == 0.0 && stock.is_empty() {
        "**What was seen.** kube-state-metrics never counted the three pods, and no stock alert \
         went pending: since 1.33 the DaemonSet controller resyncs a DaemonSet on a node update \
         only when a pod must be created or deleted (or its status already counts a misscheduled \
         pod), and a NoSchedule taint asks for neither, so `status.numberMisscheduled` stayed 0. \
         Whatever next resyncs the DaemonSet (a pod event, an edit) would make it 3, and \
         `KubeDaemonSetMisScheduled` would then page 15 minutes later, for a drain that needs \
         nothing done. The exporter names the three pods at once, says the drain is expected (Normal \
         Events, the page's *Expected* section) and pages nothing."
            .to_owned()
    } else {
        format!(
            "**What was seen.** kube-state-metrics counted up to {counted} misscheduled nodes for a \
             DaemonSet, and {} stock alert(s) went pending, to page after their `for` for a drain \
             that needs nothing done. The exporter names the three pods, says the drain is \
             expected (Normal Events, the page's *Expected* section) and pages nothing.",
            stock.len()
        )
    };
    doc += &lab.record(
        "A node drained for scale-down",
        "`kubectl taint node n1 ToBeDeletedByClusterAutoscaler=<now>:NoSchedule`, the taint \
         cluster-autoscaler puts on a node before it deletes it. The three daemon pods on n1 stay \
         (the controller keeps pods on a node whose NoSchedule taint they do not tolerate) and are \
         misscheduled until the node is gone. cluster-autoscaler could not be built from the module \
         proxy here, so the taint is put by kubectl, and the eviction of the daemon pods it also \
         does by default does not happen.",
        &seen,
        changed,
    );
    // What the stock side makes of it, asserted as the page says it: since 1.33 a NoSchedule
    // taint alone does not resync a DaemonSet, so its status, and kube-state-metrics, may
    // still say 0 while the exporter names three pods.
    support::plugin::kubectl(lab.kubeconfig(), &["taint", "node", "n1", "ToBeDeletedByClusterAutoscaler-"]);
    expect(&lab.admin, &lab.exporter, "the drain called off", Default::default()).await;

    // nfd-master drops the GPU label from n2: the controller deletes gpu-agent's pod at once.
    let changed = Instant::now();
    set_feature(&lab.admin, "n2", GPU, None).await;
    lab.await_alert("DaemonSetNodeLost", "gpu-agent").await;
    tokio::time::sleep(OBSERVE.saturating_sub(changed.elapsed())).await;
    let lost = lab.exporter.metrics();
    assert!(
        lost.lines().any(|l| l.starts_with("daemonset_lost_node_info{")
            && l.contains("daemonset=\"gpu-agent\",node=\"n2\",reason=\"nfd_change\"")
            && l.contains("manager=\"nfd-master\"")),
        "the lost node, its reason and nfd-master: {lost}"
    );
    // kube-state-metrics: nothing lasting. The DaemonSet is whole again, one node smaller.
    let ksm = |name: &str| {
        let result = lab.prometheus.query(&format!("{name}{{job=\"kube-state-metrics\",daemonset=\"gpu-agent\"}}"));
        result.first().and_then(|r| r["value"][1].as_str()).unwrap_or_default().to_owned()
    };
    assert_eq!(ksm("kube_daemonset_status_desired_number_scheduled"), "2");
    assert_eq!(ksm("kube_daemonset_status_number_misscheduled"), "0");
    assert_eq!(lab.alerts(&STOCK), vec![], "no stock alert for the node that lost its agent");
    let counted = lab.ksm_most_misscheduled(changed);
    let while_going = if counted == 0.0 {
        "never counted the pod on n2 as misscheduled (it was gone between two scrapes)".to_owned()
    } else {
        format!("counted {counted} misscheduled node(s) while the pod was going")
    };
    let seen = format!(
        "**What was seen.** kube-state-metrics {while_going}, and now reports gpu-agent whole \
         again, one node smaller: desired 2, \
         available 2. No stock alert went pending; none ever will, since the DaemonSet is healthy \
         by its own status. The exporter lists n2 as lost, with the reason, the label and \
         nfd-master as who removed it, writes a Warning NodeLost Event, and its \
         `DaemonSetNodeLost` is pending: it pages in 10 minutes unless the label comes back."
    );
    doc += &lab.record(
        "nfd-master drops a label",
        "A NodeFeature object stops reporting `feature.node.kubernetes.io/pci-10de.present` for n2, and \
         nfd-master removes the label from the node. gpu-agent's nodeSelector no longer matches n2: \
         the controller deletes its pod at once, and KWOK finishes the delete as a kubelet does.",
        &seen,
        changed,
    );

    if let Ok(path) = std::env::var("COMPARED_MD") {
        std::fs::write(&path, doc).unwrap();
        println!("wrote {path}");
    } else {
        println!("{doc}");
    }
}
