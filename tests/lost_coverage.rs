//! Lost coverage on the lab, where KWOK finishes the deletes the DaemonSet controller asks
//! for, as kubelets do: a node that stops qualifying loses its daemon pod within seconds,
//! and then nothing is misscheduled. The GPU label comes and goes as the real nfd-master
//! writes it, from NodeFeature objects. The exporter must
//! still name the node, why, and who changed it, on every surface: /metrics, /explain, the
//! page, `kubectl misschedule --from-exporter` and a NodeLost Event; one look at the cluster
//! says it cannot know them.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use support::browser;
use support::cluster::*;
use support::nfd::set_feature;
use support::plugin::{expose_exporter, kubectl, kubectl_plugin};

const GPU: &str = "feature.node.kubernetes.io/pci-10de.present";

/// (daemonset, node, reason, key, manager)
type Lost = BTreeSet<(String, String, String, String, String)>;
/// (daemonset, reason, key) → losses so far
type Losses = BTreeMap<(String, String, String), f64>;

fn lost(rows: &[(&str, &str, &str, &str, &str)]) -> Lost {
    rows.iter()
        .map(|(d, n, r, k, m)| (d.to_string(), n.to_string(), r.to_string(), k.to_string(), m.to_string()))
        .collect()
}

fn losses(rows: &[(&str, &str, &str, f64)]) -> Losses {
    rows.iter().map(|(d, r, k, n)| ((d.to_string(), r.to_string(), k.to_string()), *n)).collect()
}

fn lost_in_metrics(metrics: &str) -> Lost {
    samples(metrics, "daemonset_lost_node_info")
        .into_iter()
        .map(|(l, _)| {
            (l["daemonset"].clone(), l["node"].clone(), l["reason"].clone(), l["key"].clone(), l["manager"].clone())
        })
        .collect()
}

fn losses_in_metrics(metrics: &str) -> Losses {
    samples(metrics, "daemonset_node_losses_total")
        .into_iter()
        .map(|(l, v)| ((l["daemonset"].clone(), l["reason"].clone(), l["key"].clone()), v))
        .collect()
}

fn lost_in_explanation(explanation: &Value) -> Lost {
    let rows = explanation["lost"].as_array().expect("a lost list").iter();
    rows.map(|r| {
        let f = |name: &str| r[name].as_str().unwrap_or_else(|| panic!("{name} in {r}")).to_owned();
        assert!(!f("fix").is_empty() && !f("since").is_empty(), "{r}");
        (f("daemonset"), f("node"), f("reason"), f("key"), f("manager"))
    })
    .collect()
}

/// The NodeLost Events in NS: (DaemonSet, note, series count).
async fn node_lost_events(admin: &Cluster) -> Vec<(String, String, i32)> {
    events_of(admin, "NodeLost").await
}

