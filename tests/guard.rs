//! The admission guard through the library, on hand-built scenes: the excerpt it copies,
//! what it says of a node or DaemonSet change, when it refuses, and how a refusal is gone
//! round. The lab test (`guard_lab.rs`) has the API server and kubectl.

mod support;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use misschedule_exporter::guard::review::{self, Request};
use misschedule_exporter::guard::{self, Change, Policy, Verdict};
use misschedule_exporter::index::{Index, Resource, Touched};
use misschedule_exporter::model::Str;
use serde_json::{Value, json};
use support::*;

const GPU: &str = "nvidia.com/gpu.present";

/// n1 and n2 with the GPU label, n3 without; `gpu-agent` (nodeSelector GPU) on n1 and n2,
/// `logs` everywhere, each with a pod on every node it wants.
fn scene(protect_gpu_agent: bool) -> (Index, Vec<Node>) {
    let nodes = vec![node("n1", &[(GPU, "true")], &[]), node("n2", &[(GPU, "true")], &[]), node("n3", &[], &[])];
    let mut gpu = daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true"}, "containers": []}));
    if protect_gpu_agent {
        gpu.metadata.annotations = Some([("misschedule.io/guard".to_owned(), "deny".to_owned())].into());
    }
    let logs = daemonset("logs", json!({"containers": []}));
    let mut pods: Vec<Pod> = ["n1", "n2"].iter().map(|n| daemon_pod(&gpu, n, "h", true)).collect();
    pods.extend(["n1", "n2", "n3"].iter().map(|n| daemon_pod(&logs, n, "h", true)));
    let revisions = vec![revision(&gpu, "h"), revision(&logs, "h")];
    (cluster(nodes.clone(), vec![gpu, logs], revisions, pods), nodes)
}

fn request(resource: (&str, &str), operation: &str, object: Value, user: &str) -> Request {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1", "resource": {"group": resource.0, "version": "v1", "resource": resource.1},
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": operation, "userInfo": {"username": user}, "object": object
        }
    });
    review::decode(&serde_json::to_vec(&body).unwrap()).unwrap()
}

/// The node `node` with its labels replaced by `labels` and annotations added.
fn node_request(node: &Node, labels: Value, annotations: Value, user: &str) -> Request {
    let mut object = serde_json::to_value(node).unwrap();
    object["metadata"]["labels"] = labels;
    object["metadata"]["annotations"] = annotations;
    request(("", "nodes"), "UPDATE", object, user)
}

fn answer(index: &Index, request: &Request, policy: &Policy) -> (Verdict, review::Response) {
    let change = Change::of(request).unwrap();
    let excerpt = index.excerpt(change.touched().expect("a change the guard looks at"));
    guard::answer(excerpt, change, request, policy)
}

#[test]
fn a_node_change_copies_that_node_and_its_pods_only() {
    let (index, _) = scene(false);
    let names = [Str::from("n1")];
    let copy = index.excerpt(Touched::Nodes(&names));
    assert!(copy.synced());
    assert_eq!((copy.len(Resource::Nodes), copy.len(Resource::DaemonSets), copy.len(Resource::Pods)), (1, 2, 2));
    assert_eq!(copy.daemonset("ns", "gpu-agent").unwrap().pods_on("n1").len(), 1);
    let copy = index.excerpt(Touched::DaemonSet { namespace: "ns", name: "gpu-agent" });
    assert_eq!((copy.len(Resource::Nodes), copy.len(Resource::DaemonSets), copy.len(Resource::Pods)), (3, 1, 2));
    let none = index.excerpt(Touched::DaemonSet { namespace: "ns", name: "new" });
    assert_eq!((none.len(Resource::Nodes), none.len(Resource::DaemonSets)), (3, 0));
}

#[test]
fn removing_a_label_warns_of_the_pods_it_deletes_and_the_copy_changes_nothing() {
    let (index, nodes) = scene(false);
    let generation = index.generation();
    let (verdict, response) =
        answer(&index, &node_request(&nodes[0], json!({}), json!({}), "alice"), &Policy::default());
    assert_eq!(verdict, Verdict::Warned);
    assert!(response.allowed);
    assert_eq!(
        response.warnings,
        ["misschedule: this change deletes 1 daemon pod: ns/gpu-agent on n1 (label_drift nvidia.com/gpu.present)"]
    );
    assert_eq!(index.generation(), generation, "the exporter's index is not written");
}

#[test]
fn nothing_is_said_when_nothing_moves() {
    let (index, nodes) = scene(false);
    let same = node_request(&nodes[0], json!({GPU: "true", "team": "a"}), json!({}), "alice");
    assert_eq!(
        answer(&index, &same, &Policy::default()),
        (Verdict::Allowed, review::Response { allowed: true, ..Default::default() })
    );
}

