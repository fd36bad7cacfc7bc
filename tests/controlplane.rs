//! Scenarios on the lab (`tests/lab/lab.sh`): the real DaemonSet controller, kube-scheduler
//! binding the pods, KWOK running the nodes and finishing deletes, nfd-master writing the
//! feature label. The exporter binary runs with an unprivileged token bound to the chart's
//! rendered ClusterRole. After every step the exporter's per-DaemonSet total must equal the
//! live `status.numberMisscheduled`, and every misscheduled pod must have the expected
//! reason and key. Where the controller deletes the pod (a label or affinity no longer
//! matches, a NoExecute taint), KWOK finishes the delete at once, as a kubelet does within
//! the grace period: nothing stays misscheduled, and the node must be listed as lost.
//!
//! Set RECORD_SNAPSHOTS=DIR to write the scenes where pods stay to DIR (that is how
//! `examples/` is made).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};
use support::cluster::*;
use support::nfd::set_feature_on;
use support::plugin::{expose_exporter, kubectl, kubectl_plugin};
use support::scene::*;

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn scenarios_match_the_real_daemonset_controller() {
    let cp = ControlPlane::start_lab("scenarios", &LabOptions { components: &["nfd"], ..Default::default() });
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    create_scene(&admin, Deletes::AtOnce).await;
    // With Events on: the chart's role (events.enabled) allows writing them.
    // On every address: the plugin's --from-exporter reaches it through a Service.
    let exporter =
        Exporter::spawn_on("0.0.0.0", &["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--events"], Stdio::inherit());
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

    // Cluster-autoscaler's drain taint; latency from the API write to /metrics, reported.
    let mut latencies = Vec::new();
    for round in 0..5 {
        let written = Instant::now();
        let now = support::unix_time().as_secs();
        if round == 0 {
            // By kubectl, whose field manager the recorded snapshot then names.
            let taint = format!("ToBeDeletedByClusterAutoscaler={now}:NoSchedule");
            kubectl(cp.get("ADMIN_KUBECONFIG"), &["taint", "node", "n1", &taint]);
        } else {
            admin
                .set_taints(
                    "n1",
                    json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": now.to_string(), "effect": "NoSchedule"}]),
                )
                .await;
        }
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
    plugin_honours_drain_taint_keys(cp.get("EXPORTER_KUBECONFIG"));

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
    expect(&admin, &exporter, "taint and toleration restored", BTreeSet::new()).await;
    expect_lost(&exporter, "nothing lost", BTreeSet::new()).await;

    // NoExecute: the controller deletes the pods, and KWOK finishes the deletes.
    admin.set_taints("n3", json!([{"key": "evict", "value": "now", "effect": "NoExecute"}])).await;
    expect(&admin, &exporter, "NoExecute taint, pods deleted", BTreeSet::new()).await;
    expect_lost(&exporter, "NoExecute taint: n3 lost", rows_on("n3", &ALL, "taint_added", "evict")).await;
    admin.set_taints("n3", json!([])).await;
    expect(&admin, &exporter, "NoExecute taint removed", BTreeSet::new()).await;
    expect_lost(&exporter, "n3 covered again", BTreeSet::new()).await;

    // Label drift and NFD label removal.
    admin.patch_node("n2", json!({"metadata": {"labels": {"disk": null}}})).await;
    expect(&admin, &exporter, "nodeSelector label drift", BTreeSet::new()).await;
    expect_lost(&exporter, "label drift: n2 lost", [row("ssd-agent", "n2", "label_drift", "disk")].into()).await;
    admin.patch_node("n2", json!({"metadata": {"labels": {"disk": "ssd"}}})).await;
    expect_lost(&exporter, "label restored", BTreeSet::new()).await;

    set_feature_on(&admin, &["n3"], AVX, None).await;
    expect(&admin, &exporter, "NFD label removed", BTreeSet::new()).await;
    Listed::Lost.expect(&exporter, "NFD label removed", &[("avx-agent", "n3", "nfd_change", AVX, "nfd-master")]).await;
    set_feature_on(&admin, &["n3"], AVX, Some("true")).await;
    expect_lost(&exporter, "NFD label restored", BTreeSet::new()).await;

    attribution(&admin, &exporter, cp.get("ADMIN_KUBECONFIG")).await;
    no_event_without_a_transition(&admin, &exporter).await;

    // The DaemonSet's nodeSelector changes under its pods: it leaves every node on purpose.
    admin
        .patch_daemonset("ssd-agent", json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "nvme"}}}}}))
        .await;
    expect(&admin, &exporter, "DaemonSet nodeSelector changed", BTreeSet::new()).await;
    expect_lost(&exporter, "nodeSelector changed", rows_on_all("ssd-agent", "daemonset_changed", "disk")).await;
    admin
        .patch_daemonset("ssd-agent", json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}))
        .await;
    expect_lost(&exporter, "nodeSelector restored", BTreeSet::new()).await;

    // A required node-affinity change: only the ControllerRevision knows the old affinity.
    let zone = |z: &str| {
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}]}}}}}}})
    };
    admin.patch_daemonset("zone-agent", zone("b")).await;
    expect(&admin, &exporter, "required affinity changed", BTreeSet::new()).await;
    expect_lost(&exporter, "affinity changed", rows_on_all("zone-agent", "daemonset_changed", "zone")).await;
    admin.patch_daemonset("zone-agent", zone("a")).await;
    expect_lost(&exporter, "affinity restored", BTreeSet::new()).await;
    expect(&admin, &exporter, "affinity restored", BTreeSet::new()).await;

    // Cordon: never misscheduled (the unschedulable taint is a default toleration).
    kubectl(cp.get("ADMIN_KUBECONFIG"), &["cordon", "n1"]);
    expect(&admin, &exporter, "cordoned node", BTreeSet::new()).await;
    kubectl(cp.get("ADMIN_KUBECONFIG"), &["uncordon", "n1"]);

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
    let metrics = exporter.metrics();
    assert!(!metrics.contains("node=\"n1\""), "series for the deleted node n1:\n{metrics}");
}

