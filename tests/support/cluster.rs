//! A real control plane for the integration suites: etcd, kube-apiserver and the
//! DaemonSet controller started by `tests/controlplane/controlplane.sh`, the exporter
//! binary as a separate process, a stand-in scheduler, and `/metrics` parsing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};

pub use super::Exporter;

pub const NS: &str = "monitoring";
pub const STEP_TIMEOUT: Duration = Duration::from_secs(45);

/// (daemonset, node, reason, key)
pub type Row = (String, String, String, String);

pub fn row(ds: &str, node: &str, reason: &str, key: &str) -> Row {
    (ds.into(), node.into(), reason.into(), key.into())
}

pub fn rows_on(node: &str, dss: &[&str], reason: &str, key: &str) -> BTreeSet<Row> {
    dss.iter().map(|ds| row(ds, node, reason, key)).collect()
}

pub struct ControlPlane {
    pub dir: std::path::PathBuf,
    env: BTreeMap<String, String>,
}

impl ControlPlane {
    /// `name` keeps the directories of several control planes in one test run apart.
    pub fn start(name: &str) -> Self {
        Self::start_with(name, "")
    }

    /// Like `start`, with extra kube-apiserver flags (kept across `start-apiserver`).
    pub fn start_with(name: &str, apiserver_args: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("misschedule-cp-{}-{name}", std::process::id()));
        let mut cp = Self { dir: dir.clone(), env: BTreeMap::new() };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane/controlplane.sh");
        let status = Command::new("bash")
            .arg(script)
            .arg("up")
            .arg(&dir)
            .env("APISERVER_EXTRA_ARGS", apiserver_args)
            .status()
            .expect("run controlplane.sh");
        // Fail loudly: a suite that cannot provision its control plane proves nothing.
        assert!(status.success(), "control plane failed to start; see logs in {}", dir.display());
        let env = std::fs::read_to_string(dir.join("env")).expect("controlplane env file");
        cp.env = env.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        cp
    }

    pub fn get(&self, key: &str) -> &str {
        &self.env[key]
    }

    /// `controlplane.sh COMMAND DIR`: up, down, kill-apiserver (SIGKILL), start-apiserver.
    pub fn script(&self, command: &str) -> std::process::ExitStatus {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane/controlplane.sh");
        Command::new("bash").arg(script).arg(command).arg(&self.dir).status().expect("run controlplane.sh")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = self.script("down");
    }
}

/// `name{a="b",...} value` lines of one metric, as label maps and values.
pub fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let prefix = format!("{name}{{");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            let labels = labels
                .split("\",")
                .filter_map(|pair| pair.split_once("=\""))
                .map(|(k, v)| (k.to_owned(), v.trim_end_matches('"').to_owned()))
                .collect();
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

pub fn reported_rows(metrics: &str) -> BTreeSet<Row> {
    samples(metrics, "daemonset_misscheduled_pod_info")
        .into_iter()
        .map(|(l, _)| row(&l["daemonset"], &l["node"], &l["reason"], &l["key"]))
        .collect()
}

pub fn reported_totals(metrics: &str) -> BTreeMap<String, i64> {
    let mut totals = BTreeMap::new();
    for (labels, value) in samples(metrics, "daemonset_misscheduled_nodes") {
        *totals.entry(labels["daemonset"].clone()).or_default() += value as i64;
    }
    totals
}

pub struct Cluster {
    pub client: Client,
    pub nodes: Api<Node>,
    pub daemonsets: Api<DaemonSet>,
    pub pods: Api<Pod>,
}

impl Cluster {
    pub async fn connect(kubeconfig: &str) -> Self {
        let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
        let client = Client::try_from(config).unwrap();
        Self {
            nodes: Api::all(client.clone()),
            daemonsets: Api::namespaced(client.clone(), NS),
            pods: Api::namespaced(client.clone(), NS),
            client,
        }
    }

