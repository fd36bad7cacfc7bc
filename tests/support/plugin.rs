//! `kubectl misschedule` as a user runs it: through the real kubectl, with the plugin on
//! PATH, and reaching a test exporter through the API server's service proxy.

use std::process::Command;

use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::cluster::{Cluster, NS};

/// `kubectl` (the lab's, first on PATH) with these arguments; it must succeed.
pub fn kubectl(kubeconfig: &str, args: &[&str]) {
    let out = Command::new("kubectl").arg("--kubeconfig").arg(kubeconfig).args(args).output().expect("kubectl");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `kubectl misschedule --kubeconfig KUBECONFIG`, with the built plugin first on PATH.
pub fn kubectl_plugin(kubeconfig: &str) -> Command {
    let plugin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-misschedule")).parent().unwrap();
    let path = format!("{}:{}", plugin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new("kubectl");
    command.args(["misschedule", "--kubeconfig", kubeconfig]).env("PATH", path);
    command
}

/// A Service `NS/misschedule-exporter` (port 18493) in front of this test's exporter, so that
/// `--from-exporter NS/misschedule-exporter` reaches it through the API server's service
/// proxy, as it reaches the chart's. The exporter runs on this machine, not in a container:
/// its pod is a hostNetwork pod on `node`, which KWOK runs and gives the node's address
/// (lab.sh makes that this machine's), and the endpoints controller puts behind the Service.
/// The exporter must listen on every address. Waits until the Service has the endpoint.
pub async fn expose_exporter(admin: &Cluster, exporter_port: u16, node: &str) {
    let pp = PostParams::default();
    // The chart's labels, by which the plugin finds a running exporter.
    let labels = json!({"app.kubernetes.io/name": "misschedule-exporter"});
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter", "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http-metrics", "port": 18493, "targetPort": exporter_port}]}
    }))
    .unwrap();
    Api::namespaced(admin.client.clone(), NS).create(&pp, &service).await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.client.clone(), NS);
    let pod = json!({"metadata": {"name": "misschedule-exporter", "labels": labels},
        "spec": {"hostNetwork": true, "nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "exporter", "image": "misschedule-exporter:test"}]}});
    pods.create(&pp, &serde_json::from_value(pod).unwrap()).await.unwrap();
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(admin.client.clone(), NS);
    let started = std::time::Instant::now();
    loop {
        let ready =
            endpoints.get_opt("misschedule-exporter").await.ok().flatten().is_some_and(|e| {
                e.subsets.iter().flatten().any(|s| s.addresses.as_ref().is_some_and(|a| !a.is_empty()))
            });
        if ready {
            return;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the exporter's Service never got an endpoint");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
