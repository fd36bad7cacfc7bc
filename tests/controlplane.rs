//! Scenarios on a real control plane: etcd, kube-apiserver and the real
//! DaemonSet controller (v1.20.2) on loopback, provisioned by
//! `tests/controlplane/controlplane.sh`. The exporter binary runs with an
//! unprivileged token bound to the chart's rendered ClusterRole. After every
//! step the exporter's per-DaemonSet total must equal the live
//! `status.numberMisscheduled`, and every misscheduled pod must have the
//! expected reason and key.
//!
//! Set RECORD_SNAPSHOTS=DIR to write the scenes to DIR (that is how `examples/` is made).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};
use support::http;

mod support;

const NS: &str = "monitoring";
const NODES: [&str; 3] = ["n1", "n2", "n3"];
const AVX: &str = "feature.node.kubernetes.io/cpu-cpuid.AVX";
const STEP_TIMEOUT: Duration = Duration::from_secs(45);

/// (daemonset, node, reason, key)
type Row = (String, String, String, String);

fn row(ds: &str, node: &str, reason: &str, key: &str) -> Row {
    (ds.into(), node.into(), reason.into(), key.into())
}

fn rows_on(node: &str, dss: &[&str], reason: &str, key: &str) -> BTreeSet<Row> {
    dss.iter().map(|ds| row(ds, node, reason, key)).collect()
}

