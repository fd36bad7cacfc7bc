//! What-if against the real DaemonSet controller: for each change, ask
//! `kubectl misschedule what-if` first (through the real kubectl, the plugin on PATH),
//! check it wrote nothing, then make the change (with kubectl, or as nfd-master makes it)
//! and let the lab act: kube-scheduler binds new pods and KWOK finishes deletes. What the controller did
//! must be what-if's answer: the pods it deleted, the nodes it created pods on, the
//! misscheduled and desired counts in its status, and the reasons the plugin then gives.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use serde_json::{Value, json};
use support::cluster::*;
use support::nfd::set_feature;
use support::plugin::{kubectl, kubectl_plugin};

const GPU: &str = "feature.node.kubernetes.io/pci-10de.present";

/// What the cluster shows once settled.
#[derive(Debug, PartialEq)]
struct State {
    /// (DaemonSet, node) → pod names and UIDs there.
    pods: BTreeMap<(String, String), BTreeSet<(String, String)>>,
    /// DaemonSet → (desiredNumberScheduled, numberMisscheduled).
    status: BTreeMap<String, (i64, i64)>,
}

/// The cluster once the controller is done: every DaemonSet's status observed and complete,
/// no pod waiting for a node, none terminating.
async fn settled(admin: &Cluster) -> Option<State> {
    let pods = admin.pods.list(&ListParams::default()).await.ok()?;
    let mut state = State { pods: BTreeMap::new(), status: BTreeMap::new() };
    for pod in pods {
        let spec = pod.spec.as_ref()?;
        if pod.metadata.deletion_timestamp.is_some() || spec.node_name.is_none() {
            return None;
        }
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let Some(ds) = labels.get("app").filter(|_| labels.contains_key("pod-template-generation")) else { continue };
        let key = (ds.clone(), spec.node_name.clone()?);
        let id = (pod.metadata.name.clone()?, pod.metadata.uid.clone()?);
        state.pods.entry(key).or_default().insert(id);
    }
    for ds in admin.daemonsets.list(&ListParams::default()).await.ok()? {
        let status = ds.status?;
        if status.observed_generation != ds.metadata.generation
            || status.current_number_scheduled != status.desired_number_scheduled
        {
            return None;
        }
        let counts = (i64::from(status.desired_number_scheduled), i64::from(status.number_misscheduled));
        state.status.insert(ds.metadata.name?, counts);
    }
    Some(state)
}

