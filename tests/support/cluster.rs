//! The lab for the integration suites: Kubernetes (etcd, kube-apiserver, the controller
//! manager, kube-scheduler) with KWOK running the nodes, started by `tests/lab/lab.sh`; the
//! exporter binary as a separate process, and `/metrics` parsing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};

pub use super::Exporter;

pub const NS: &str = "monitoring";
pub const STEP_TIMEOUT: Duration = Duration::from_secs(45);

/// Poll `condition` every 100 ms until it holds; how long that took. Panics after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

/// (daemonset, node, reason, key)
pub type Row = (String, String, String, String);

pub fn row(ds: &str, node: &str, reason: &str, key: &str) -> Row {
    (ds.into(), node.into(), reason.into(), key.into())
}

pub fn rows_on(node: &str, dss: &[&str], reason: &str, key: &str) -> BTreeSet<Row> {
    dss.iter().map(|ds| row(ds, node, reason, key)).collect()
}

fn lab_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/lab.sh")
}

/// What a test asks of the lab beyond the control plane, kube-scheduler and KWOK.
#[derive(Default)]
pub struct LabOptions<'a> {
    /// `nfd`, `autoscaler`, `ksm`.
    pub components: &'a [&'a str],
    /// Extra kube-apiserver flags (kept across `start-apiserver`).
    pub apiserver_args: &'a str,
    /// Nodes lab.sh creates (lab-node-1...); tests that name their own nodes leave it at 0.
    pub nodes: usize,
}

/// One lab cluster, torn down when dropped.
pub struct ControlPlane {
    pub dir: std::path::PathBuf,
    env: BTreeMap<String, String>,
}

impl ControlPlane {
    /// `name` keeps the directories of several labs in one test run apart.
    pub fn start(name: &str) -> Self {
        Self::start_lab(name, &LabOptions::default())
    }

    /// Like `start`, with extra kube-apiserver flags (kept across `start-apiserver`).
    pub fn start_with(name: &str, apiserver_args: &str) -> Self {
        Self::start_lab(name, &LabOptions { apiserver_args, ..Default::default() })
    }

    pub fn start_lab(name: &str, options: &LabOptions) -> Self {
        let dir = std::env::temp_dir().join(format!("misschedule-lab-{}-{name}", std::process::id()));
        let mut cp = Self { dir: dir.clone(), env: BTreeMap::new() };
        let status = Command::new("bash")
            .arg(lab_script())
            .arg("up")
            .arg(&dir)
            .args(options.components)
            .env("APISERVER_EXTRA_ARGS", options.apiserver_args)
            .env("LAB_NODES", options.nodes.to_string())
            .status()
            .expect("run tests/lab/lab.sh");
        // Fail loudly: a suite that cannot provision its lab proves nothing.
        assert!(status.success(), "the lab failed to start; see the logs in {}", dir.display());
        let env = std::fs::read_to_string(dir.join("env")).expect("the lab's env file");
        cp.env = env.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        // The live tests drive the lab's own kubectl by name, as a user would.
        let on_path = Command::new("sh").args(["-c", "command -v kubectl"]).output().ok();
        let on_path = on_path.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
        assert_eq!(
            Path::new(&on_path).parent(),
            Some(Path::new(cp.get("LAB_BIN"))),
            "kubectl on PATH is {on_path:?}, not the lab's: put $(tests/lab/lab.sh bin) first on PATH (scripts/test.sh does)"
        );
        cp
    }

    pub fn get(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("{key} is not in the lab's env ({})", self.dir.display()))
    }

    /// `lab.sh COMMAND DIR`: down, kill-apiserver (SIGKILL), start-apiserver.
    pub fn script(&self, command: &str) -> std::process::ExitStatus {
        Command::new("bash").arg(lab_script()).arg(command).arg(&self.dir).status().expect("run tests/lab/lab.sh")
    }
}

