//! The admission guard on the lab: the real API server calls the exporter's webhook,
//! registered with the chart's own ValidatingWebhookConfiguration (rules, matchConditions,
//! failurePolicy Ignore, 3 s; only the address and CA are the test's), and the real kubectl
//! prints what it says. Each change is made as a user makes it, and its effect checked on
//! the cluster: a warned change goes through, a refused one does not, a dry run changes
//! nothing. Heartbeats and status updates never reach the webhook, and with the exporter
//! gone every change still goes through at once.

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::cluster::*;
use support::http;
use support::nfd::set_feature_on;
use support::scene::{AVX, Deletes, create_scene};

/// What kubectl did: whether it succeeded, its stderr (where `Warning:` lines go), and how long it took.
struct Ran {
    ok: bool,
    stderr: String,
    took: Duration,
}

fn kubectl(kubeconfig: &str, args: &[&str]) -> Ran {
    kubectl_with_input(kubeconfig, args, None)
}

fn kubectl_with_input(kubeconfig: &str, args: &[&str], input: Option<&str>) -> Ran {
    let started = Instant::now();
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        stdin.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("$ kubectl {}\n{stderr}", args.join(" "));
    Ran { ok: out.status.success(), stderr, took: started.elapsed() }
}

/// The node's label `key`, as the API server has it.
async fn label(admin: &Cluster, node: &str, key: &str) -> Option<String> {
    admin.nodes.get(node).await.unwrap().metadata.labels.unwrap_or_default().get(key).cloned()
}

/// Every AdmissionReview the exporter has answered.
fn reviews(exporter: &Exporter) -> f64 {
    samples(&exporter.metrics(), "misschedule_exporter_admission_reviews_total").iter().map(|(_, v)| v).sum()
}