    pub async fn patch_node(&self, name: &str, patch: Value) {
        self.nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    pub async fn set_taints(&self, name: &str, taints: Value) {
        self.patch_node(name, json!({"spec": {"taints": taints}})).await;
    }

    pub async fn patch_daemonset(&self, name: &str, patch: Value) {
        self.daemonsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// Act as the scheduler: bind pending daemon pods to the node their matchFields term names.
    pub async fn bind_pending(&self) {
        let Ok(pods) = self.pods.list(&ListParams::default()).await else { return };
        for pod in pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
            super::kubelet::bind(&self.pods, pod).await;
        }
    }

    /// Finish terminating pods, as a kubelet would once the containers stopped.
    pub async fn finish_terminating(&self) {
        let Ok(pods) = self.pods.list(&ListParams::default()).await else { return };
        for pod in pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
            let _ =
                self.pods.delete(pod.metadata.name.as_deref().unwrap(), &DeleteParams::default().grace_period(0)).await;
        }
    }

    /// Live `status.numberMisscheduled` per DaemonSet, once the scene has settled: the
    /// controller has seen the latest spec, every eligible node has a pod, and no pod is
    /// waiting for the scheduler (a pending pod would be deleted, not kept, by the next step).
    pub async fn status_totals(&self) -> Option<BTreeMap<String, i64>> {
        let pending =
            self.pods.list(&ListParams::default()).await.ok()?.into_iter().any(|p| {
                p.metadata.deletion_timestamp.is_none() && p.spec.as_ref().is_none_or(|s| s.node_name.is_none())
            });
        if pending {
            return None;
        }
        let mut totals = BTreeMap::new();
        for ds in self.daemonsets.list(&ListParams::default()).await.ok()? {
            let status = ds.status?;
            if status.observed_generation != ds.metadata.generation
                || status.current_number_scheduled != status.desired_number_scheduled
            {
                return None;
            }
            totals.insert(ds.metadata.name.unwrap(), i64::from(status.number_misscheduled));
        }
        Some(totals)
    }

    /// Nudge the controller to resync every DaemonSet (it has no node-delete handler).
    pub async fn resync(&self) {
        let stamp = Instant::now().elapsed().as_nanos().to_string() + &std::process::id().to_string();
        for ds in self.daemonsets.list(&ListParams::default()).await.unwrap() {
            let patch = json!({"metadata": {"annotations": {"test/resync": format!("{stamp}-{:?}", Instant::now())}}});
            self.patch_daemonset(ds.metadata.name.as_deref().unwrap(), patch).await;
        }
    }

    /// `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json`, exactly what a
    /// user would feed to `--snapshot`, minus managedFields (noise kubectl 1.20 still prints).
    pub fn record(kubeconfig: &str, dir: &Path, name: &str) {
        let out = Command::new("kubectl")
            .args(["--kubeconfig", kubeconfig, "get", "nodes,daemonsets,controllerrevisions,pods", "-A", "-o", "json"])
            .output()
            .expect("RECORD_SNAPSHOTS needs kubectl (scripts/record-examples.sh installs it)");
        assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
        let mut list: Value = serde_json::from_slice(&out.stdout).unwrap();
        for item in list["items"].as_array_mut().unwrap() {
            if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
        }
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), serde_json::to_string_pretty(&list).unwrap() + "\n").unwrap();
        if name == "cluster-autoscaler-drain" {
            // One scene also as raw `-o yaml`, managedFields and all, to keep the YAML path honest.
            let yaml = Command::new("kubectl")
                .args([
                    "--kubeconfig",
                    kubeconfig,
                    "get",
                    "nodes,daemonsets,controllerrevisions,pods",
                    "-A",
                    "-o",
                    "yaml",
                ])
                .output()
                .unwrap();
            assert!(yaml.status.success());
            std::fs::write(dir.join(format!("{name}.yaml")), yaml.stdout).unwrap();
        }
    }
}

pub const READ: [&str; 3] = ["get", "list", "watch"];

/// The exporter's ClusterRole with `pod_verbs` on pods and full read on the rest.
pub fn exporter_role(pod_verbs: &[&str]) -> k8s_openapi::api::rbac::v1::ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": READ},
            {"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs},
            {"apiGroups": ["apps"], "resources": ["daemonsets", "controllerrevisions"], "verbs": READ}
        ]
    }))
    .unwrap()
}

/// Bind the exporter's user (EXPORTER_KUBECONFIG) to `exporter_role(pod_verbs)`.
pub async fn grant_exporter(admin: &Cluster, pod_verbs: &[&str]) {
    bind_exporter(admin, exporter_role(pod_verbs)).await;
}