impl Drop for ControlPlane {
    /// Stops the lab; its directory (etcd's data, the components' logs) stays only when the
    /// test failed: two full runs otherwise left 3 GB in /tmp.
    fn drop(&mut self) {
        let _ = self.script("down");
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
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

    pub async fn create_namespace(&self, name: &str) {
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        Api::all(self.client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }

    /// Create nodes as a kubelet registers them (labelled with their hostname and `extra`),
    /// and wait until KWOK has made them Ready and the node lifecycle controller has lifted
    /// the not-ready taint that TaintNodesByCondition put on them at creation.
    pub async fn add_nodes(&self, names: &[&str], extra: &[(&str, &str)]) {
        for name in names {
            let mut labels = json!({"kubernetes.io/hostname": name});
            for (key, value) in extra {
                labels[*key] = json!(value);
            }
            // The annotation a kubelet sets when it registers a node. (Its absence matters:
            // nfd-master's JSON patch adds to `metadata.annotations` and fails without it.)
            let annotations = json!({"volumes.kubernetes.io/controller-managed-attach-detach": "true"});
            let node = json!({"metadata": {"name": name, "labels": labels, "annotations": annotations}});
            self.nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
        }
        self.wait_ready(names).await;
    }

    /// Wait until these nodes are Ready and carry no not-ready taint.
    pub async fn wait_ready<S: AsRef<str>>(&self, names: &[S]) {
        let started = Instant::now();
        loop {
            let ready: BTreeSet<String> = match self.nodes.list(&ListParams::default()).await {
                Ok(list) => {
                    list.items.iter().filter(|n| node_is_ready(n)).filter_map(|n| n.metadata.name.clone()).collect()
                }
                Err(_) => BTreeSet::new(),
            };
            let waiting: Vec<&str> = names.iter().map(AsRef::as_ref).filter(|n| !ready.contains(*n)).collect();
            if waiting.is_empty() {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(90), "nodes {waiting:?} never became Ready under KWOK");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until `count` pods of DaemonSet `ds` (label `app=ds`) are bound by kube-scheduler
    /// and none is terminating.
    pub async fn wait_bound(&self, ds: &str, count: usize) {
        let started = Instant::now();
        loop {
            let pods = self.pods.list(&ListParams::default().labels(&format!("app={ds}"))).await;
            let pods = pods.map(|l| l.items).unwrap_or_default();
            let bound = pods.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count();
            if bound == count && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none()) {
                return;
            }
            assert!(started.elapsed() < STEP_TIMEOUT, "{ds}: {bound} of {count} pods bound");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `status_totals`, nudging the controller when the status may be stale: a status that
    /// disagrees with `want` gets a resync at most every 2 s (see `resync`), so that a
    /// step compares with what the controller computes from the current objects.
    pub async fn fresh_status_totals(
        &self,
        want: &BTreeMap<String, i64>,
        nudged: &mut Instant,
    ) -> Option<BTreeMap<String, i64>> {
        let status = self.status_totals().await;
        if status.as_ref() != Some(want) && nudged.elapsed() > Duration::from_secs(2) {
            self.resync().await;
            *nudged = Instant::now();
        }
        status
    }

    /// Live `status.numberMisscheduled` per DaemonSet, once the scene has settled: the
    /// controller has seen the latest spec, every eligible node has a pod, and no pod is
    /// waiting for the scheduler (a pending pod would be deleted, not kept, by the next step).
    pub async fn status_totals(&self) -> Option<BTreeMap<String, i64>> {
        let pending =
            self.pods.list(&ListParams::default()).await.ok()?.into_iter().any(|p| {
                p.metadata.deletion_timestamp.is_none() && p.spec.as_ref().is_none_or(|s| s.node_name.is_none())
            });
        // (Until kube-scheduler binds a new pod, the next step could delete it instead.)
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

    /// Nudge the controller to resync every DaemonSet: it has no node-delete handler, and
    /// since 1.33 a node update resyncs a DaemonSet only when a pod must be created or
    /// deleted (or its status already counts a misscheduled pod), so a NoSchedule taint
    /// that strands a pod leaves `status.numberMisscheduled` stale (docs/controller-semantics.md).
    pub async fn resync(&self) {
        let stamp = Instant::now().elapsed().as_nanos().to_string() + &std::process::id().to_string();
        for ds in self.daemonsets.list(&ListParams::default()).await.unwrap() {
            let patch = json!({"metadata": {"annotations": {"test/resync": format!("{stamp}-{:?}", Instant::now())}}});
            self.patch_daemonset(ds.metadata.name.as_deref().unwrap(), patch).await;
        }
    }

    /// `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json --show-managed-fields`:
    /// exactly what the README tells a user to feed to `--snapshot`, so that every manager is known.
    pub fn record(kubeconfig: &str, dir: &Path, name: &str) {
        let get = |format: &str| {
            let out = Command::new("kubectl")
                .args(["--kubeconfig", kubeconfig, "get", "nodes,daemonsets,controllerrevisions,pods", "-A"])
                .args(["-o", format, "--show-managed-fields"])
                .output()
                .expect("RECORD_SNAPSHOTS needs the lab's kubectl on PATH");
            assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), get("json")).unwrap();
        if name == "cluster-autoscaler-drain" {
            // One scene also as `-o yaml`, to keep the YAML path honest.
            std::fs::write(dir.join(format!("{name}.yaml")), get("yaml")).unwrap();
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
            {"apiGroups": ["apps"], "resources": ["daemonsets", "controllerrevisions"], "verbs": READ},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]}
        ]
    }))
    .unwrap()
}

/// Bind the exporter's user (EXPORTER_KUBECONFIG) to `exporter_role(pod_verbs)`.
pub async fn grant_exporter(admin: &Cluster, pod_verbs: &[&str]) {
    bind_exporter(admin, exporter_role(pod_verbs)).await;
}

/// Ready, as the scheduler and the DaemonSet controller see it: the Ready condition is True
/// and no not-ready or unreachable taint is left.
pub fn node_is_ready(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|taints| {
        taints.iter().any(|t| t.key == "node.kubernetes.io/not-ready" || t.key == "node.kubernetes.io/unreachable")
    });
    ready && !tainted
}

