//! Uncovered nodes on the lab, each cause made by the component that makes it in a real
//! cluster: kube-scheduler finds a node too small or a host port taken, the ResourceQuota
//! admission refuses the controller's pod, and KWOK writes what a kubelet writes for an
//! image that will not pull, a container that crashes, a pod never Ready (the lab's fault
//! Stages, tests/lab/stages/pod-faults.yaml). The exporter must name each node with its
//! reason, detail and fix on /metrics, /explain, the page and the plugin (through the
//! exporter and with one look), and drop it when the cause is removed.

mod support;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::browser;
use support::cluster::*;
use support::plugin::{expose_exporter, kubectl, kubectl_plugin};

/// (namespace, daemonset, node, reason, detail)
type Uncovered = BTreeSet<(String, String, String, String, String)>;

const QUOTA_NS: &str = "quota";
const NODES: [&str; 3] = ["n1", "n2", "n3"];

fn uncovered_in_metrics(metrics: &str) -> Uncovered {
    samples(metrics, "daemonset_uncovered_node_info")
        .into_iter()
        .map(|(l, _)| {
            let f = |k: &str| l[k].clone();
            // A pod is named wherever there is one: create_failed has none, and a node
            // whose pod is yet to be made is starting.
            let podless = matches!(l["reason"].as_str(), "create_failed" | "starting");
            assert!(!l["pod"].is_empty() || podless, "{l:?}");
            assert!(l["pod"].is_empty() || l["reason"] != "create_failed", "{l:?}");
            (f("namespace"), f("daemonset"), f("node"), f("reason"), f("detail"))
        })
        .collect()
}

fn uncovered_in_explanation(explanation: &Value) -> Uncovered {
    let rows = explanation["uncovered"].as_array().expect("an uncovered list");
    rows.iter()
        .map(|r| {
            let f = |k: &str| r[k].as_str().unwrap_or_else(|| panic!("{k} in {r}")).to_owned();
            assert!(!f("fix").is_empty() && !f("since").is_empty(), "{r}");
            (f("namespace"), f("daemonset"), f("node"), f("reason"), f("detail"))
        })
        .collect()
}

fn rows(rows: &[(&str, &str, &str, &str, &str)]) -> Uncovered {
    rows.iter()
        .map(|(n, d, node, r, detail)| {
            (n.to_string(), d.to_string(), node.to_string(), r.to_string(), detail.to_string())
        })
        .collect()
}

/// A DaemonSet `name` with `container` merged into its one container and `annotations` on
/// its pod template.
fn daemonset(name: &str, container: Value, annotations: Value) -> DaemonSet {
    let mut agent = json!({"name": "agent", "image": format!("registry.example/{name}:1")});
    agent.as_object_mut().unwrap().extend(container.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                              "spec": {"containers": [agent]}}}
    }))
    .unwrap()
}

