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

/// Without what moves with the clock: each row's age, and when the answer was made.
fn without_age(mut explanation: Value) -> Value {
    for row in explanation["misscheduled"].as_array_mut().unwrap() {
        row.as_object_mut().unwrap().remove("age_seconds").expect("every row has an age");
    }
    explanation["looked_at"].as_object_mut().unwrap().remove("as_of").expect("every answer says when");
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
    let monitoring = get_json(&exporter, "/explain?namespace=monitoring");
    assert_eq!((&monitoring["misscheduled"], &monitoring["ineligible"]), (&all["misscheduled"], &all["ineligible"]));
    // An empty value, as an HTML form sends, is no filter.
    assert_eq!(get_json(&exporter, "/explain?namespace=&daemonset="), all);
    // Every answer says what it looked at.
    let looked_at = &all["looked_at"];
    assert_eq!(looked_at["source"], format!("snapshot {SNAPSHOT}"));
    assert_eq!((&looked_at["namespace"], &looked_at["daemonset"]), (&Value::Null, &Value::Null));
    assert!(looked_at["daemonsets"].as_u64().unwrap() > 0 && looked_at["nodes"].as_u64().unwrap() > 0);
    assert_eq!(monitoring["looked_at"]["namespace"], "monitoring");
    assert_eq!(monitoring["looked_at"]["misscheduled_elsewhere"], 0);
    let none = get_json(&exporter, "/explain?namespace=elsewhere");
    assert_eq!(none["misscheduled"], Value::Array(vec![]));
    assert_eq!(none["ineligible"], Value::Array(vec![]));
    assert_eq!(none["looked_at"]["daemonsets"], 0, "no DaemonSets there: said, not implied");
    // A DaemonSet that is not there is a 404, not an empty answer.
    let (status, body) = exporter.get("/explain?daemonset=nope").unwrap();
    assert_eq!(status, 404, "{body}");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refusal["kind"], "Status", "shaped as the API server's, for its service proxy: {body}");
    assert_eq!(
        refusal["message"],
        format!("daemonsets.apps \"nope\" not found in any namespace (snapshot {SNAPSHOT})")
    );

    let (_, head, _) = support::http::get_with_headers(exporter.port, "/explain").unwrap();
    assert!(head.contains("content-type: application/json"), "{head}");
}

#[test]
fn a_namespace_the_exporter_does_not_read_is_a_404() {
    let exporter = Exporter::spawn(&["--snapshot", SNAPSHOT, "-n", "monitoring"], std::process::Stdio::null());
    support::http::wait_ok(exporter.port, "/readyz", std::time::Duration::from_secs(10));
    let (status, body) = exporter.get("/explain?namespace=kube-system").unwrap();
    assert_eq!(status, 404, "{body}");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        refusal["message"],
        format!("namespace kube-system was not read: snapshot {SNAPSHOT} holds only monitoring")
    );
    let (status, page) = exporter.get("/?namespace=kube-system").unwrap();
    assert_eq!(status, 404);
    assert!(page.contains("namespace kube-system was not read") && !page.contains("No misscheduled"), "{page}");
    // What it reads, it names: the answer covers monitoring only.
    assert_eq!(get_json(&exporter, "/explain")["looked_at"]["namespace"], "monitoring");
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
    // Relative links: the page works behind `kubectl proxy` and any path prefix.
    assert!(page.contains("href=\"metrics\"") && page.contains("href=\"explain\"") && !page.contains("href=\"/"));
    assert!(!page.contains("<script"), "the page needs no script");

    let (_, filtered) = exporter.get("/?daemonset=datadog-agent").unwrap();
    assert!(filtered.contains("in DaemonSets named datadog-agent in any namespace"), "{filtered}");
    assert!(filtered.contains("Showing only part of what was read. <a href=\"?\">Show all</a>"));
    assert!(filtered.contains("1 misscheduled daemon pod"), "{filtered}");
}

#[test]
#[ignore = "needs chromium: scripts/test.sh runs it"]
fn landing_page_renders_in_a_real_browser() {
    let exporter = Exporter::snapshot(&[SNAPSHOT]);
    let url = format!("http://127.0.0.1:{}/", exporter.port);
    let explanation = get_json(&exporter, "/explain");
    let rows = explanation["misscheduled"].as_array().unwrap();

    // The DOM as the browser built it: one table row per misscheduled pod, with its cells,
    // those that need action apart from the expected ones.
    let dom = browser::dom(&url);
    let table = |id: &str| {
        dom.split(&format!("<table id=\"{id}\" class=\"rows\">"))
            .nth(1)
            .map(|t| t.split("</table>").next().unwrap().to_owned())
    };
    let tables: Vec<String> = [table("misscheduled"), table("expected")].into_iter().flatten().collect();
    let body = tables.concat();
    let headers = tables.len();
    assert_eq!(body.matches("<tr").count(), rows.len() + headers, "a header row per table and one row per pod: {body}");
    for row in rows {
        let cells = [("Namespace", "namespace"), ("DaemonSet", "daemonset"), ("Pod", "pod"), ("Node", "node")]
            .map(|(column, f)| format!("<td data-label=\"{column}\">{}</td>", row[f].as_str().unwrap()));
        let line = cells.concat();
        assert!(body.contains(&line), "no row with {line} in {body}");
        let reason = row["reason"].as_str().unwrap();
        assert!(body.contains(&format!("docs/runbooks.md#{reason}\">{reason}</a>")), "{reason} links its runbook");
    }
    let expected = table("expected").expect("the example's drain is expected");
    assert!(expected.contains("autoscaler_drain"), "{expected}");
    assert!(!table("misscheduled").unwrap_or_default().contains("autoscaler_drain"));
    assert!(dom.contains("<table id=\"ineligible\">"));
    assert!(dom.contains("As of <time>"), "the page says when");

    // No horizontal scroll at a laptop's width or half of it: every cell wraps.
    for width in [1400, 800] {
        let (page_width, window) = browser::scroll_width(&url, width);
        assert!(page_width <= window, "{width} px: the page is {page_width} px wide in a {window} px window");
        browser::screenshot_at(&url, &format!("landing-page-{width}.png"), width);
    }

    // A screenshot for a person to look at.
    browser::screenshot(&url, "landing-page.png");
}