/// Also let the exporter's user write Events (the chart's `events.enabled` rule).
pub async fn grant_events(admin: &Cluster) {
    bind_exporter(
        admin,
        serde_json::from_value(json!({
            "metadata": {"name": "misschedule-exporter-events"},
            "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]}]
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

/// The namespace NS, Ready nodes named `nodes` (labelled only with their hostname), and a
/// DaemonSet `agent` that runs on every node: the scene most live tests start from.
pub async fn agent_scene(admin: &Cluster, nodes: &[&str]) {
    let pp = PostParams::default();
    admin.create_namespace(NS).await;
    admin.add_nodes(nodes, &[]).await;
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}
    }))
    .unwrap();
    admin.daemonsets.create(&pp, &ds).await.unwrap();
}

/// Wait until the exporter reports exactly `expected` and agrees with the controller (nudged
/// to resync where its status may lag: `Cluster::fresh_status_totals`).
pub async fn expect(cluster: &Cluster, exporter: &Exporter, step: &str, expected: BTreeSet<Row>) -> Duration {
    let started = Instant::now();
    let mut nudged = started;
    let mut last = String::new();
    while started.elapsed() < STEP_TIMEOUT {
        let metrics = exporter.metrics();
        let rows = reported_rows(&metrics);
        let ours = reported_totals(&metrics);
        match cluster.fresh_status_totals(&ours, &mut nudged).await {
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
/// prometheus-operator kinds (the lab has no CRDs of theirs).
pub fn render_chart() -> BTreeMap<String, Value> {
    super::chart::render(&serde_json::json!({
        "replicaCount": 2,
        "podDisruptionBudget": {"enabled": true},
        "grafanaDashboard": {"enabled": true},
        "events": {"enabled": true},
        "guard": {"enabled": true},
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