struct ControlPlane {
    dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl ControlPlane {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("misschedule-cp-{}", std::process::id()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane/controlplane.sh");
        let status = Command::new("bash").arg(&script).arg("up").arg(&dir).status().expect("run controlplane.sh");
        let mut cp = Self { dir: dir.clone(), env: BTreeMap::new() };
        // Fail loudly: a suite that cannot provision its control plane proves nothing.
        assert!(status.success(), "control plane failed to start; see logs in {}", dir.display());
        let env = std::fs::read_to_string(dir.join("env")).expect("controlplane env file");
        cp.env = env.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        cp
    }

    fn get(&self, key: &str) -> &str {
        &self.env[key]
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane/controlplane.sh");
        let _ = Command::new("bash").arg(script).arg("down").arg(&self.dir).status();
    }
}

struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(kubeconfig: &str) -> Self {
        let port = http::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
            .args(["--kubeconfig", kubeconfig, "--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start exporter");
        Self { child, port }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        http::get(self.port, path)
    }

    fn metrics(&self) -> String {
        self.get("/metrics").map(|(_, body)| body).unwrap_or_default()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name{a="b",...} value` lines of one metric, as label maps and values.
fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
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

fn reported_rows(metrics: &str) -> BTreeSet<Row> {
    samples(metrics, "daemonset_misscheduled_pod_info")
        .into_iter()
        .map(|(l, _)| row(&l["daemonset"], &l["node"], &l["reason"], &l["key"]))
        .collect()
}

fn reported_totals(metrics: &str) -> BTreeMap<String, i64> {
    let mut totals = BTreeMap::new();
    for (labels, value) in samples(metrics, "daemonset_misscheduled_nodes") {
        *totals.entry(labels["daemonset"].clone()).or_default() += value as i64;
    }
    totals
}

struct Cluster {
    client: Client,
    nodes: Api<Node>,
    daemonsets: Api<DaemonSet>,
    pods: Api<Pod>,
}

impl Cluster {
    async fn connect(kubeconfig: &str) -> Self {
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

    async fn patch_node(&self, name: &str, patch: Value) {
        self.nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    async fn set_taints(&self, name: &str, taints: Value) {
        self.patch_node(name, json!({"spec": {"taints": taints}})).await;
    }

    async fn patch_daemonset(&self, name: &str, patch: Value) {
        self.daemonsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// Act as the scheduler: bind pending daemon pods to the node their matchFields term names.
    async fn bind_pending(&self) {
        let Ok(pods) = self.pods.list(&ListParams::default()).await else { return };
        for pod in pods {
            let spec = pod.spec.as_ref().unwrap();
            if spec.node_name.is_some() || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(node) = misschedule_exporter::convert::target_node_name(spec) else { continue };
            let binding = json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.metadata.name.clone().unwrap()},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
            let _: Result<Value, _> = self
                .pods
                .create_subresource("binding", pod.metadata.name.as_deref().unwrap(), &PostParams::default(), &binding)
                .await;
        }
    }

    /// Finish terminating pods, as a kubelet would once the containers stopped.
    async fn finish_terminating(&self) {
        let Ok(pods) = self.pods.list(&ListParams::default()).await else { return };
        for pod in pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
            let _ =
                self.pods.delete(pod.metadata.name.as_deref().unwrap(), &DeleteParams::default().grace_period(0)).await;
        }
    }

    /// Live `status.numberMisscheduled` per DaemonSet, once the scene has settled: the
    /// controller has seen the latest spec, every eligible node has a pod, and no pod is
    /// waiting for the scheduler (a pending pod would be deleted, not kept, by the next step).
    async fn status_totals(&self) -> Option<BTreeMap<String, i64>> {
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
    async fn resync(&self) {
        let stamp = Instant::now().elapsed().as_nanos().to_string() + &std::process::id().to_string();
        for ds in self.daemonsets.list(&ListParams::default()).await.unwrap() {
            let patch = json!({"metadata": {"annotations": {"test/resync": format!("{stamp}-{:?}", Instant::now())}}});
            self.patch_daemonset(ds.metadata.name.as_deref().unwrap(), patch).await;
        }
    }

    /// `kubectl get nodes,daemonsets,controllerrevisions,pods -A -o json`, exactly what a
    /// user would feed to `--snapshot`, minus managedFields (noise kubectl 1.20 still prints).
    fn record(kubeconfig: &str, dir: &Path, name: &str) {
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

/// Wait until the exporter reports exactly `expected` and agrees with the controller.
async fn expect(cluster: &Cluster, exporter: &Exporter, step: &str, expected: BTreeSet<Row>) -> Duration {
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

async fn create_scene(admin: &Cluster) {
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(admin.client.clone());
    namespaces.create(&pp, &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap()).await.unwrap();

    // The exporter's permissions: exactly the ClusterRole the chart renders.
    let rendered = render_chart();
    dry_run_chart(admin, &rendered).await;
    let role: ClusterRole = serde_json::from_value(rendered["clusterrole.yaml"].clone()).unwrap();
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata.name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "misschedule-exporter"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.client.clone()).create(&pp, &binding).await.unwrap();

    for name in NODES {
        let node = json!({"metadata": {"name": name, "labels": {"disk": "ssd", "zone": "a", AVX: "true", "kubernetes.io/hostname": name}}});
        admin.nodes.create(&pp, &serde_json::from_value(node).unwrap()).await.unwrap();
    }
    let ds = |name: &str, spec: Value| -> DaemonSet {
        let mut pod_spec = json!({"containers": [{"name": "agent", "image": "registry.example/agent:1"}]});
        pod_spec.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
        }))
        .unwrap()
    };
    let zone = |z: &str| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}]}}})
    };
    for d in [
        ds("datadog-agent", json!({})),
        ds(
            "ssd-agent",
            json!({"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
        ),
        ds("avx-agent", json!({"nodeSelector": {AVX: "true"}})),
        ds("zone-agent", json!({"affinity": zone("a")})),
    ] {
        admin.daemonsets.create(&pp, &d).await.unwrap();
    }
}

/// The chart rendered with its optional ConfigMap on (the prometheus-operator kinds need
/// CRDs this control plane does not have): file name → object.
fn render_chart() -> BTreeMap<String, Value> {
    let dir = std::env::temp_dir().join(format!("misschedule-cp-chart-{}", std::process::id()));
    let out = Command::new("python3")
        .args([
            "tests/chart/helm.py",
            "render",
            "charts/misschedule-exporter",
            dir.to_str().unwrap(),
            r#"{"grafanaDashboard":{"enabled":true}}"#,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 with helm-python-sdk (scripts/test.sh installs it)");
    assert!(out.status.success(), "chart render failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), docs.into_iter().next().unwrap())
        })
        .collect()
}

/// Server-side dry-run of every rendered object: the real API server validates and defaults them.
async fn dry_run_chart(admin: &Cluster, rendered: &BTreeMap<String, Value>) {
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

const ALL: [&str; 4] = ["datadog-agent", "ssd-agent", "avx-agent", "zone-agent"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_match_the_real_daemonset_controller() {
    let cp = ControlPlane::start();
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    create_scene(&admin).await;
    let exporter = Exporter::start(cp.get("EXPORTER_KUBECONFIG"));
    let record_dir = std::env::var_os("RECORD_SNAPSHOTS").map(PathBuf::from);
    let admin_kubeconfig = cp.get("ADMIN_KUBECONFIG").to_owned();
    let record = |name: &'static str| {
        if let Some(dir) = &record_dir {
            Cluster::record(&admin_kubeconfig, dir, name);
        }
        std::future::ready(())
    };

    // The exporter's unprivileged token is enough to become ready.
    let started = Instant::now();
    while exporter.get("/readyz").map(|(s, _)| s) != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(30), "exporter never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    expect(&admin, &exporter, "baseline: all pods bound", BTreeSet::new()).await;

    // Cluster-autoscaler drain; latency from the API write to /metrics.
    let mut latencies = Vec::new();
    for round in 0..5 {
        let written = Instant::now();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        admin
            .set_taints(
                "n1",
                json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": now.to_string(), "effect": "NoSchedule"}]),
            )
            .await;
        loop {
            if reported_rows(&exporter.metrics()).len() == ALL.len() {
                latencies.push(written.elapsed());
                break;
            }
            assert!(written.elapsed() < STEP_TIMEOUT, "drain taint never showed up on /metrics");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        expect(
            &admin,
            &exporter,
            "cluster-autoscaler drain",
            rows_on("n1", &ALL, "autoscaler_drain", "ToBeDeletedByClusterAutoscaler"),
        )
        .await;
        if round == 0 {
            record("cluster-autoscaler-drain").await;
            explain_live(cp.get("EXPORTER_KUBECONFIG"));
        }
        admin.set_taints("n1", json!([])).await;
        expect(&admin, &exporter, "drain taint removed", BTreeSet::new()).await;
    }
    latencies.sort();
    println!(
        "taint-to-metric latency over {} writes: min {:?}, median {:?}, max {:?}",
        latencies.len(),
        latencies[0],
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
    assert!(latencies[latencies.len() - 1] < Duration::from_secs(1), "taint-to-metric latency above 1s: {latencies:?}");

    admin.set_taints("n1", json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])).await;
    expect(
        &admin,
        &exporter,
        "karpenter disruption",
        rows_on("n1", &ALL, "autoscaler_drain", "karpenter.sh/disrupted"),
    )
    .await;
    admin.set_taints("n1", json!([])).await;
    expect(&admin, &exporter, "karpenter taint removed", BTreeSet::new()).await;

    admin.set_taints("n2", json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])).await;
    expect(
        &admin,
        &exporter,
        "custom NoSchedule taint",
        rows_on("n2", &["datadog-agent", "avx-agent", "zone-agent"], "taint_added", "dedicated"),
    )
    .await;
    record("taint-added").await;

    // The DaemonSet drops the toleration that let ssd-agent stay on n2.
    admin.patch_daemonset("ssd-agent", json!({"spec": {"template": {"spec": {"tolerations": null}}}})).await;
    let mut expected = rows_on("n2", &["datadog-agent", "avx-agent", "zone-agent"], "taint_added", "dedicated");
    expected.insert(row("ssd-agent", "n2", "daemonset_changed", "dedicated"));
    expect(&admin, &exporter, "toleration removed from DaemonSet", expected).await;
    record("toleration-removed").await;
    admin.set_taints("n2", json!([])).await;
    admin
        .patch_daemonset(
            "ssd-agent",
            json!({"spec": {"template": {"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}}}),
        )
        .await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "taint and toleration restored", BTreeSet::new()).await;

    // NoExecute: the controller deletes the pods; bound, they stay terminating and still count.
    admin.set_taints("n3", json!([{"key": "evict", "value": "now", "effect": "NoExecute"}])).await;
    expect(&admin, &exporter, "NoExecute taint, pods terminating", rows_on("n3", &ALL, "taint_added", "evict")).await;
    record("noexecute-terminating").await;
    admin.set_taints("n3", json!([])).await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "NoExecute taint removed", BTreeSet::new()).await;

    // Label drift and NFD label removal.
    admin.patch_node("n2", json!({"metadata": {"labels": {"disk": null}}})).await;
    expect(&admin, &exporter, "nodeSelector label drift", [row("ssd-agent", "n2", "label_drift", "disk")].into()).await;
    record("label-drift").await;
    admin.patch_node("n2", json!({"metadata": {"labels": {"disk": "ssd"}}})).await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "label restored", BTreeSet::new()).await;

    admin.patch_node("n3", json!({"metadata": {"labels": {AVX: null}}})).await;
    expect(&admin, &exporter, "NFD label removed", [row("avx-agent", "n3", "nfd_change", AVX)].into()).await;
    record("nfd-label-removed").await;
    admin.patch_node("n3", json!({"metadata": {"labels": {AVX: "true"}}})).await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "NFD label restored", BTreeSet::new()).await;

    // The DaemonSet's nodeSelector changes under its pods.
    admin
        .patch_daemonset("ssd-agent", json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "nvme"}}}}}))
        .await;
    expect(&admin, &exporter, "DaemonSet nodeSelector changed", rows_on_all("ssd-agent", "daemonset_changed", "disk"))
        .await;
    record("daemonset-selector-changed").await;
    admin
        .patch_daemonset("ssd-agent", json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}))
        .await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "nodeSelector restored", BTreeSet::new()).await;

    // A required node-affinity change: only the ControllerRevision knows the old affinity.
    let zone = |z: &str| {
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}]}}}}}}})
    };
    admin.patch_daemonset("zone-agent", zone("b")).await;
    expect(&admin, &exporter, "required affinity changed", rows_on_all("zone-agent", "daemonset_changed", "zone"))
        .await;
    record("affinity-changed").await;
    admin.patch_daemonset("zone-agent", zone("a")).await;
    admin.finish_terminating().await;
    expect(&admin, &exporter, "affinity restored", BTreeSet::new()).await;

    // Cordon: never misscheduled (the unschedulable taint is a default toleration).
    admin.patch_node("n1", json!({"spec": {"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}})).await;
    expect(&admin, &exporter, "cordoned node", BTreeSet::new()).await;
    admin.patch_node("n1", json!({"spec": {"unschedulable": null, "taints": []}})).await;

    // Deleting a misscheduled pod, then a node, leaves no stale series.
    admin
        .set_taints("n1", json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]))
        .await;
    expect(&admin, &exporter, "drain again", rows_on("n1", &ALL, "autoscaler_drain", "ToBeDeletedByClusterAutoscaler"))
        .await;
    let pods = admin.pods.list(&ListParams::default().labels("app=datadog-agent")).await.unwrap();
    let on_n1 = pods.into_iter().find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("n1")).unwrap();
    admin.pods.delete(on_n1.metadata.name.as_deref().unwrap(), &DeleteParams::default().grace_period(0)).await.unwrap();
    expect(
        &admin,
        &exporter,
        "misscheduled pod deleted",
        rows_on("n1", &["ssd-agent", "avx-agent", "zone-agent"], "autoscaler_drain", "ToBeDeletedByClusterAutoscaler"),
    )
    .await;
    admin.nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    // The controller keeps counting a deleted node until something resyncs the DaemonSet.
    tokio::time::sleep(Duration::from_millis(500)).await;
    admin.resync().await;
    expect(&admin, &exporter, "node deleted", BTreeSet::new()).await;
}

/// `explain -o json` against the live cluster, with the exporter's unprivileged token.
fn explain_live(kubeconfig: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .args(["explain", "--kubeconfig", kubeconfig, "-n", NS, "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "explain failed: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let got: BTreeSet<Row> = rows
        .iter()
        .map(|r| {
            row(
                r["daemonset"].as_str().unwrap(),
                r["node"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
                r["key"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, rows_on("n1", &ALL, "autoscaler_drain", "ToBeDeletedByClusterAutoscaler"));
    assert!(
        rows.iter()
            .all(|r| r["fix"].as_str().unwrap().contains("add toleration ToBeDeletedByClusterAutoscaler:NoSchedule"))
    );
    println!("live explain: {} rows", rows.len());
}

fn rows_on_all(ds: &str, reason: &str, key: &str) -> BTreeSet<Row> {
    NODES.iter().map(|n| row(ds, n, reason, key)).collect()
}