/// (daemonset, node, reason, key) of every daemonset_lost_node_info series.
fn reported_lost(metrics: &str) -> BTreeSet<Row> {
    samples(metrics, "daemonset_lost_node_info")
        .into_iter()
        .map(|(l, _)| row(&l["daemonset"], &l["node"], &l["reason"], &l["key"]))
        .collect()
}

/// Wait until /metrics lists exactly `expected` as lost nodes.
async fn expect_lost(exporter: &Exporter, step: &str, expected: BTreeSet<Row>) {
    let started = Instant::now();
    loop {
        let got = reported_lost(&exporter.metrics());
        if got == expected {
            println!("step {step:<40} ok: {} nodes lost", got.len());
            return;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "step {step}: want lost {expected:#?}, have {got:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `misschedule-exporter explain -n NS -o json` with `kubeconfig`: the explanation object.
fn explain_json(kubeconfig: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .args(["explain", "--kubeconfig", kubeconfig, "-n", NS, "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "explain failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `explain -o json` against the live cluster, with the exporter's unprivileged token.
fn explain_live(kubeconfig: &str) {
    let explanation = explain_json(kubeconfig);
    let rows = explanation["misscheduled"].as_array().unwrap();
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

/// (daemonset, node, reason, key, manager)
type Attributed = BTreeSet<(String, String, String, String, String)>;

/// What the exporter lists with a manager: its misscheduled pods, or its lost nodes.
#[derive(Clone, Copy, Debug)]
enum Listed {
    Misscheduled,
    Lost,
}

impl Listed {
    fn metric(self) -> &'static str {
        match self {
            Listed::Misscheduled => "daemonset_misscheduled_pod_info",
            Listed::Lost => "daemonset_lost_node_info",
        }
    }

    /// The list's name in an explanation object.
    fn field(self) -> &'static str {
        match self {
            Listed::Misscheduled => "misscheduled",
            Listed::Lost => "lost",
        }
    }

    fn in_metrics(self, metrics: &str) -> Attributed {
        let attributed = |l: BTreeMap<String, String>| {
            (l["daemonset"].clone(), l["node"].clone(), l["reason"].clone(), l["key"].clone(), l["manager"].clone())
        };
        samples(metrics, self.metric()).into_iter().map(|(l, _)| attributed(l)).collect()
    }

    fn in_explanation(self, explanation: &Value) -> Attributed {
        let rows = explanation[self.field()].as_array().unwrap_or_else(|| panic!("a {} list", self.field())).iter();
        rows.map(|r| {
            let f = |name: &str| r[name].as_str().unwrap().to_owned();
            (f("daemonset"), f("node"), f("reason"), f("key"), f("manager"))
        })
        .collect()
    }

    /// Wait until /metrics lists exactly `expected`, then check /explain agrees.
    async fn expect(self, exporter: &Exporter, step: &str, expected: &[(&str, &str, &str, &str, &str)]) {
        let expected: Attributed = expected
            .iter()
            .map(|(d, n, r, k, m)| (d.to_string(), n.to_string(), r.to_string(), k.to_string(), m.to_string()))
            .collect();
        let started = Instant::now();
        let mut got = BTreeSet::new();
        while started.elapsed() < STEP_TIMEOUT {
            got = self.in_metrics(&exporter.metrics());
            if got == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(got, expected, "step {step}: {self:?} and managers on /metrics");
        let (_, body) = exporter.get(&format!("/explain?namespace={NS}")).unwrap();
        let explained = self.in_explanation(&serde_json::from_str(&body).unwrap());
        assert_eq!(explained, expected, "step {step}: {self:?} and managers on /explain");
        println!("step {step:<40} ok: {self:?}, managers {:?}", expected.iter().map(|r| &r.4).collect::<BTreeSet<_>>());
    }
}

/// The cluster, the exporter and the admin kubeconfig.
type Scene<'a> = (&'a Cluster, &'a Exporter, &'a str);

/// `kubectl label node NODE ARGS...`: the controller deletes ssd-agent's pod there, and the
/// exporter must list NODE as lost on `disk` with (reason, manager) on /metrics and /explain.
async fn relabel((admin, exporter, kubeconfig): Scene<'_>, node: &str, args: &[&str], (reason, manager): (&str, &str)) {
    let command: Vec<&str> = ["label", "node", node].into_iter().chain(args.iter().copied()).collect();
    kubectl(kubeconfig, &command);
    let step = format!("kubectl {}", command.join(" "));
    expect(admin, exporter, &step, BTreeSet::new()).await;
    Listed::Lost.expect(exporter, &step, &[("ssd-agent", node, reason, "disk", manager)]).await;
}

/// Who made the change, as real kubectl writes record it in managedFields.
async fn attribution(admin: &Cluster, exporter: &Exporter, kubeconfig: &str) {
    let scene = (admin, exporter, kubeconfig);
    // The plugin reaches the exporter through a Service, as it reaches the chart's.
    expose_exporter(admin, exporter.port, "n1").await;
    // A label changed by a named manager is its own.
    relabel(scene, "n2", &["disk=hdd", "--overwrite", "--field-manager=provisioner"], ("label_drift", "provisioner"))
        .await;
    kubectl(kubeconfig, &["label", "node", "n2", "disk=ssd", "--overwrite", "--field-manager=provisioner"]);
    expect_lost(exporter, "label restored by provisioner", BTreeSet::new()).await;

    // A pure removal: the API server stamps a manager's entry only when it sets or changes a
    // field, so the remover leaves no trace and the label's last owner is the answer.
    relabel(scene, "n2", &["disk-", "--field-manager=ops-relabel"], ("label_drift", "provisioner")).await;
    kubectl(kubeconfig, &["label", "node", "n2", "disk=ssd"]);
    expect_lost(exporter, "label restored by kubectl", BTreeSet::new()).await;

    // Removed in an update that also sets a label: that manager's entry is stamped.
    relabel(scene, "n2", &["disk-", "rack=r1", "--field-manager=ops-relabel"], ("label_drift", "ops-relabel")).await;
    let words = ["Node n2 lost its daemon pod", "key disk", "changed by ops-relabel", "Fix:"];
    await_kube_event(admin, "NodeLost", "ssd-agent", &words).await;
    plugin_sees_the_loss_only_through_the_exporter(kubeconfig);
    kubectl(kubeconfig, &["label", "node", "n2", "disk=ssd", "rack-"]);
    expect_lost(exporter, "label restored", BTreeSet::new()).await;

    // kubectl taint, then a second manager rewrites the (atomic) taint list.
    let watching = PluginWatch::start(kubeconfig);
    kubectl(kubeconfig, &["taint", "node", "n2", "dedicated=db:NoSchedule"]);
    let tainted = [
        ("datadog-agent", "n2", "taint_added", "dedicated", "kubectl-taint"),
        ("avx-agent", "n2", "taint_added", "dedicated", "kubectl-taint"),
        ("zone-agent", "n2", "taint_added", "dedicated", "kubectl-taint"),
    ];
    Listed::Misscheduled.expect(exporter, "kubectl taint", &tainted).await;
    await_event(admin, "datadog-agent", &["reason taint_added", "key dedicated", "changed by kubectl-taint"]).await;
    let tainted_set: Attributed = tainted
        .iter()
        .map(|(d, n, r, k, m)| (d.to_string(), n.to_string(), r.to_string(), k.to_string(), m.to_string()))
        .collect();
    watching.until("the stranded pods", |answer| Listed::Misscheduled.in_explanation(answer) == tainted_set).await;
    kubectl_plugin_answers(kubeconfig, &tainted_set);
    // A second manager adds a taint no daemon pod minds (the controller ignores
    // PreferNoSchedule): the list is now its, but `dedicated` is still kubectl's. (Not a
    // default-tolerated taint such as node.kubernetes.io/unschedulable: the node lifecycle
    // controller removes those from a node whose condition does not call for them.)
    kubectl(kubeconfig, &["taint", "node", "n2", "soft=x:PreferNoSchedule", "--field-manager=second-tainter"]);
    Listed::Misscheduled.expect(exporter, "taint list rewritten by a second manager", &tainted).await;
    // kubectl puts a new taint first, so `batch` becomes the first blocking key.
    kubectl(kubeconfig, &["taint", "node", "n2", "batch=x:NoSchedule", "--field-manager=second-tainter"]);
    let batch: Vec<_> = ["datadog-agent", "avx-agent", "zone-agent", "ssd-agent"]
        .map(|ds| (ds, "n2", "taint_added", "batch", "second-tainter"))
        .to_vec();
    Listed::Misscheduled.expect(exporter, "a second manager's blocking taint", &batch).await;
    await_event(admin, "datadog-agent", &["key batch", "changed by second-tainter"]).await;
    kubectl(kubeconfig, &["taint", "node", "n2", "dedicated-", "batch-", "soft-"]);
    expect(admin, exporter, "taints removed", BTreeSet::new()).await;
    let printed =
        watching.until("the restored answer", |answer| Listed::Misscheduled.in_explanation(answer).is_empty()).await;
    // Ages move on and the controller writes status, but the answer stays: nothing is printed.
    admin.resync().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(watching.printed(), printed, "--watch printed without a change");
    println!("kubectl misschedule --watch: {printed} answers, the last once the taints were gone");
    // The pods stayed, and may run there again: a Normal Event says so.
    await_recovered(admin, "datadog-agent", &["on node n2 is no longer misscheduled", "key batch"]).await;
}

/// Wait until `--events` has written an Event `reason` on `ds` whose note holds every word,
/// and return it: what `kubectl describe ds` shows.
async fn await_kube_event(
    admin: &Cluster,
    reason: &str,
    ds: &str,
    words: &[&str],
) -> k8s_openapi::api::events::v1::Event {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> = Api::namespaced(admin.client.clone(), NS);
    let started = Instant::now();
    loop {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let of_reason: Vec<Event> = list.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect();
        let found = of_reason.iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(ds)
                && words.iter().all(|w| e.note.as_deref().unwrap_or_default().contains(w))
        });
        if let Some(event) = found {
            // core/v1 readers (`kubectl describe`, `--sort-by=.lastTimestamp`) order by these.
            let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.client.clone(), NS);
            let name = event.metadata.name.as_deref().unwrap();
            let seen = core.get(name).await.unwrap();
            assert!(seen.first_timestamp.is_some() && seen.last_timestamp.is_some(), "{name}: no first/lastTimestamp");
            assert!(seen.count.is_some_and(|n| n >= 1), "{name}: no count");
            return event.clone();
        }
        let notes: Vec<_> = of_reason.iter().map(|e| e.note.clone()).collect();
        assert!(started.elapsed() < Duration::from_secs(15), "no {reason} Event on {ds} saying {words:?}: {notes:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Wait until `--events` has written a Normal `Recovered` Event on `ds` whose note holds
/// every word.
async fn await_recovered(admin: &Cluster, ds: &str, words: &[&str]) {
    let event = await_kube_event(admin, "Recovered", ds, words).await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    println!("Recovered: {}", event.note.as_deref().unwrap_or_default());
}

/// The Events `--events` wrote: (daemonset, action, note, series count) of each, regarding
/// DaemonSets in NS with reason Misscheduled.
async fn misscheduled_events(admin: &Cluster) -> Vec<(String, String, String, i32)> {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> = Api::namespaced(admin.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Misscheduled"))
        .map(|e| {
            let regarding = e.regarding.unwrap_or_default();
            assert_eq!(regarding.kind.as_deref(), Some("DaemonSet"));
            assert!(regarding.uid.is_some(), "kubectl describe matches on the uid");
            let related = e.related.expect("the pod is the related object");
            assert_eq!(related.kind.as_deref(), Some("Pod"));
            // What the fix calls expected is Normal; the rest needs someone.
            let expected = matches!(e.action.as_deref(), Some("AutoscalerDrain" | "DaemonsetChanged"));
            assert_eq!(e.type_.as_deref(), Some(if expected { "Normal" } else { "Warning" }), "{:?}", e.action);
            (
                regarding.name.unwrap_or_default(),
                e.action.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.series.map_or(1, |s| s.count),
            )
        })
        .collect()
}

/// Wait until `--events` has written an Event on `ds` whose note holds every word: what
/// `kubectl describe ds` shows.
async fn await_event(admin: &Cluster, ds: &str, words: &[&str]) {
    let started = Instant::now();
    loop {
        let events = misscheduled_events(admin).await;
        if events.iter().any(|(d, _, note, _)| d == ds && words.iter().all(|w| note.contains(w))) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "no Event on {ds} saying {words:?}: {events:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An unchanged state (scrapes, a controller resync) writes no Event.
async fn no_event_without_a_transition(admin: &Cluster, exporter: &Exporter) {
    let events = misscheduled_events(admin).await;
    let metrics = exporter.metrics();
    let counted: Vec<_> = metrics.lines().filter(|l| l.starts_with("misschedule_exporter_kube_events_total")).collect();
    println!("exporter: {counted:?}");
    let written = |events: &[(String, String, String, i32)]| events.iter().map(|e| e.3).sum::<i32>();
    let before = written(&events);
    for _ in 0..20 {
        exporter.metrics();
    }
    admin.resync().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = written(&misscheduled_events(admin).await);
    assert_eq!(after, before, "no Event without a transition");
    println!("events: {} objects, {before} writes, none while nothing changed", events.len());
}

/// `kubectl misschedule` classifies with the flags the exporter takes: a `--drain-taint-keys`
/// key is a drain (`autoscaler_drain`) there too, while n2 carries the taint `dedicated`.
fn plugin_honours_drain_taint_keys(kubeconfig: &str) {
    let reasons = |extra: &[&str]| -> BTreeSet<(String, String)> {
        let out = kubectl_plugin(kubeconfig).args(["-n", NS, "-o", "json"]).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = answer["misscheduled"].as_array().unwrap().iter();
        rows.map(|r| (r["daemonset"].as_str().unwrap().into(), r["reason"].as_str().unwrap().into())).collect()
    };
    let all = |reason: &str| -> BTreeSet<(String, String)> {
        ["datadog-agent", "avx-agent", "zone-agent"].map(|ds| (ds.to_owned(), reason.to_owned())).into()
    };
    assert_eq!(reasons(&[]), all("taint_added"));
    assert_eq!(reasons(&["--drain-taint-keys", "dedicated"]), all("autoscaler_drain"));
    assert_eq!(reasons(&["--drain-taint-keys", "other,dedi*"]), all("autoscaler_drain"), "a prefix");
    println!("kubectl misschedule: --drain-taint-keys turns the dedicated taint into a drain");
}

/// `kubectl misschedule -n NS -o json --watch` in the background, and the answers it printed
/// (in a pipe they follow one another as JSON objects).
struct PluginWatch {
    child: std::process::Child,
    answers: Arc<Mutex<Vec<Value>>>,
}

impl PluginWatch {
    fn start(kubeconfig: &str) -> Self {
        let mut child = kubectl_plugin(kubeconfig)
            .args(["-n", NS, "-o", "json", "--watch"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let answers = Arc::new(Mutex::new(Vec::new()));
        let sink = answers.clone();
        std::thread::spawn(move || {
            for answer in serde_json::Deserializer::from_reader(stdout).into_iter::<Value>() {
                let Ok(answer) = answer else { break };
                sink.lock().unwrap().push(answer);
            }
        });
        PluginWatch { child, answers }
    }

    fn printed(&self) -> usize {
        self.answers.lock().unwrap().len()
    }

    /// Wait until the latest answer is `wanted`; how many answers were printed by then.
    async fn until(&self, what: &str, wanted: impl Fn(&Value) -> bool) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let answers = self.answers.lock().unwrap();
                if answers.last().is_some_and(&wanted) {
                    return answers.len();
                }
                assert!(Instant::now() < deadline, "--watch never printed {what}: {answers:#?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for PluginWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// While n2 is lost to ssd-agent: one look at the cluster cannot see it and says so, naming
/// the exporter; the exporter, which watched, names the node, the reason and who removed the label.
fn plugin_sees_the_loss_only_through_the_exporter(kubeconfig: &str) {
    let run = |args: &[&str]| kubectl_plugin(kubeconfig).args(args).output().unwrap();
    let out = run(&["-n", NS, "-o", "json", "--from-exporter", &format!("{NS}/misschedule-exporter")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let served: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lost = ("ssd-agent".into(), "n2".into(), "label_drift".into(), "disk".into(), "ops-relabel".into());
    assert_eq!(Listed::Lost.in_explanation(&served), [lost].into(), "the exporter saw who removed it");
    let out = run(&["-n", NS]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("No misscheduled daemon pods in namespace "), "{table}");
    assert!(table.contains("\nLost nodes: unknown to one look at the cluster"), "{table}");
    let hint =
        format!("An exporter runs in this cluster: kubectl misschedule --from-exporter {NS}/misschedule-exporter\n");
    assert!(table.ends_with(&hint), "{table}");
    // A lost node needs action: --exit-code says so, through the exporter.
    let out = run(&["-n", NS, "--exit-code", "--from-exporter", &format!("{NS}/misschedule-exporter")]);
    assert_eq!(out.status.code(), Some(1), "--exit-code with a lost node: {}", String::from_utf8_lossy(&out.stdout));
    // A namespace typo is not an empty namespace: the caller's credentials can tell.
    let out = run(&["-n", "monitorng", "--from-exporter", &format!("{NS}/misschedule-exporter")]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "error: namespaces \"monitorng\" not found\n");
    let out = run(&["--from-exporter", &format!("{NS}/nothing-here")]);
    assert_eq!(out.status.code(), Some(3), "a Service that is not there is bad input");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr, format!("error: services \"nothing-here\" not found in namespace {NS}\n"));
    println!("kubectl misschedule: the lost node only through --from-exporter, and one look says it cannot know");
}

/// `kubectl misschedule` through the real kubectl, live and from the running exporter, while
/// `tainted` are the misscheduled pods: json, yaml, the table and `--exit-code` agree.
fn kubectl_plugin_answers(kubeconfig: &str, tainted: &Attributed) {
    let run = |args: &[&str]| kubectl_plugin(kubeconfig).args(args).output().unwrap();
    let out = run(&["-n", NS, "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let live: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&Listed::Misscheduled.in_explanation(&live), tainted);
    assert!(live["ineligible"].is_array());
    let out = run(&["-n", NS, "-o", "yaml"]);
    let yaml: Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(
        Listed::Misscheduled.in_explanation(&yaml),
        Listed::Misscheduled.in_explanation(&live),
        "yaml and json say the same"
    );
    let out = run(&["-A", "--exit-code"]);
    assert_eq!(out.status.code(), Some(1), "--exit-code with a misscheduled pod");
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("NAMESPACE") && table.contains("datadog-agent"), "{table}");
    assert!(table.contains("taint_added  dedicated  kubectl-taint"), "{table}");
    let out = run(&["-n", "default", "--exit-code"]);
    assert_eq!(out.status.code(), Some(0), "nothing misscheduled in default");
    let out = run(&["-n", NS, "-o", "json", "--from-exporter", &format!("{NS}/misschedule-exporter")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let served: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&Listed::Misscheduled.in_explanation(&served), tainted, "the exporter says the same");
    println!("kubectl misschedule: live, yaml, --exit-code and --from-exporter agree");
}