/// Also let the exporter's user write Events (the chart's `events.enabled` rule).
pub async fn grant_events(admin: &Cluster) {
    bind_exporter(
        admin,
        serde_json::from_value(json!({
            "metadata": {"name": "misschedule-exporter-events"},
            "rules": [{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "get", "patch"]}]
        }))
        .unwrap(),
    )
    .await;
}

/// Create `role` and bind the exporter's user to it, under the role's name.
async fn bind_exporter(admin: &Cluster, role: k8s_openapi::api::rbac::v1::ClusterRole) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let pp = PostParams::default();
    let name = role.metadata.name.clone().unwrap();
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "misschedule-exporter"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.client.clone()).create(&pp, &binding).await.unwrap();
}

/// (Event objects, writes counting each series' repeats) that `--events` made in NS.
pub async fn misscheduled_event_writes(admin: &Cluster) -> (usize, i64) {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> = Api::namespaced(admin.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    let ours: Vec<_> = list.items.into_iter().filter(|e| e.reason.as_deref() == Some("Misscheduled")).collect();
    let writes = ours.iter().map(|e| i64::from(e.series.as_ref().map_or(1, |s| s.count))).sum();
    (ours.len(), writes)
}

/// The namespace NS, nodes named `nodes` (labelled only with their hostname), and a
/// DaemonSet `agent` that runs on every node: the scene most live tests start from.
pub async fn agent_scene(admin: &Cluster, nodes: &[&str]) {
    let pp = PostParams::default();
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::all(admin.client.clone()).create(&pp, &namespace).await.unwrap();
    for name in nodes {
        // Labelled as a kubelet registers a node. The label also matters to the API server:
        // an object created with no field at all to own gets no managedFields, and 1.20 then
        // tracks no later update either, so no change on it could be attributed.
        let node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
        admin.nodes.create(&pp, &serde_json::from_value(node).unwrap()).await.unwrap();
    }
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}
    }))
    .unwrap();
    admin.daemonsets.create(&pp, &ds).await.unwrap();
}

/// Wait until the exporter reports exactly `expected` and agrees with the controller.
pub async fn expect(cluster: &Cluster, exporter: &Exporter, step: &str, expected: BTreeSet<Row>) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < STEP_TIMEOUT {
        cluster.bind_pending().await;
        let metrics = exporter.metrics();
        let rows = reported_rows(&metrics);
        let ours = reported_totals(&metrics);
        match cluster.status_totals().await {
            Some(status) if rows == expected && status == ours => {
                println!("step {step:<40} ok: {} pods misscheduled, totals {ours:?}", rows.len());
                return started.elapsed();
            }
            status => last = format!("rows {rows:#?}\nexporter totals {ours:?}\ncontroller status {status:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("step {step}: no agreement within {STEP_TIMEOUT:?}\nexpected {expected:#?}\nlast seen: {last}");
}

/// The chart rendered with every optional core object on: file name → object. Left out: the
/// prometheus-operator kinds (this control plane has no CRDs) and the PodDisruptionBudget
/// (policy/v1 arrived in 1.21; our users run 1.28+, this control plane is 1.20).
pub fn render_chart() -> BTreeMap<String, Value> {
    super::chart::render(&serde_json::json!({
        "grafanaDashboard": {"enabled": true},
        "events": {"enabled": true},
        "commonLabels": {"team": "platform"},
        "networkPolicy": {"enabled": true, "apiServer": {"cidrs": ["127.0.0.1/32"]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}],
        "web": {"basicAuthSecret": {"name": "mse-basic"}},
        "extraManifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "{{ .Release.Name }}-extra"}}],
    }))
}

/// Server-side dry-run of every rendered object: the real API server validates and defaults them.
pub async fn dry_run_chart(admin: &Cluster, rendered: &BTreeMap<String, Value>) {
    let dry_run = PostParams { dry_run: true, ..Default::default() };
    for (file, object) in rendered {
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let types = object.types.clone().unwrap();
        let gvk = GroupVersionKind::try_from(&types).unwrap();
        let (resource, caps) = kube::discovery::pinned_kind(&admin.client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(admin.client.clone(), NS, &resource),
            Scope::Cluster => Api::all_with(admin.client.clone(), &resource),
        };
        api.create(&dry_run, &object).await.unwrap_or_else(|e| panic!("dry-run of {file} rejected: {e}"));
    }
    println!("chart: {} rendered objects accepted by server-side dry-run", rendered.len());
}
