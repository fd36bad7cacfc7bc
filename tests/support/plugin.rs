//! `kubectl misschedule` as a user runs it: through the real kubectl, with the plugin on
//! PATH, and reaching a test exporter through the API server's service proxy.

use std::process::Command;

use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::cluster::{Cluster, NS};

/// `kubectl` (the one on the machine) with these arguments; it must succeed.
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

/// A Service `NS/misschedule-exporter` (port 18493) whose endpoint is this machine's address
/// at `exporter_port`, so that `--from-exporter NS/misschedule-exporter` reaches an exporter
/// listening on every address. The API server proxies only to a pod's address, so a
/// stand-in pod (on node `node`) carries it.
pub async fn expose_exporter(admin: &Cluster, exporter_port: u16, node: &str) {
    let host = Command::new("hostname").arg("-I").output().unwrap();
    let host = String::from_utf8(host.stdout).unwrap();
    let ip = host
        .split_whitespace()
        .find(|a| a.contains('.') && !a.starts_with("127."))
        .expect("a non-loopback IPv4 address");
    let pp = PostParams::default();
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        // The chart's label, by which the plugin finds a running exporter.
        "metadata": {"name": "misschedule-exporter", "labels": {"app.kubernetes.io/name": "misschedule-exporter"}},
        "spec": {"ports": [{"name": "http-metrics", "port": 18493, "targetPort": exporter_port}]}
    }))
    .unwrap();
    Api::namespaced(admin.client.clone(), NS).create(&pp, &service).await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.client.clone(), NS);
    let stand_in = json!({"metadata": {"name": "exporter-stand-in"}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "none"}]}});
    pods.create(&pp, &serde_json::from_value(stand_in).unwrap()).await.unwrap();
    let status = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status("exporter-stand-in", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let endpoints: k8s_openapi::api::core::v1::Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "misschedule-exporter"},
        "subsets": [{"addresses": [{"ip": ip, "targetRef": {"kind": "Pod", "name": "exporter-stand-in", "namespace": NS}}],
                     "ports": [{"name": "http-metrics", "port": exporter_port}]}]
    }))
    .unwrap();
    Api::namespaced(admin.client.clone(), NS).create(&pp, &endpoints).await.unwrap();
}
