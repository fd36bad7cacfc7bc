//! `--auth-kubernetes` on a real control plane (etcd + kube-apiserver v1.20.2): the exporter,
//! running with the chart's ClusterRole for that mode, lets a ServiceAccount token through to
//! `/metrics` only if the API server authenticates it and RBAC allows `get /metrics`; a token
//! it cannot check (API server down) is refused, and the exporter keeps serving.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::cluster::*;
use support::http;

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// A token for `service_account`. Tokens issued in the same second with the same lifetime are
/// identical (1.20's have no `jti`), so `lifetime` tells them apart.
async fn token(admin: &Cluster, service_account: &str, lifetime: i64) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.client.clone(), NS);
    let request: TokenRequest = from(json!({"spec": {"audiences": [], "expirationSeconds": lifetime}}));
    let issued = accounts.create_token_request(service_account, &PostParams::default(), &request).await.unwrap();
    issued.status.unwrap().token
}

/// Status of GET /metrics with `authorization` (or none), and its WWW-Authenticate header.
fn scrape(exporter: &Exporter, authorization: Option<&str>) -> (u16, String) {
    let (status, head, _) = match authorization {
        Some(value) => http::get_authorized(exporter.port, "/metrics", value),
        None => http::get_with_headers(exporter.port, "/metrics"),
    }
    .expect("the exporter answers");
    let challenge = head.lines().find_map(|l| l.strip_prefix("www-authenticate: ")).unwrap_or("").to_owned();
    (status, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn service_account_tokens_are_reviewed_by_the_api_server() {
    let cp = ControlPlane::start("scrape-auth");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    let pp = PostParams::default();
    Api::<Namespace>::all(admin.client.clone()).create(&pp, &from(json!({"metadata": {"name": NS}}))).await.unwrap();

    // The exporter's permissions: the chart's ClusterRole with kubernetesAuth on.
    let rendered = support::chart::render(&json!({"web": {"kubernetesAuth": true}}));
    let role: ClusterRole = from(rendered["clusterrole.yaml"].clone());
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &role).await.unwrap();
    let binding = |name: &str, role: &str, subject: serde_json::Value| -> ClusterRoleBinding {
        from(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]
        }))
    };
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.client.clone());
    let exporter_user =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "misschedule-exporter"});
    bindings.create(&pp, &binding("exporter", role.metadata.name.as_deref().unwrap(), exporter_user)).await.unwrap();

    // Two scrapers: `prometheus` may get /metrics (as kube-prometheus-stack's may), `stranger` may not.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.client.clone(), NS);
    for name in ["prometheus", "stranger"] {
        accounts.create(&pp, &from(json!({"metadata": {"name": name}}))).await.unwrap();
    }
    let reader: ClusterRole = from(
        json!({"metadata": {"name": "metrics-reader"}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    );
    Api::<ClusterRole>::all(admin.client.clone()).create(&pp, &reader).await.unwrap();
    let prometheus_sa = json!({"kind": "ServiceAccount", "name": "prometheus", "namespace": NS});
    bindings.create(&pp, &binding("metrics-reader", "metrics-reader", prometheus_sa)).await.unwrap();
    let (allowed, denied) = (token(&admin, "prometheus", 3600).await, token(&admin, "stranger", 3600).await);
    let unseen = token(&admin, "prometheus", 3601).await;
    assert_ne!(allowed, unseen);

    let log = cp.dir.join("exporter-scrape-auth.log");
    let exporter = Exporter::start_with(cp.get("EXPORTER_KUBECONFIG"), &["--auth-kubernetes"], &log);
    let started = Instant::now();
    while !exporter.ready() {
        assert!(started.elapsed() < Duration::from_secs(30), "exporter never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // (the helper lower-cases the response head)
    assert_eq!(scrape(&exporter, None), (401, "bearer realm=\"misschedule-exporter\"".into()));
    assert_eq!(scrape(&exporter, Some("Bearer not-a-token")).0, 401);
    assert_eq!(scrape(&exporter, Some(&format!("Basic {allowed}"))).0, 401, "only a bearer token is reviewed");
    assert_eq!(scrape(&exporter, Some(&format!("Bearer {denied}"))).0, 403, "authenticated, not authorized");
    let (status, _, body) = http::get_authorized(exporter.port, "/metrics", &format!("Bearer {allowed}")).unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("misschedule_exporter_cache_synced"), "{body}");
    // Cached: the same answer again, without waiting on the API server.
    assert_eq!(scrape(&exporter, Some(&format!("Bearer {allowed}"))).0, 200);

    // API server down: a valid token that was never reviewed cannot be checked, so it is refused.
    assert!(cp.script("kill-apiserver").success());
    let refused = Instant::now();
    assert_eq!(
        scrape(&exporter, Some(&format!("Bearer {unseen}"))).0,
        401,
        "an unreachable API server opened the door"
    );
    assert!(refused.elapsed() < Duration::from_secs(8), "the review must time out before Prometheus' scrape does");
    assert_eq!(exporter.get("/healthz").map(|(s, _)| s), Some(200), "the exporter keeps serving");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("cannot review a scrape's token"), "{log_text}");

    // Back up: the same token now passes (the failure was not cached).
    assert!(cp.script("start-apiserver").success());
    let started = Instant::now();
    while scrape(&exporter, Some(&format!("Bearer {unseen}"))).0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(30), "the token never passed after the API server came back");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