/// (DaemonSet, note, series count) of the Events with this reason; a recovery is Normal.
async fn events_of(admin: &Cluster, reason: &str) -> Vec<(String, String, i32)> {
    let events: Api<Event> = Api::namespaced(admin.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .inspect(|e| assert_eq!(e.type_.as_deref() == Some("Normal"), reason == "Recovered", "{e:?}"))
        .map(|e| {
            let ds = e.regarding.and_then(|r| r.name).unwrap_or_default();
            (ds, e.note.unwrap_or_default(), e.series.map_or(1, |s| s.count))
        })
        .collect()
}

struct Lab {
    admin: Cluster,
    exporter: Exporter,
    kubeconfig: String,
    started_at: i64,
}

impl Lab {
    /// Wait until /metrics lists exactly `want` as lost and nothing as misscheduled, with
    /// `counted` losses; then check /explain, the page and the plugin say the same. Returns
    /// the plugin's table.
    async fn expect(&self, step: &str, want: &Lost, counted: &Losses) -> String {
        let started = Instant::now();
        let metrics = loop {
            let metrics = self.exporter.metrics();
            let misscheduled = reported_rows(&metrics);
            if lost_in_metrics(&metrics) == *want && losses_in_metrics(&metrics) == *counted && misscheduled.is_empty()
            {
                break metrics;
            }
            assert!(
                started.elapsed() < STEP_TIMEOUT,
                "{step}: want lost {want:#?} and losses {counted:?}; have lost {:#?}, losses {:?}, misscheduled {misscheduled:?}",
                lost_in_metrics(&metrics),
                losses_in_metrics(&metrics)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let now = support::unix_time().as_secs() as f64;
        for (labels, since) in samples(&metrics, "daemonset_lost_node_since_timestamp_seconds") {
            assert!(since >= self.started_at as f64 && since <= now, "{labels:?} since {since}");
        }
        assert_eq!(samples(&metrics, "daemonset_lost_node_since_timestamp_seconds").len(), want.len());

        let (status, body) = self.exporter.get("/explain").unwrap();
        assert_eq!(status, 200);
        assert_eq!(lost_in_explanation(&serde_json::from_str(&body).unwrap()), *want, "{step}: /explain");
        let (_, page) = self.exporter.get("/").unwrap();
        assert_eq!(page.contains(">Lost nodes</h2>"), !want.is_empty(), "{step}: the page");
        for (ds, node, ..) in want {
            let cells = format!("<td data-label=\"DaemonSet\">{ds}</td><td data-label=\"Node\">{node}</td>");
            assert!(page.contains(&cells), "{step}: {ds} on {node} not on the page");
        }

        let from_exporter = ["-n", NS, "--from-exporter", "monitoring/misschedule-exporter"];
        let out = kubectl_plugin(&self.kubeconfig).args(from_exporter).args(["-o", "json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(lost_in_explanation(&serde_json::from_slice(&out.stdout).unwrap()), *want, "{step}: the plugin");
        let out = kubectl_plugin(&self.kubeconfig).args(from_exporter).output().unwrap();
        let table = String::from_utf8(out.stdout).unwrap();
        assert_eq!(table.contains("Lost nodes"), !want.is_empty(), "{step}: the plugin's table\n{table}");
        println!("step {step:<55} ok after {:.1?}: {} lost, losses {counted:?}", started.elapsed(), want.len());
        table
    }

    /// Wait until gpu-agent's Recovered Event for `node` has counted `count` recoveries.
    async fn expect_recovered(&self, step: &str, node: &str, count: i32) {
        let started = Instant::now();
        loop {
            let recovered = events_of(&self.admin, "Recovered").await;
            let told = recovered.iter().any(|(ds, note, c)| {
                ds == "gpu-agent" && note.starts_with(&format!("Node {node} is covered again")) && *c == count
            });
            if told {
                return;
            }
            assert!(started.elapsed() < STEP_TIMEOUT, "{step}: Recovered Events {recovered:#?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until the NodeLost Events are exactly `want`: (DaemonSet, note fragments, series count).
    async fn expect_events(&self, step: &str, want: &[(&str, &[&str], i32)]) {
        let started = Instant::now();
        loop {
            let got = node_lost_events(&self.admin).await;
            let found = want.iter().all(|(ds, words, count)| {
                got.iter().any(|(d, note, c)| d == ds && c == count && words.iter().all(|w| note.contains(w)))
            });
            if found && got.len() == want.len() {
                return;
            }
            assert!(started.elapsed() < STEP_TIMEOUT, "{step}: want Events {want:?}, have {got:#?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Nodes n1..n3 whose GPU label nfd-master set; `agent` on every node and `gpu-agent` on
/// the GPU nodes, each pod bound by kube-scheduler and run by KWOK.
async fn scene(admin: &Cluster) {
    agent_scene(admin, &["n1", "n2", "n3"]).await;
    for node in ["n1", "n2", "n3"] {
        set_feature(admin, node, GPU, Some("true")).await;
    }
    let gpu_agent: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "gpu-agent"},
        "spec": {"selector": {"matchLabels": {"app": "gpu-agent"}},
                 "template": {"metadata": {"labels": {"app": "gpu-agent"}},
                              "spec": {"nodeSelector": {GPU: "true"},
                                       "containers": [{"name": "agent", "image": "registry.example/gpu-agent:1"}]}}}
    }))
    .unwrap();
    admin.daemonsets.create(&PostParams::default(), &gpu_agent).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn lost_nodes_are_named_with_reason_key_and_manager_everywhere() {
    let cp = ControlPlane::start_lab("lost-coverage", &LabOptions { components: &["nfd"], ..Default::default() });
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let kubeconfig = cp.get("ADMIN_KUBECONFIG").to_owned();
    scene(&admin).await;
    grant_exporter(&admin, &READ).await;
    grant_events(&admin).await;
    let started_at = support::unix_time().as_secs() as i64;
    let exporter =
        Exporter::spawn_on("0.0.0.0", &["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--events"], Stdio::inherit());
    expose_exporter(&admin, exporter.port, "n1").await;
    let lab = Lab { admin, exporter, kubeconfig: kubeconfig.clone(), started_at };
    let k = |args: &[&str]| kubectl(&kubeconfig, args);
    let started = Instant::now();
    while lab.admin.status_totals().await.is_none_or(|t| t.len() != 2) || !lab.exporter.ready() {
        assert!(started.elapsed() < STEP_TIMEOUT, "the scene never settled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    lab.expect("baseline: six agents, nothing lost", &lost(&[]), &losses(&[])).await;

    // nfd-master stops reporting the GPU on n1: the controller deletes the agent at once.
    set_feature(&lab.admin, "n1", GPU, None).await;
    let gpu_n1 = ("gpu-agent", "n1", "nfd_change", GPU, "nfd-master");
    lab.expect("NFD drops the label on n1", &lost(&[gpu_n1]), &losses(&[("gpu-agent", "nfd_change", GPU, 1.0)])).await;
    let nfd_words: &[&str] = &["Node n1 lost its daemon pod", "reason nfd_change", "changed by nfd-master", "Fix:"];
    lab.expect_events("one NodeLost Event", &[("gpu-agent", nfd_words, 1)]).await;
    // One look at the cluster sees nothing wrong, and must not say all is well: it says it
    // cannot know, and names the exporter that does.
    let out = kubectl_plugin(&kubeconfig).args(["-n", NS]).output().unwrap();
    let live = String::from_utf8(out.stdout).unwrap();
    assert!(live.starts_with("No misscheduled daemon pods in namespace "), "{live}");
    assert!(live.contains("\nLost nodes: unknown to one look at the cluster, where a node whose daemon pod"), "{live}");
    assert!(
        live.ends_with(
            "An exporter runs in this cluster: kubectl misschedule --from-exporter monitoring/misschedule-exporter\n"
        ),
        "{live}"
    );
    println!("kubectl misschedule -n {NS} (one look, while n1 is lost):\n{live}");

    // NFD restarts and the label flaps twice: each loss counts, on the same Event's series.
    for (round, count) in [(1, 2.0), (2, 3.0)] {
        set_feature(&lab.admin, "n1", GPU, Some("true")).await;
        let counted = losses(&[("gpu-agent", "nfd_change", GPU, count - 1.0)]);
        lab.expect(&format!("flap {round}: label back, agent back on n1"), &lost(&[]), &counted).await;
        // Told as a recovery before it flaps again (a recovery shorter than the publisher's
        // look, 200 ms, goes untold: only the relapse is seen).
        lab.expect_recovered(&format!("flap {round}: covered again"), "n1", round).await;
        set_feature(&lab.admin, "n1", GPU, None).await;
        let counted = losses(&[("gpu-agent", "nfd_change", GPU, count)]);
        lab.expect(&format!("flap {round}: label gone again"), &lost(&[gpu_n1]), &counted).await;
        lab.expect_events("the repeat on the Event's series", &[("gpu-agent", nfd_words, count as i32)]).await;
    }

    // A NoExecute taint by kubectl: both agents on n2 are deleted at once.
    k(&["taint", "node", "n2", "maintenance=x:NoExecute"]);
    let tainted = [
        ("agent", "n2", "taint_added", "maintenance", "kubectl-taint"),
        ("gpu-agent", "n2", "taint_added", "maintenance", "kubectl-taint"),
    ];
    let mut counted = losses(&[
        ("gpu-agent", "nfd_change", GPU, 3.0),
        ("agent", "taint_added", "maintenance", 1.0),
        ("gpu-agent", "taint_added", "maintenance", 1.0),
    ]);
    lab.expect("kubectl taint NoExecute on n2", &lost(&[gpu_n1, tainted[0], tainted[1]]), &counted).await;
    let taint_words: &[&str] = &["Node n2 lost its daemon pod", "key maintenance", "changed by kubectl-taint"];
    let events = [("gpu-agent", nfd_words, 3), ("agent", taint_words, 1), ("gpu-agent", taint_words, 1)];
    lab.expect_events("a NodeLost Event per lost node", &events).await;

    // The DaemonSet narrows to pool=a (n3 only): its agent on n1 goes on purpose, and the
    // one on n3 is replaced by the rollout, which is no loss.
    k(&["label", "node", "n3", "pool=a"]);
    lab.admin.patch_daemonset("agent", json!({"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}})).await;
    let narrowed = ("agent", "n1", "daemonset_changed", "pool", "");
    counted.insert(("agent".into(), "daemonset_changed".into(), "pool".into()), 1.0);
    let table = lab
        .expect("agent's nodeSelector narrows to pool=a", &lost(&[gpu_n1, tainted[0], tainted[1], narrowed]), &counted)
        .await;
    println!("kubectl misschedule -n {NS} --from-exporter monitoring/misschedule-exporter:\n{table}");
    // No Event for a node the DaemonSet left on purpose; the publisher looks every 200 ms.
    tokio::time::sleep(Duration::from_secs(2)).await;
    lab.expect_events("no NodeLost Event for the narrowed DaemonSet", &events).await;
    // The page as a browser builds it: a header row and one row per lost node.
    let url = format!("http://127.0.0.1:{}/", lab.exporter.port);
    let dom = browser::dom(&url);
    let table = dom
        .split("<table id=\"lost\" class=\"rows\">")
        .nth(1)
        .expect("the lost table")
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(table.matches("<tr").count(), 5, "{table}");
    assert!(table.contains("no longer wants n1"), "the daemonset_changed fix: {table}");
    browser::screenshot(&url, "lost-nodes.png");

    // n1 is deleted while lost: nothing is lost there any more; the counters stay.
    lab.admin.nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    lab.expect("n1 deleted", &lost(&tainted), &counted).await;

    // The taint goes: gpu-agent covers n2 again; agent does not (n2 is not in pool a), and
    // its loss keeps the reason it had.
    k(&["taint", "node", "n2", "maintenance-"]);
    lab.expect("the taint removed from n2", &lost(&[tainted[0]]), &counted).await;
    // Each loss that ended with a pod back is told: n1 twice (the flaps, one Event and its
    // repeat), n2 once; agent on n2 is still lost.
    lab.expect_recovered("gpu-agent covers n2 again", "n2", 1).await;
    let recovered = events_of(&lab.admin, "Recovered").await;
    assert!(recovered.iter().all(|(ds, ..)| ds == "gpu-agent"), "{recovered:#?}");
    assert_eq!(recovered.len(), 2, "{recovered:#?}");

    // A NoExecute taint on n3 takes both agents; the exporter is restarted, and the taint
    // goes while it is down. The new process reads its Events back: agent on n2 is still
    // lost, and the two on n3 are covered again, which it tells.
    k(&["taint", "node", "n3", "maintenance=x:NoExecute"]);
    let n3 = [
        ("agent", "n3", "taint_added", "maintenance", "kubectl-taint"),
        ("gpu-agent", "n3", "taint_added", "maintenance", "kubectl-taint"),
    ];
    *counted.get_mut(&("agent".into(), "taint_added".into(), "maintenance".into())).unwrap() += 1.0;
    *counted.get_mut(&("gpu-agent".into(), "taint_added".into(), "maintenance".into())).unwrap() += 1.0;
    lab.expect("kubectl taint NoExecute on n3", &lost(&[tainted[0], n3[0], n3[1]]), &counted).await;
    let n3_words: &[&str] = &["Node n3 lost its daemon pod", "key maintenance"];
    lab.expect_events(
        "a NodeLost Event for each on n3",
        &[events[0], events[1], events[2], ("agent", n3_words, 1), ("gpu-agent", n3_words, 1)],
    )
    .await;
    let Lab { admin, exporter, .. } = lab;
    drop(exporter);
    k(&["taint", "node", "n3", "maintenance-"]);
    admin.wait_bound("gpu-agent", 2).await;
    let restarted = Exporter::spawn(&["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--events"], Stdio::inherit());
    let started = Instant::now();
    loop {
        let metrics = restarted.metrics();
        if lost_in_metrics(&metrics) == lost(&[tainted[0]]) {
            // Counters restarted with the process: the restored loss moves none.
            assert!(losses_in_metrics(&metrics).values().all(|n| *n == 0.0), "{metrics}");
            break;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "after the restart: {:#?}", lost_in_metrics(&metrics));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, body) = restarted.get("/explain").unwrap();
    assert_eq!(lost_in_explanation(&serde_json::from_str(&body).unwrap()), lost(&[tainted[0]]), "/explain");
    let started = Instant::now();
    loop {
        let recovered = events_of(&admin, "Recovered").await;
        let n3_told: Vec<_> =
            recovered.iter().filter(|(_, note, _)| note.starts_with("Node n3 is covered again")).collect();
        if n3_told.len() == 2 {
            break;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "no Recovered for n3 after the restart: {recovered:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