#[test]
fn a_protected_daemonset_refuses_until_bypassed_or_the_user_is_exempt() {
    let (index, nodes) = scene(true);
    let change = |annotations| node_request(&nodes[1], json!({}), annotations, "alice");
    let (verdict, refused) = answer(&index, &change(json!({})), &Policy::default());
    assert_eq!(verdict, Verdict::Denied);
    assert!(!refused.allowed);
    let message = refused.refusal.unwrap();
    assert!(message.starts_with("DaemonSet ns/gpu-agent sets misschedule.io/guard: deny"), "{message}");
    assert!(message.contains("kubectl annotate node n2 misschedule.io/guard-bypass='<why>'"), "{message}");
    assert_eq!(refused.warnings.len(), 1, "the warnings still say what would move");

    let (verdict, bypassed) =
        answer(&index, &change(json!({"misschedule.io/guard-bypass": "pool migration"})), &Policy::default());
    assert_eq!(verdict, Verdict::Warned);
    assert!(bypassed.allowed);
    assert_eq!(bypassed.audit.get("bypass").map(String::as_str), Some("pool migration"));
    assert!(bypassed.warnings.last().unwrap().contains("not refused"), "{:?}", bypassed.warnings);

    let exempt = Policy { exempt_users: vec!["system:serviceaccount:nfd:nfd-master".into()] };
    let by_nfd = node_request(&nodes[1], json!({}), json!({}), "system:serviceaccount:nfd:nfd-master");
    let (verdict, response) = answer(&index, &by_nfd, &exempt);
    assert_eq!((verdict, response.allowed), (Verdict::Warned, true));
    assert!(response.warnings.last().unwrap().contains("is exempt"), "{:?}", response.warnings);

    // What only creates pods is never refused.
    let n3 = node_request(&nodes[2], json!({GPU: "true"}), json!({}), "alice");
    let (verdict, response) = answer(&index, &n3, &Policy::default());
    assert_eq!((verdict, response.allowed), (Verdict::Warned, true));
    assert_eq!(
        response.warnings,
        [
            "misschedule: this change makes the DaemonSet controller create 1 daemon pod: ns/gpu-agent on n3 (node_selector nvidia.com/gpu.present)"
        ]
    );
}

#[test]
fn a_narrowed_daemonset_warns_and_a_dry_run_is_audited_nowhere() {
    let (index, _) = scene(true);
    let mut narrowed: DaemonSet =
        daemonset("gpu-agent", json!({"nodeSelector": {GPU: "true", "zone": "a"}, "containers": []}));
    narrowed.metadata.annotations = Some([("misschedule.io/guard-bypass".to_owned(), "zone a only".to_owned())].into());
    let mut request = request(("apps", "daemonsets"), "UPDATE", serde_json::to_value(&narrowed).unwrap(), "alice");
    request.dry_run = true;
    let (verdict, response) = answer(&index, &request, &Policy::default());
    assert_eq!(verdict, Verdict::Warned);
    assert!(
        response.warnings[0].starts_with("misschedule: this change deletes 2 daemon pods: ns/gpu-agent on n1"),
        "{:?}",
        response.warnings
    );
    assert!(response.audit.is_empty(), "a dry run is recorded nowhere");
}

#[test]
fn what_it_cannot_check_is_let_through_saying_so() {
    let (index, nodes) = scene(false);
    let unknown = node_request(&node("n9", &[], &[]), json!({}), json!({}), "alice");
    let (verdict, response) = answer(&index, &unknown, &Policy::default());
    assert_eq!((verdict, response.allowed), (Verdict::Warned, true));
    assert!(response.warnings[0].contains("node n9 is not in the exporter's index"), "{:?}", response.warnings);

    let (verdict, response) = guard::unsynced(&["nodes", "pods"]);
    assert_eq!((verdict, response.allowed), (Verdict::Unsynced, true));
    assert!(response.warnings[0].contains("has not synced its caches yet (nodes, pods)"), "{:?}", response.warnings);

    // A status subresource or a pod is not the guard's.
    let mut status = node_request(&nodes[0], json!({}), json!({}), "kubelet");
    status.sub_resource = "status".into();
    assert!(matches!(Change::of(&status).unwrap(), Change::Other));
    let pod = request(("", "pods"), "CREATE", json!({"metadata": {"name": "p"}}), "alice");
    assert!(matches!(Change::of(&pod).unwrap(), Change::Other));

    // A node object that is not one is said, not a panic.
    let bad = request(("", "nodes"), "UPDATE", json!({"metadata": {"name": "n1", "labels": ["x"]}}), "alice");
    let error = Change::of(&bad).unwrap_err().to_string();
    assert!(error.starts_with("the request's object is not a valid Node"), "{error}");
}