/// The chart's webhook configuration, pointed at `port` on this machine and trusting `ca`.
async fn register(admin: &Cluster, port: u16, ca: &std::path::Path) {
    let rendered = support::chart::render(&json!({"guard": {"enabled": true}}));
    let mut config: ValidatingWebhookConfiguration =
        serde_json::from_value(rendered["guard-webhook.yaml#1"].clone()).expect("the chart's webhook configuration");
    let ca = std::fs::read(ca).unwrap();
    for webhook in &mut config.webhooks.iter_mut().flatten() {
        webhook.client_config.service = None;
        webhook.client_config.url = Some(format!("https://127.0.0.1:{port}/validate"));
        webhook.client_config.ca_bundle = Some(ByteString(ca.clone()));
    }
    let api: Api<ValidatingWebhookConfiguration> = Api::all(admin.client.clone());
    api.create(&PostParams::default(), &config).await.expect("the API server takes the chart's webhook configuration");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn the_guard_warns_refuses_when_asked_and_stays_out_of_the_way() {
    let cp = ControlPlane::start_lab("guard", &LabOptions { components: &["nfd"], ..Default::default() });
    let kc = cp.get("ADMIN_KUBECONFIG").to_owned();
    let admin = Cluster::connect(&kc).await;
    create_scene(&admin, Deletes::AtOnce).await;
    let (cert, key) = http::self_signed(&cp.dir, "webhook");
    let webhook = format!("127.0.0.1:{}", http::free_port());
    let port: u16 = webhook.rsplit_once(':').unwrap().1.parse().unwrap();
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let exporter = Exporter::spawn(
        &["--kubeconfig", cp.get("EXPORTER_KUBECONFIG"), "--webhook-listen", &webhook]
            .into_iter()
            .chain(["--webhook-tls-cert-file", cert_arg, "--webhook-tls-key-file", key_arg])
            // The lab's nfd-master acts as user nfd-master (tests/lab/lab.sh).
            .chain(["--guard-exempt-user", "nfd-master"])
            .collect::<Vec<_>>(),
        Stdio::inherit(),
    );
    wait_until("the exporter is ready", Duration::from_secs(30), || exporter.ready()).await;
    expect(&admin, &exporter, "baseline: all pods bound", BTreeSet::new()).await;
    register(&admin, port, &cert).await;
    // The API server picks the configuration up within a moment: until then nothing warns.
    let started = Instant::now();
    while !kubectl(&kc, &["label", "node", "n1", "disk-", "--dry-run=server"]).stderr.contains("Warning: misschedule:")
    {
        assert!(started.elapsed() < Duration::from_secs(20), "the API server never called the webhook");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A label removed: warned, and done.
    let ran = kubectl(&kc, &["label", "node", "n1", "disk-"]);
    assert!(ran.ok);
    assert!(
        ran.stderr.contains(
            "Warning: misschedule: this change deletes 1 daemon pod: monitoring/ssd-agent on n1 (label_drift disk)"
        ),
        "{}",
        ran.stderr
    );
    assert_eq!(label(&admin, "n1", "disk").await, None);
    let ran = kubectl(&kc, &["label", "node", "n1", "disk=ssd"]);
    assert!(ran.ok);
    assert!(
        ran.stderr.contains(
            "Warning: misschedule: this change makes the DaemonSet controller create 1 daemon pod: monitoring/ssd-agent on n1"
        ),
        "{}",
        ran.stderr
    );
    expect(&admin, &exporter, "the label back", BTreeSet::new()).await;

    // A NoSchedule taint strands the pods that do not tolerate it; taken off, they count again.
    let ran = kubectl(&kc, &["taint", "node", "n2", "dedicated=x:NoSchedule"]);
    assert!(ran.ok);
    assert!(
        ran.stderr.contains("Warning: misschedule: this change leaves 3 daemon pods running where they should not (misscheduled): monitoring/avx-agent on n2 (taint_added dedicated), monitoring/datadog-agent on n2 (taint_added dedicated), monitoring/zone-agent on n2 (taint_added dedicated)"),
        "{}",
        ran.stderr
    );
    let ran = kubectl(&kc, &["taint", "node", "n2", "dedicated-"]);
    assert!(
        ran.ok
            && ran.stderr.contains(
                "Warning: misschedule: this change makes 3 misscheduled daemon pods count as scheduled again"
            ),
        "{}",
        ran.stderr
    );
    expect(&admin, &exporter, "the taint off", BTreeSet::new()).await;

    // A server-side dry run is answered the same way, and changes nothing.
    let ran = kubectl(&kc, &["label", "node", "n3", "zone-", "--dry-run=server"]);
    assert!(ran.ok && ran.stderr.contains("monitoring/zone-agent on n3"), "{}", ran.stderr);
    assert_eq!(label(&admin, "n3", "zone").await.as_deref(), Some("a"));

    // A protected DaemonSet refuses, saying how to go ahead; the bypass goes ahead.
    assert!(kubectl(&kc, &["annotate", "-n", NS, "daemonset", "ssd-agent", "misschedule.io/guard=deny"]).ok);
    let started = Instant::now();
    let refused = loop {
        let ran = kubectl(&kc, &["label", "node", "n3", "disk-"]);
        if !ran.ok {
            break ran;
        }
        // The exporter had not seen the annotation yet: put the label back and try again.
        assert!(started.elapsed() < Duration::from_secs(10), "never refused: {}", ran.stderr);
        assert!(kubectl(&kc, &["label", "node", "n3", "disk=ssd"]).ok);
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        refused.stderr.contains("admission webhook \"nodes.guard.misschedule.io\" denied the request: DaemonSet monitoring/ssd-agent sets misschedule.io/guard: deny"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("kubectl annotate node n3 misschedule.io/guard-bypass='<why>'"),
        "{}",
        refused.stderr
    );
    assert_eq!(label(&admin, "n3", "disk").await.as_deref(), Some("ssd"));
    assert!(kubectl(&kc, &["annotate", "node", "n3", "misschedule.io/guard-bypass=retiring n3"]).ok);
    let ran = kubectl(&kc, &["label", "node", "n3", "disk-"]);
    assert!(ran.ok, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("Warning: misschedule: not refused: misschedule.io/guard-bypass says \"retiring n3\""),
        "{}",
        ran.stderr
    );
    assert_eq!(label(&admin, "n3", "disk").await, None);

    // An exempt user is never refused: the real nfd-master drops a feature label a protected
    // DaemonSet selects on, which a person may not.
    assert!(kubectl(&kc, &["annotate", "-n", NS, "daemonset", "avx-agent", "misschedule.io/guard=deny"]).ok);
    let avx_off = format!("{AVX}-");
    let started = Instant::now();
    while kubectl(&kc, &["label", "node", "n2", &avx_off, "--dry-run=server"]).ok {
        assert!(started.elapsed() < Duration::from_secs(10), "a person's removal of {AVX} was never refused");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    set_feature_on(&admin, &["n2"], AVX, None).await;
    let started = Instant::now();
    while label(&admin, "n2", AVX).await.is_some() {
        assert!(started.elapsed() < Duration::from_secs(30), "nfd-master's removal of {AVX} did not go through");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // `kubectl apply` of a narrowed DaemonSet: warned; the protected one refused, unless the
    // manifest carries the bypass.
    let manifest = |name: &str, selector: serde_json::Value, annotations: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
               "metadata": {"name": name, "namespace": NS, "annotations": annotations},
               "spec": {"selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"nodeSelector": selector,
                                              "containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}})
        .to_string()
    };
    let ran = kubectl_with_input(
        &kc,
        &["apply", "-f", "-"],
        Some(&manifest("datadog-agent", json!({"zone": "b"}), json!({}))),
    );
    assert!(ran.ok, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("Warning: misschedule: this change deletes 3 daemon pods: monitoring/datadog-agent on n1"),
        "{}",
        ran.stderr
    );
    let narrowed = manifest("ssd-agent", json!({"disk": "ssd", "zone": "b"}), json!({"misschedule.io/guard": "deny"}));
    let ran = kubectl_with_input(&kc, &["apply", "-f", "-"], Some(&narrowed));
    assert!(!ran.ok && ran.stderr.contains("daemonsets.guard.misschedule.io\" denied the request"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("misschedule.io/guard-bypass: '<why>' to the DaemonSet in this same change"),
        "{}",
        ran.stderr
    );
    let bypassed = manifest(
        "ssd-agent",
        json!({"disk": "ssd", "zone": "b"}),
        json!({"misschedule.io/guard": "deny", "misschedule.io/guard-bypass": "moving to zone b"}),
    );
    let ran = kubectl_with_input(&kc, &["apply", "-f", "-"], Some(&bypassed));
    assert!(
        ran.ok && ran.stderr.contains("this change deletes 2 daemon pods: monitoring/ssd-agent on n1"),
        "{}",
        ran.stderr
    );

    // What is no label, taint or placement change never reaches the webhook: KWOK's
    // heartbeats and status updates, an annotation.
    let before = reviews(&exporter);
    assert!(kubectl(&kc, &["annotate", "node", "n1", "team=platform"]).ok);
    assert!(kubectl(&kc, &["annotate", "-n", NS, "daemonset", "datadog-agent", "team=platform"]).ok);
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(reviews(&exporter), before, "only label, taint and placement changes are reviewed");

    // The exporter gone: changes go through at once, unchecked.
    drop(exporter);
    let ran = kubectl(&kc, &["label", "node", "n1", "disk-"]);
    assert!(ran.ok, "{}", ran.stderr);
    assert!(ran.took < Duration::from_secs(3), "took {:?}", ran.took);
    assert!(!ran.stderr.contains("misschedule"), "{}", ran.stderr);
    assert_eq!(label(&admin, "n1", "disk").await, None);
}