/// Wait until /metrics lists exactly `want` as uncovered, then check /explain, the page
/// and the plugin (through the exporter, and with one look) say the same.
async fn expect(exporter: &Exporter, kubeconfig: &str, step: &str, want: &Uncovered) {
    let started = Instant::now();
    loop {
        let have = uncovered_in_metrics(&exporter.metrics());
        if have == *want {
            break;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "{step}: want {want:#?}\nhave {have:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = exporter.get("/explain").unwrap();
    assert_eq!(status, 200);
    assert_eq!(uncovered_in_explanation(&serde_json::from_str(&body).unwrap()), *want, "{step}: /explain");
    let (_, page) = exporter.get("/").unwrap();
    for (namespace, ds, node, ..) in want {
        let cells = format!(
            "<td data-label=\"Namespace\">{namespace}</td><td data-label=\"DaemonSet\">{ds}</td><td data-label=\"Node\">{node}</td>"
        );
        assert!(page.contains(&cells), "{step}: {ds} on {node} not on the page");
    }
    // Through the exporter, and with one look at the cluster: the same rows.
    let through = ["-A", "--from-exporter", "monitoring/misschedule-exporter", "-o", "json"];
    for args in [&through[..], &["-A", "-o", "json"][..]] {
        let out = kubectl_plugin(kubeconfig).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let explanation: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(uncovered_in_explanation(&explanation), *want, "{step}: kubectl misschedule {args:?}");
    }
    println!("step {step:<60} ok after {:.1?}: {} uncovered", started.elapsed(), want.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn every_cause_is_named_on_every_surface_and_clears_when_removed() {
    let cp = ControlPlane::start_lab("uncovered", &LabOptions::default());
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let kubeconfig = cp.get("ADMIN_KUBECONFIG").to_owned();
    let k = |args: &[&str]| kubectl(&kubeconfig, args);
    let pp = PostParams::default();
    admin.create_namespace(NS).await;
    admin.create_namespace(QUOTA_NS).await;
    admin.add_nodes(&NODES, &[]).await;
    grant_exporter(&admin, &READ).await;
    grant_events(&admin).await;
    let exporter_args = ["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--events"];
    let exporter = Exporter::spawn_on("0.0.0.0", &exporter_args, Stdio::inherit());
    expose_exporter(&admin, exporter.port, "n1").await;

    // n1 reports 100Mi of memory, as a kubelet on a small machine would.
    let small = json!({"status": {"capacity": {"memory": "100Mi"}, "allocatable": {"memory": "100Mi"}}});
    admin.nodes.patch_status("n1", &PatchParams::default(), &Patch::Merge(&small)).await.unwrap();
    // One pod in the quota namespace, and the DaemonSet there wants three.
    k(&["-n", QUOTA_NS, "create", "quota", "pods", "--hard=pods=1"]);
    let host_port = json!({"ports": [{"containerPort": 9100, "hostPort": 9100}]});
    let scene = [
        (NS, daemonset("big", json!({"resources": {"requests": {"memory": "1Gi"}}}), json!({}))),
        (NS, daemonset("port-a", host_port.clone(), json!({}))),
        (NS, daemonset("image-pull", json!({}), json!({"lab.misschedule.io/fault": "image-pull"}))),
        (NS, daemonset("crash-loop", json!({}), json!({"lab.misschedule.io/fault": "crash-loop"}))),
        (NS, daemonset("not-ready", json!({}), json!({"lab.misschedule.io/fault": "not-ready"}))),
        (QUOTA_NS, daemonset("quota", json!({}), json!({}))),
    ];
    for (namespace, ds) in &scene {
        Api::<DaemonSet>::namespaced(admin.client.clone(), namespace).create(&pp, ds).await.unwrap();
    }
    // port-b comes once port-a holds the port everywhere: the scheduler then refuses it.
    admin.wait_bound("port-a", 3).await;
    admin.daemonsets.create(&pp, &daemonset("port-b", host_port, json!({}))).await.unwrap();

    let quota_detail = "forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1";
    let mut want = vec![
        (NS, "big", "n1", "unschedulable", "Insufficient memory"),
        (NS, "port-b", "n1", "unschedulable", "node(s) didn't have free ports for the requested pod ports"),
        (NS, "port-b", "n2", "unschedulable", "node(s) didn't have free ports for the requested pod ports"),
        (NS, "port-b", "n3", "unschedulable", "node(s) didn't have free ports for the requested pod ports"),
    ];
    for node in NODES {
        want.push((NS, "image-pull", node, "image_pull", "ImagePullBackOff: image registry.example/image-pull:1"));
        want.push((NS, "crash-loop", node, "crash_loop", "CrashLoopBackOff: container agent exited 1 (Error)"));
        // Running, never Ready: on its way for the first 5 minutes, as a probe's delay may be.
        want.push((NS, "not-ready", node, "starting", ""));
    }
    // The quota lets one pod in; which node gets it is the controller's choice.
    let quota_pod = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(admin.client.clone(), QUOTA_NS);
    let started = Instant::now();
    let placed = loop {
        let pods = quota_pod.list(&Default::default()).await.unwrap().items;
        if let Some(node) = pods.iter().find_map(|p| p.spec.as_ref()?.node_name.clone()) {
            break node;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "the quota's one pod never came");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let refused: Vec<&str> = NODES.iter().copied().filter(|n| *n != placed).collect();
    for node in &refused {
        want.push((QUOTA_NS, "quota", node, "create_failed", quota_detail));
    }
    expect(&exporter, &kubeconfig, "every cause, each named", &rows(&want)).await;
    // One Warning Event per node that needs action, on its DaemonSet, naming the reason.
    let needing_action: BTreeSet<(String, String)> = want
        .iter()
        .filter(|(.., reason, _)| *reason != "starting")
        .map(|(_, ds, node, reason, _)| (format!("{ds}/{node}"), reason.to_string()))
        .collect();
    expect_events(&admin, "NodeUncovered", &needing_action).await;

    // The plugin's table splits them into needs action and expected, with each fix.
    let out = kubectl_plugin(&kubeconfig).args(["-A", "-o", "wide"]).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("Nodes without an available pod, needing action:"), "{table}");
    assert!(table.contains("Nodes without an available pod yet (expected: pods on their way):"), "{table}");
    assert!(table.contains("another pod on n2 holds the host port"), "{table}");
    assert!(table.contains("priorityClassName that preempts"), "{table}");
    println!("kubectl misschedule -A -o wide:\n{table}");
    // The page as a browser builds it: a header and a row per uncovered node.
    let url = format!("http://127.0.0.1:{}/", exporter.port);
    let dom = browser::dom(&url);
    let uncovered_table = dom.split("<table id=\"uncovered\" class=\"rows\">").nth(1).expect("the table");
    let uncovered_table = uncovered_table.split("</table>").next().unwrap();
    assert_eq!(uncovered_table.matches("<tr").count(), want.len() + 1, "{uncovered_table}");
    browser::screenshot(&url, "uncovered-nodes.png");

    // Each cause removed, by the hand that would remove it.
    admin.daemonsets.delete("port-a", &DeleteParams::default()).await.unwrap();
    let big = json!({"status": {"capacity": {"memory": "8Gi"}, "allocatable": {"memory": "8Gi"}}});
    admin.nodes.patch_status("n1", &PatchParams::default(), &Patch::Merge(&big)).await.unwrap();
    want.retain(|(_, ds, ..)| !matches!(*ds, "big" | "port-b"));
    expect(&exporter, &kubeconfig, "the port freed, n1 grown", &rows(&want)).await;

    k(&["-n", QUOTA_NS, "delete", "quota", "pods"]);
    want.retain(|(_, ds, ..)| *ds != "quota");
    expect(&exporter, &kubeconfig, "the quota gone: the controller's retry succeeds", &rows(&want)).await;

    // The faults fixed by a rollout without them.
    for ds in ["image-pull", "crash-loop", "not-ready"] {
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"lab.misschedule.io/fault": null}}}}});
        admin.patch_daemonset(ds, patch).await;
    }
    expect(&exporter, &kubeconfig, "a rollout without the faults", &rows(&[])).await;
    // Each node told uncovered is told covered again, the faulty ones through their rollout.
    expect_events(&admin, "Recovered", &needing_action).await;
}

/// Wait until the exporter's Events with `reason` are exactly `want`: (DaemonSet/node, the
/// uncovered reason in the Event's annotations).
async fn expect_events(admin: &Cluster, reason: &str, want: &BTreeSet<(String, String)>) {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::all(admin.client.clone());
    let started = Instant::now();
    loop {
        let selector = format!("reason={reason}");
        let list = events.list(&kube::api::ListParams::default().fields(&selector)).await.unwrap();
        let have: BTreeSet<(String, String)> = list
            .items
            .iter()
            .filter(|e| e.reporting_component.as_deref() == Some("misschedule-exporter"))
            .map(|e| {
                let annotations = e.metadata.annotations.clone().unwrap_or_default();
                let ds = e.involved_object.name.clone().unwrap_or_default();
                let subject = format!("{ds}/{}", annotations["misschedule.io/node"]);
                (subject, annotations["misschedule.io/reason"].clone())
            })
            .collect();
        if have == *want {
            println!("{} {reason} Events, one per node", want.len());
            return;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "{reason} Events: want {want:#?}\nhave {have:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
