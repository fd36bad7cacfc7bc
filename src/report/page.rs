//! The landing page (`GET /`): the explanation as one self-contained HTML page, for an
//! operator who port-forwards to the exporter. No script and no external asset, so it
//! renders in any browser and behind any proxy. Everything from the cluster is escaped.

use std::fmt::{self, Display, Write as _};

use crate::report::explain::Explanation;
use crate::report::text::human_age;

/// What the page says about the exporter itself.
pub struct PageStatus<'a> {
    /// Resources not yet synced, or whose watch is failing; empty when ready.
    pub waiting: &'a [&'a str],
    /// The filter in effect, shown so a narrowed page is not mistaken for the whole cluster.
    pub namespace: Option<&'a str>,
    pub daemonset: Option<&'a str>,
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f0f0f0}td{white-space:nowrap}td.fix{white-space:normal;max-width:40em}code{font-size:.95em}\
.warn{background:#fff3cd;padding:.5em;border:1px solid #e0c060}\
.ok{color:#2a7a2a}nav a{margin-right:1em}";

pub fn render_page(explanation: &Explanation, status: &PageStatus<'_>) -> String {
    let mut out = String::with_capacity(4096 + explanation.misscheduled.len() * 512);
    // Writing to a String cannot fail.
    let _ = write_page(&mut out, explanation, status);
    out
}

fn write_page(out: &mut String, explanation: &Explanation, status: &PageStatus<'_>) -> fmt::Result {
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>misschedule-exporter</title><style>{STYLE}</style></head><body>\n\
         <h1>Misscheduled daemon pods</h1>\n\
         <nav><a href=\"/metrics\">/metrics</a><a href=\"/explain\">/explain</a>\
         <a href=\"/readyz\">/readyz</a></nav>\n"
    )?;
    if !status.waiting.is_empty() {
        writeln!(
            out,
            "<p class=\"warn\">Not ready: {} not synced or failing. What follows may be incomplete.</p>",
            Escaped(&status.waiting.join(", "))
        )?;
    }
    let mut filters = Vec::new();
    if let Some(ns) = status.namespace {
        filters.push(format!("namespace {}", Escaped(ns)));
    }
    if let Some(ds) = status.daemonset {
        filters.push(format!("DaemonSet {}", Escaped(ds)));
    }
    if !filters.is_empty() {
        writeln!(out, "<p>Showing only {}. <a href=\"/\">Show all</a></p>", filters.join(" and "))?;
    }

    let pods = &explanation.misscheduled;
    if pods.is_empty() && explanation.lost.is_empty() {
        out.push_str("<p class=\"ok\">No misscheduled daemon pods.</p>\n");
    } else if pods.is_empty() {
        // Not green: nodes below run without their agent.
        out.push_str("<p>No misscheduled daemon pods.</p>\n");
    } else {
        writeln!(out, "<p>{} misscheduled daemon pod{}.</p>", pods.len(), plural(pods.len()))?;
        out.push_str(
            "<table id=\"misscheduled\"><thead><tr><th>Namespace</th><th>DaemonSet</th><th>Pod</th>\
             <th>Node</th><th>Reason</th><th>Key</th><th>Changed by</th><th>Since</th><th>Suggested fix</th></tr></thead><tbody>\n",
        );
        for row in pods {
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>\
                 <td>{}</td><td title=\"{}\">{} ago</td><td class=\"fix\">{}</td></tr>",
                Escaped(&row.namespace),
                Escaped(&row.daemonset),
                Escaped(&row.pod),
                Escaped(&row.node),
                Escaped(&row.reason),
                Escaped(&row.key),
                Escaped(&row.manager),
                Escaped(&row.since),
                human_age(row.age_seconds),
                Escaped(&row.fix),
            )?;
        }
        out.push_str("</tbody></table>\n");
    }

    if !explanation.lost.is_empty() {
        let lost = &explanation.lost;
        writeln!(
            out,
            "<h2>Lost nodes</h2>\n<p>{} node{} without {} daemon pod: the DaemonSet controller deleted it when the node \
             stopped qualifying, and the DaemonSet's status counts {} as fine. The reason is the one the pod had.</p>",
            lost.len(),
            plural(lost.len()),
            if lost.len() == 1 { "its" } else { "their" },
            if lost.len() == 1 { "it" } else { "them" },
        )?;
        out.push_str(
            "<table id=\"lost\"><thead><tr><th>Namespace</th><th>DaemonSet</th><th>Node</th><th>Reason</th>\
             <th>Key</th><th>Changed by</th><th>Since</th><th>Suggested fix</th></tr></thead><tbody>\n",
        );
        for row in lost {
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>\
                 <td>{}</td><td title=\"{}\">{} ago</td><td class=\"fix\">{}</td></tr>",
                Escaped(&row.namespace),
                Escaped(&row.daemonset),
                Escaped(&row.node),
                Escaped(&row.reason),
                Escaped(&row.key),
                Escaped(&row.manager),
                Escaped(&row.since),
                human_age(row.age_seconds),
                Escaped(&row.fix),
            )?;
        }
        out.push_str("</tbody></table>\n");
    }

    if !explanation.ineligible.is_empty() {
        out.push_str(
            "<h2>Nodes each DaemonSet skips</h2>\n<p>Why desired is less than the node count. \
             These nodes are not misscheduled; the DaemonSet does not want them.</p>\n\
             <table id=\"ineligible\"><thead><tr><th>Namespace</th><th>DaemonSet</th><th>Reason</th>\
             <th>Key</th><th>Nodes</th></tr></thead><tbody>\n",
        );
        for row in &explanation.ineligible {
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                Escaped(&row.namespace),
                Escaped(&row.daemonset),
                Escaped(&row.reason),
                Escaped(&row.key),
                row.nodes,
            )?;
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</body></html>\n");
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Text made safe for HTML element content and quoted attribute values.
struct Escaped<'a>(&'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::explain::{IneligibleRow, LostRow, PodRow};

    fn row(key: &str) -> PodRow {
        PodRow {
            namespace: "kube-system".into(),
            daemonset: "agent".into(),
            pod: "agent-x".into(),
            node: "n1".into(),
            reason: "label_drift".into(),
            key: key.into(),
            manager: "kubectl-label".into(),
            since: "2026-11-22T10:00:00Z".into(),
            age_seconds: 300,
            fix: "restore it".into(),
        }
    }

    const READY: PageStatus<'static> = PageStatus { waiting: &[], namespace: None, daemonset: None };

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(Escaped(r#"a<b>&"c'd"#).to_string(), "a&lt;b&gt;&amp;&quot;c&#39;d");
        assert_eq!(Escaped("plain").to_string(), "plain");
        assert_eq!(Escaped("").to_string(), "");
        assert_eq!(Escaped("ünïcode<").to_string(), "ünïcode&lt;");
    }

    #[test]
    fn cluster_text_cannot_inject_markup() {
        let explanation =
            Explanation { misscheduled: vec![row("<script>alert(1)</script>")], ..Explanation::default() };
        let page = render_page(&explanation, &READY);
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    #[test]
    fn lists_pods_ineligible_nodes_and_links() {
        let explanation = Explanation {
            misscheduled: vec![row("pool")],
            lost: vec![LostRow {
                namespace: "kube-system".into(),
                daemonset: "gpu-agent".into(),
                node: "n2".into(),
                reason: "nfd_change".into(),
                key: "feature.node.kubernetes.io/pci-10de.present".into(),
                manager: "nfd-master".into(),
                since: "2026-11-22T10:00:00Z".into(),
                age_seconds: 7200,
                fix: "check NFD on n2".into(),
            }],
            ineligible: vec![IneligibleRow {
                namespace: "kube-system".into(),
                daemonset: "agent".into(),
                reason: "node_selector_mismatch".into(),
                key: "pool".into(),
                nodes: 7,
            }],
        };
        let page = render_page(&explanation, &READY);
        for text in [
            "1 misscheduled daemon pod.",
            "agent-x",
            "label_drift",
            "kubectl-label",
            "5m ago",
            "restore it",
            "<td>7</td>",
            "<h2>Lost nodes</h2>",
            "<td>n2</td><td>nfd_change</td>",
            "<td>nfd-master</td><td title=\"2026-11-22T10:00:00Z\">2h ago</td><td class=\"fix\">check NFD on n2</td>",
        ] {
            assert!(page.contains(text), "missing {text:?}");
        }
        for link in ["href=\"/metrics\"", "href=\"/explain\""] {
            assert!(page.contains(link), "missing {link}");
        }
        assert!(!page.contains("Not ready"));
    }

    #[test]
    fn says_when_nothing_is_misscheduled_or_not_ready_or_filtered() {
        let status = PageStatus { waiting: &["pods"], namespace: Some("a&b"), daemonset: None };
        let page = render_page(&Explanation::default(), &status);
        assert!(page.contains("No misscheduled daemon pods."));
        assert!(page.contains("Not ready: pods"));
        assert!(page.contains("Showing only namespace a&amp;b."));
        assert!(!page.contains("<table"));
    }
}
