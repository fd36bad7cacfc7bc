//! Node feature labels as node-feature-discovery sets them: a test writes a NodeFeature
//! object, the interface NFD documents for third parties, and the lab's real nfd-master
//! (`lab.sh up DIR nfd`) puts its labels on the node, as field manager `nfd-master`.

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use super::cluster::{Cluster, STEP_TIMEOUT};

/// Where the lab's nfd-master reads NodeFeature objects (lab.sh's NFD_NAMESPACE).
pub const NFD_NAMESPACE: &str = "node-feature-discovery";

fn node_features(admin: &Cluster) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "nfd.k8s-sigs.io".into(),
        version: "v1alpha1".into(),
        api_version: "nfd.k8s-sigs.io/v1alpha1".into(),
        kind: "NodeFeature".into(),
        plural: "nodefeatures".into(),
    };
    Api::namespaced_with(admin.client.clone(), NFD_NAMESPACE, &resource)
}

/// Report `key=value` (or, with `None`, no `key`) for `node` in its NodeFeature object, and
/// wait until nfd-master has made the node's labels agree.
pub async fn set_feature(admin: &Cluster, node: &str, key: &str, value: Option<&str>) {
    let api = node_features(admin);
    let name = format!("{node}-features");
    if api.get_opt(&name).await.expect("read a NodeFeature").is_none() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": name, "labels": {"nfd.node.kubernetes.io/node-name": node}},
            "spec": {"labels": {}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &object).await.expect("create a NodeFeature");
    }
    let patch = json!({"spec": {"labels": {key: value}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch a NodeFeature");
    let started = Instant::now();
    loop {
        let labels = admin.nodes.get(node).await.ok().and_then(|n| n.metadata.labels).unwrap_or_default();
        if labels.get(key).map(String::as_str) == value {
            return;
        }
        assert!(started.elapsed() < STEP_TIMEOUT, "nfd-master never set {key}={value:?} on {node}: {labels:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The same for several nodes at once, each waited for.
pub async fn set_feature_on(admin: &Cluster, nodes: &[&str], key: &str, value: Option<&str>) {
    for node in nodes {
        set_feature(admin, node, key, value).await;
    }
}