async fn wait_settled(admin: &Cluster, step: &str) -> State {
    // A NoSchedule taint alone leaves the status stale since 1.33: resync first, so that the
    // status is what the controller computes from the objects as they are.
    admin.resync().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    loop {
        if let Some(state) = settled(admin).await {
            return state;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "{step}: the cluster never settled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Rows as `daemonset node pod effect`, pods of `create` as `-`.
type Effects = BTreeSet<String>;

/// What the controller did between `before` and `after`.
fn done(before: &State, after: &State) -> (Effects, BTreeMap<String, (i64, i64)>) {
    let mut effects = Effects::new();
    for ((ds, node), pods) in &before.pods {
        for (name, uid) in pods {
            let kept = after.pods.get(&(ds.clone(), node.clone())).is_some_and(|p| p.iter().any(|(_, u)| u == uid));
            if !kept {
                effects.insert(format!("{ds} {node} {name} delete"));
            }
        }
    }
    for (ds, node) in after.pods.keys() {
        if !before.pods.contains_key(&(ds.clone(), node.clone())) {
            effects.insert(format!("{ds} {node} - create"));
        }
    }
    (effects, after.status.clone())
}

/// What what-if said: its delete and create rows, and each DaemonSet's status after
/// (desired from its answer, misscheduled moved by its rows: up for misschedule, down for
/// recover and for deleting a pod that was `stranded` before).
fn predicted(answer: &Value, before: &State, stranded: &BTreeSet<String>) -> (Effects, BTreeMap<String, (i64, i64)>) {
    let mut effects = Effects::new();
    let mut status = before.status.clone();
    for row in answer["changes"].as_array().unwrap() {
        let f = |name: &str| row[name].as_str().unwrap().to_owned();
        let (ds, effect) = (f("daemonset"), f("effect"));
        let entry = status.entry(ds.clone()).or_insert((0, 0));
        match effect.as_str() {
            "misschedule" => entry.1 += 1,
            "recover" => entry.1 -= 1,
            _ => {
                if effect == "delete" && stranded.contains(&f("pod")) {
                    entry.1 -= 1;
                }
                let pod = if f("pod").is_empty() { "-".to_owned() } else { f("pod") };
                effects.insert(format!("{ds} {} {pod} {effect}", f("node")));
            }
        }
    }
    for desired in answer["desired"].as_array().unwrap() {
        let ds = desired["daemonset"].as_str().unwrap().to_owned();
        let entry = status.entry(ds).or_insert((0, 0));
        entry.0 = desired["after"].as_i64().unwrap();
        assert_eq!(
            before.status.get(desired["daemonset"].as_str().unwrap()).map_or(0, |s| s.0),
            desired["before"].as_i64().unwrap(),
            "desired before: {desired}"
        );
    }
    (effects, status)
}

/// Everything a what-if must leave alone: each node's resourceVersion, each DaemonSet's generation.
async fn versions(admin: &Cluster) -> Vec<String> {
    let nodes = admin.nodes.list(&ListParams::default()).await.unwrap();
    let dss = admin.daemonsets.list(&ListParams::default()).await.unwrap();
    let node_versions = nodes.into_iter().map(|n| format!("{:?} {:?}", n.metadata.name, n.metadata.resource_version));
    node_versions.chain(dss.into_iter().map(|d| format!("{:?} {:?}", d.metadata.name, d.metadata.generation))).collect()
}

struct Lab {
    admin: Cluster,
    kubeconfig: String,
    dir: std::path::PathBuf,
}

/// A change as the lab makes it: a kubectl command, or a node feature nfd-master reports.
enum Change<'a> {
    Kubectl(&'a [&'a str]),
    /// (node, label key, value or None for gone)
    Feature(&'a str, &'a str, Option<&'a str>),
}

impl Lab {
    /// Ask what-if, make the change, and compare.
    async fn step(&self, name: &str, what_if: &[&str], change: Change<'_>) {
        let before = wait_settled(&self.admin, name).await;
        let untouched = versions(&self.admin).await;
        let out = kubectl_plugin(&self.kubeconfig).arg("what-if").args(what_if).args(["-o", "json"]).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(versions(&self.admin).await, untouched, "{name}: what-if wrote to the cluster");
        let (effects, status) = predicted(&answer, &before, &self.misscheduled_pods());

        match change {
            Change::Kubectl(args) => kubectl(&self.kubeconfig, args),
            Change::Feature(node, key, value) => set_feature(&self.admin, node, key, value).await,
        }
        // Wait for the controller to do what was predicted; then make sure it does no more.
        let started = Instant::now();
        let mut nudged = started;
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if nudged.elapsed() > Duration::from_secs(2) {
                // (A stranded pod resyncs nothing since 1.33; see wait_settled.)
                self.admin.resync().await;
                nudged = Instant::now();
            }
            let Some(after) = settled(&self.admin).await else { continue };
            let seen = done(&before, &after);
            if seen == (effects.clone(), status.clone()) && started.elapsed() > Duration::from_secs(2) {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let again = wait_settled(&self.admin, name).await;
                assert_eq!(done(&before, &again), seen, "{name}: the controller did more later");
                break;
            }
            assert!(
                started.elapsed() < STEP_TIMEOUT,
                "{name}: what-if said {effects:#?} and {status:?}; the controller did {seen:#?}"
            );
        }
        // The reasons what-if gave a stranded pod are the ones the plugin now gives it.
        let reason = |row: &Value| format!("{} {} {}", row["pod"], row["reason"], row["key"]);
        let live: BTreeSet<String> = self.explain()["misscheduled"].as_array().unwrap().iter().map(reason).collect();
        for row in answer["changes"].as_array().unwrap().iter().filter(|r| r["effect"] == "misschedule") {
            assert!(live.contains(&reason(row)), "{name}: what-if said {row}; the plugin says {live:?}");
        }
        println!("{name:<60} ok: {} rows, {:.1?}", answer["changes"].as_array().unwrap().len(), started.elapsed());
    }

    /// `kubectl misschedule -A -o json`: the live explanation.
    fn explain(&self) -> Value {
        let out = kubectl_plugin(&self.kubeconfig).args(["-A", "-o", "json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The pods misscheduled now, by name.
    fn misscheduled_pods(&self) -> BTreeSet<String> {
        let rows = self.explain()["misscheduled"].as_array().unwrap().clone();
        rows.iter().map(|r| r["pod"].as_str().unwrap().to_owned()).collect()
    }

    fn manifest(&self, file: &str, value: Value) -> String {
        let path = self.dir.join(file);
        std::fs::write(&path, serde_json::to_string(&value).unwrap()).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

fn daemonset(name: &str, pod_spec: Value) -> Value {
    let mut spec = pod_spec;
    spec["containers"] = json!([{"name": "agent", "image": format!("registry.example/{name}:1")}]);
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": NS},
        // OnDelete: a new template replaces no pod, so what the controller does is placement alone.
        "spec": {"selector": {"matchLabels": {"app": name}}, "updateStrategy": {"type": "OnDelete"},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn what_if_says_what_the_controller_then_does() {
    let cp = ControlPlane::start_lab("what-if", &LabOptions { components: &["nfd"], ..Default::default() });
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let kubeconfig = cp.get("ADMIN_KUBECONFIG").to_owned();
    let k = |args: &[&str]| kubectl(&kubeconfig, args);
    agent_scene(&admin, &["n1", "n2", "n3", "n4"]).await;
    // The agent runs on n4 before the taint, or the controller would skip n4.
    admin.wait_bound("agent", 4).await;
    for node in ["n1", "n2"] {
        set_feature(&admin, node, GPU, Some("true")).await;
    }
    k(&["label", "node", "n3", "pool=spot"]);
    k(&["taint", "node", "n4", "dedicated=db:NoSchedule"]);
    let dir = cp.dir.join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    let lab = Lab { admin, kubeconfig: kubeconfig.clone(), dir };
    let not_spot = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["spot"]}]}]}}}});
    let tolerant = json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]});
    for (name, spec) in
        [("gpu-agent", json!({"nodeSelector": {GPU: "true"}})), ("steady-agent", not_spot), ("db-agent", tolerant)]
    {
        // Made with kubectl apply, as a GitOps tool would: a later apply then removes what
        // the manifest no longer has (without the last-applied annotation it would stay).
        let file = lab.manifest(&format!("{name}-v1.json"), daemonset(name, spec));
        k(&["apply", "-f", &file]);
    }
    let scene = wait_settled(&lab.admin, "the scene").await;
    // agent came first, so its pod on n4 stays there, stranded by the NoSchedule taint.
    assert_eq!(scene.pods.len(), 4 + 2 + 2 + 4, "{scene:#?}");
    assert_eq!(scene.status["agent"], (3, 1));

    let gpu_off = format!("{GPU}-");
    lab.step(
        "NFD drops the GPU label on n1: deleted at once",
        &["label", "n1", &gpu_off, "--field-manager=nfd-master"],
        Change::Feature("n1", GPU, None),
    )
    .await;
    lab.step(
        "a NoSchedule taint on n2: every agent stranded",
        &["taint", "node", "n2", "maintenance=x:NoSchedule"],
        Change::Kubectl(&["taint", "node", "n2", "maintenance=x:NoSchedule"]),
    )
    .await;
    lab.step(
        "the taint goes: they count again",
        &["taint", "n2", "maintenance:NoSchedule-"],
        Change::Kubectl(&["taint", "node", "n2", "maintenance:NoSchedule-"]),
    )
    .await;
    lab.step(
        "n3 leaves the spot pool: a NotIn term now holds",
        &["label", "n3", "pool-"],
        Change::Kubectl(&["label", "node", "n3", "pool-"]),
    )
    .await;
    lab.step(
        "a NoExecute taint on pool-less nodes: all deleted",
        &["taint", "-l", "!pool", "evict=now:NoExecute"],
        Change::Kubectl(&["taint", "node", "-l", "!pool", "evict=now:NoExecute"]),
    )
    .await;
    lab.step(
        "the NoExecute taint goes: pods created",
        &["taint", "--all", "evict-"],
        Change::Kubectl(&["taint", "node", "--all", "evict-"]),
    )
    .await;
    let strict = lab.manifest("db-agent.json", daemonset("db-agent", json!({})));
    lab.step(
        "db-agent loses its toleration: stranded on n4",
        &["apply", "-f", &strict],
        Change::Kubectl(&["apply", "-f", &strict]),
    )
    .await;
    let narrowed = lab.manifest("agent.json", daemonset("agent", json!({"nodeSelector": {GPU: "true"}})));
    lab.step("agent narrows to GPU nodes", &["apply", "-f", &narrowed], Change::Kubectl(&["apply", "-f", &narrowed]))
        .await;
    let fresh =
        lab.manifest("fresh.json", daemonset("fresh-agent", json!({"nodeSelector": {"kubernetes.io/hostname": "n3"}})));
    lab.step("a new DaemonSet for n3", &["apply", "-f", &fresh], Change::Kubectl(&["apply", "-f", &fresh])).await;

    // Bad input writes nothing either.
    let untouched = versions(&lab.admin).await;
    for args in [
        &["label", "n9", "a=b"][..],
        &["taint", "n1", "x=y:Bad"],
        &["label", "n1", "kubernetes.io/hostname=x"],
        &["apply", "-f", "/nonexistent"],
    ] {
        let out = kubectl_plugin(&kubeconfig).arg("what-if").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(versions(&lab.admin).await, untouched);
}
