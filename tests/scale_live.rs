//! Scale on a real API server: KWOK nodes and DaemonSets on every node, watched from the
//! start by the exporter and by kube-state-metrics (the lab's `ksm`), so that both see the
//! same cluster being built. Then each is started afresh on the full cluster. Measured in the
//! same run, from /proc: RSS, CPU seconds, and the time until each answers for every pod.
//!
//! `LIVE_SCALE_NODES` (default 100) and `LIVE_SCALE_DAEMONSETS` (default 10) set the size;
//! `scripts/bench.sh` runs 2,000 x 10 and `LIVE_SCALE_REPORT=FILE` writes the figures as a
//! Markdown table. The test asserts what cannot flake: both see every pod, and the exporter
//! agrees with the controller.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::cluster::*;
use support::http;
use support::process::{cpu_seconds, rss_kib};

fn daemonset(i: usize) -> DaemonSet {
    let name = format!("agent-{i:02}");
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "registry.example/agent:1"}]}}}
    }))
    .unwrap()
}

/// kube-state-metrics as the lab runs it, on a port of its own.
struct Ksm {
    child: Child,
    port: u16,
}

impl Ksm {
    fn start(cp: &ControlPlane, binary: &str) -> Self {
        let (port, telemetry) = (http::free_port(), http::free_port());
        let child = Command::new(binary)
            .args(["--kubeconfig", cp.get("ADMIN_KUBECONFIG"), "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--telemetry-host", "127.0.0.1", "--telemetry-port", &telemetry.to_string()])
            .args(["--resources", "daemonsets,pods,nodes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kube-state-metrics");
        Self { child, port }
    }
}

impl Drop for Ksm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The kube-state-metrics binary the lab started (its pid file names the process).
fn lab_ksm_pid(cp: &ControlPlane) -> u32 {
    std::fs::read_to_string(cp.dir.join("ksm.pid")).unwrap().trim().parse().unwrap()
}

fn lab_ksm_binary(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap().to_string_lossy().into_owned()
}

/// Pods kube-state-metrics knows (`kube_pod_info` series) and the time one scrape took.
fn ksm_pods(port: u16) -> (usize, Duration, usize) {
    let started = Instant::now();
    let body = http::get(port, "/metrics").map(|(_, b)| b).unwrap_or_default();
    (body.lines().filter(|l| l.starts_with("kube_pod_info{")).count(), started.elapsed(), body.len())
}

/// Pods the exporter holds, and the time one scrape took.
fn exporter_pods(exporter: &Exporter) -> (usize, Duration, usize) {
    let started = Instant::now();
    let body = exporter.metrics();
    let pods = body
        .lines()
        .find_map(|l| l.strip_prefix("misschedule_exporter_cache_objects{resource=\"pods\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    (pods as usize, started.elapsed(), body.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it small, scripts/bench.sh at 2,000 nodes"]
async fn exporter_and_kube_state_metrics_on_the_same_real_cluster() {
    let setting = |name: &str, default: usize| std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let (nodes, daemonsets) = (setting("LIVE_SCALE_NODES", 100), setting("LIVE_SCALE_DAEMONSETS", 10));
    let pods = nodes * daemonsets;
    let started = Instant::now();
    let cp = ControlPlane::start_lab("scale-live", &LabOptions { components: &["ksm"], nodes, ..Default::default() });
    println!("lab with {nodes} Ready KWOK nodes in {:?}", started.elapsed());
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let pp = PostParams::default();
    admin.create_namespace(NS).await;
    grant_exporter(&admin, &READ).await;
    let ksm_pid = lab_ksm_pid(&cp);
    let ksm_binary = lab_ksm_binary(ksm_pid);
    let watching = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &[], &cp.dir.join("watching.log"));
    wait_until("the exporter ready", Duration::from_secs(60), || watching.ready()).await;
    let (ksm_cpu_before, exporter_cpu_before) = (cpu_seconds(ksm_pid), cpu_seconds(watching.child.id()));

    // The cluster is built while both watch: the controller creates the pods, kube-scheduler
    // binds them and KWOK runs them.
    let building = Instant::now();
    for i in 0..daemonsets {
        admin.daemonsets.create(&pp, &daemonset(i)).await.unwrap();
    }
    let mut available = 0;
    while available < pods {
        assert!(building.elapsed() < Duration::from_secs(1800), "{available} of {pods} pods available");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let list = admin.daemonsets.list(&ListParams::default()).await.unwrap();
        let statuses = list.items.iter().filter_map(|d| d.status.as_ref());
        available = statuses.map(|s| s.number_available.unwrap_or(0) as usize).sum();
    }
    let built = building.elapsed();
    println!("{pods} daemon pods available in {built:?}");
    let ksm_port: u16 = cp.get("KSM_URL").rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
    wait_until("both see every pod", Duration::from_secs(120), || {
        exporter_pods(&watching).0 == pods && ksm_pods(ksm_port).0 == pods
    })
    .await;
    expect(&admin, &watching, "the exporter agrees with the controller", Default::default()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let watched = [
        (
            rss_kib(watching.child.id()),
            cpu_seconds(watching.child.id()) - exporter_cpu_before,
            exporter_pods(&watching),
        ),
        (rss_kib(ksm_pid), cpu_seconds(ksm_pid) - ksm_cpu_before, ksm_pods(ksm_port)),
    ];
    drop(watching);

    // Each afresh on the full cluster: wall time and CPU until it answers for every pod.
    let fresh = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &[], &cp.dir.join("fresh.log"));
    let exporter_ready = wait_until("a fresh exporter sees every pod", Duration::from_secs(300), || {
        fresh.ready() && exporter_pods(&fresh).0 == pods
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let exporter_fresh = (exporter_ready, cpu_seconds(fresh.child.id()), rss_kib(fresh.child.id()));
    drop(fresh);
    let ksm = Ksm::start(&cp, &ksm_binary);
    let ksm_ready = wait_until("a fresh kube-state-metrics sees every pod", Duration::from_secs(300), || {
        ksm_pods(ksm.port).0 == pods
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ksm_fresh = (ksm_ready, cpu_seconds(ksm.child.id()), rss_kib(ksm.child.id()));

    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let kib = |bytes: usize| format!("{:.0} KiB", bytes as f64 / 1024.0);
    type Watched = (u64, f64, (usize, Duration, usize));
    let row =
        |name: &str, (rss, cpu, (_, scrape, size)): Watched, (ready, fresh_cpu, fresh_rss): (Duration, f64, u64)| {
            format!(
                "| {name} | {} | {cpu:.1} s | {} ({}) | {:.1} s | {fresh_cpu:.1} s | {} |\n",
                mib(rss),
                ms(scrape),
                kib(size),
                ready.as_secs_f64(),
                mib(fresh_rss)
            )
        };
    let report = format!(
        "{nodes} KWOK nodes x {daemonsets} DaemonSets = {pods} daemon pods on the lab's Kubernetes {}, \
         built in {:.0} s while both watched. Then each started afresh on the full cluster.\n\n\
         | | RSS, watching | CPU while the cluster was built | one /metrics scrape (size) | afresh: until it answers for every pod | afresh: CPU | afresh: RSS |\n|---|---|---|---|---|---|---|\n{}{}",
        cp.get("K8S_VERSION"),
        built.as_secs_f64(),
        row("misschedule-exporter", watched[0], exporter_fresh),
        row(
            &format!("kube-state-metrics {} (daemonsets, pods, nodes only)", cp.get("KSM_VERSION")),
            watched[1],
            ksm_fresh
        ),
    );
    println!("{report}");
    if let Ok(path) = std::env::var("LIVE_SCALE_REPORT") {
        std::fs::write(path, report).unwrap();
    }
}
