//! `GET /explain` and the landing page `GET /` of the real binary on a snapshot: the same
//! object as `explain -o json`, the filters, and clear refusals of bad parameters.

use std::process::Command;

use serde_json::Value;

mod support;

use support::browser;
use support::exporter::Exporter;

const SNAPSHOT: &str = "examples/cluster-autoscaler-drain.json";

/// `explain -o json` of the CLI, with the age (which moves with the clock) taken out.
fn cli_explanation(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_misschedule-exporter"))
        .args(["explain", "--snapshot", SNAPSHOT, "-o", "json"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    without_age(serde_json::from_slice(&out.stdout).unwrap())
}

fn without_age(mut explanation: Value) -> Value {
    for row in explanation["misscheduled"].as_array_mut().unwrap() {
        row.as_object_mut().unwrap().remove("age_seconds").expect("every row has an age");
    }
    explanation
}

fn get_json(exporter: &Exporter, path: &str) -> Value {
    let (status, body) = exporter.get(path).unwrap();
    assert_eq!(status, 200, "{path}: {body}");
    without_age(serde_json::from_str(&body).unwrap())
}

#[test]
fn explain_endpoint_serves_the_cli_object_and_filters() {
    let exporter = Exporter::snapshot(&[SNAPSHOT]);
    let all = get_json(&exporter, "/explain");
    assert_eq!(all, cli_explanation(&[]));
    assert!(!all["misscheduled"].as_array().unwrap().is_empty(), "the example has misscheduled pods");
    assert!(!all["ineligible"].as_array().unwrap().is_empty(), "and nodes its DaemonSets skip");

    let one = get_json(&exporter, "/explain?daemonset=datadog-agent");
    assert_eq!(one, cli_explanation(&["--daemonset", "datadog-agent"]));
    assert_eq!(one["misscheduled"].as_array().unwrap().len(), 1);
    assert_eq!(get_json(&exporter, "/explain?namespace=monitoring"), all);
    // An empty value, as an HTML form sends, is no filter.
    assert_eq!(get_json(&exporter, "/explain?namespace=&daemonset="), all);
    let none = get_json(&exporter, "/explain?namespace=elsewhere");
    assert_eq!(none["misscheduled"], Value::Array(vec![]));
    assert_eq!(none["ineligible"], Value::Array(vec![]));

    let (_, head, _) = support::http::get_with_headers(exporter.port, "/explain").unwrap();
    assert!(head.contains("content-type: application/json"), "{head}");
}

#[test]
fn bad_parameters_get_a_clear_400() {
    let exporter = Exporter::snapshot(&[SNAPSHOT]);
    for path in ["/explain?daemonsets=x", "/?namespace=a&namespace=b"] {
        let (status, body) = exporter.get(path).unwrap();
        assert_eq!(status, 400, "{path}: {body}");
        assert!(!body.is_empty(), "{path}: the refusal says why");
    }
}

#[test]
fn landing_page_lists_the_same_rows() {
    let exporter = Exporter::snapshot(&[SNAPSHOT]);
    let (status, head, page) = support::http::get_with_headers(exporter.port, "/").unwrap();
    assert_eq!(status, 200, "{page}");
    assert!(head.contains("content-type: text/html; charset=utf-8"), "{head}");
    let explanation = get_json(&exporter, "/explain");
    for row in explanation["misscheduled"].as_array().unwrap() {
        for field in ["pod", "node", "reason", "key"] {
            let text = row[field].as_str().unwrap();
            assert!(page.contains(text), "page lacks {field} {text}");
        }
    }
    assert!(page.contains("href=\"/metrics\"") && page.contains("href=\"/explain\""));
    assert!(!page.contains("<script"), "the page needs no script");

    let (_, filtered) = exporter.get("/?daemonset=datadog-agent").unwrap();
    assert!(filtered.contains("Showing only DaemonSet datadog-agent"));
    assert!(filtered.contains("1 misscheduled daemon pod."), "{filtered}");
}

#[test]
#[ignore = "needs chromium: scripts/test.sh runs it"]
fn landing_page_renders_in_a_real_browser() {
    let exporter = Exporter::snapshot(&[SNAPSHOT]);
    let url = format!("http://127.0.0.1:{}/", exporter.port);
    let explanation = get_json(&exporter, "/explain");
    let rows = explanation["misscheduled"].as_array().unwrap();

    // The DOM as the browser built it: one table row per misscheduled pod, with its cells.
    let dom = browser::dom(&url);
    let table = dom.split("<table id=\"misscheduled\">").nth(1).expect("the misscheduled table").split("</table>");
    let body = table.into_iter().next().unwrap();
    assert_eq!(body.matches("<tr>").count(), rows.len() + 1, "a header row and one row per pod: {body}");
    for row in rows {
        let cells = ["namespace", "daemonset", "pod", "node", "reason"]
            .map(|f| format!("<td>{}</td>", row[f].as_str().unwrap()));
        let line = cells.concat();
        assert!(body.contains(&line), "no row with {line} in {body}");
    }
    assert!(dom.contains("<table id=\"ineligible\">"));
    assert!(dom.contains("No misscheduled daemon pods.") == rows.is_empty());

    // A screenshot for a person to look at.
    browser::screenshot(&url, "landing-page.png");
}
