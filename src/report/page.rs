//! The landing page (`GET /`): the explanation as one self-contained HTML page, for an
//! operator who port-forwards to the exporter. No script and no external asset, so it
//! renders in any browser and behind any proxy. Everything from the cluster is escaped.

use std::fmt::{self, Write as _};

use crate::report::explain::{Explanation, LostRow, PodRow, UncoveredRow};
use crate::report::html::{Escaped, ReasonLink, table};
use crate::report::scope::{LookedAt, plural};
use crate::report::text::{human_age, manager_cell};
use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

/// How often the page reloads itself.
pub const REFRESH_SECONDS: u32 = 30;

/// What the page says about the exporter itself.
pub struct PageStatus<'a> {
    /// Each resource not yet synced or whose watch is failing, and why; empty when ready.
    pub problems: &'a [String],
    /// Every resource has listed once: before that there is no answer to show.
    pub synced: bool,
    /// The query names what is not there (a DaemonSet, a namespace not watched).
    pub error: Option<&'a str>,
    /// The query string of the filter in effect, for the links to /explain.
    pub query: &'a str,
}

/// Inlined into the page, which loads nothing.
const STYLE: &str = include_str!("page.css");

pub fn render_page(explanation: &Explanation, status: &PageStatus<'_>) -> String {
    let mut out = String::with_capacity(4096 + explanation.misscheduled.len() * 512);
    // Writing to a String cannot fail.
    let _ = write_page(&mut out, explanation, status);
    out
}

fn write_page(out: &mut String, explanation: &Explanation, status: &PageStatus<'_>) -> fmt::Result {
    // Relative links: the page works behind `kubectl proxy` and any path prefix.
    let query = if status.query.is_empty() { String::new() } else { format!("?{}", Escaped(status.query)) };
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>misschedule-exporter</title><style>{STYLE}</style></head><body>\n\
         <h1>Misscheduled daemon pods</h1>\n\
         <nav><a href=\"metrics\">metrics</a><a href=\"explain{query}\">explain (JSON)</a>\
         <a href=\"readyz\">readyz</a></nav>\n"
    )?;
    if let Some(looked_at) = &explanation.looked_at {
        writeln!(
            out,
            "<p class=\"meta\">As of <time>{}</time>, {}: {} on {}, from {}. Reloads every {REFRESH_SECONDS} s.</p>",
            Escaped(&looked_at.as_of),
            Escaped(&looked_at.scope()),
            plural(looked_at.daemonsets, "DaemonSet"),
            plural(looked_at.nodes, "node"),
            Escaped(&looked_at.source_line()),
        )?;
        if looked_at.namespace.is_some() || looked_at.daemonset.is_some() {
            out.push_str("<p>Showing only part of what was read. <a href=\"?\">Show all</a></p>\n");
        }
    }
    if let Some(error) = status.error {
        writeln!(out, "<p class=\"error\">{}. <a href=\"?\">Show all</a></p>", Escaped(error))?;
        return out.write_str("</body></html>\n");
    }
    if !status.synced {
        writeln!(
            out,
            "<p class=\"error\">No answer yet: the exporter has not read everything it needs.</p>\n<ul>{}</ul>",
            status.problems.iter().map(|p| format!("<li>{}</li>", Escaped(p))).collect::<String>()
        )?;
        return out.write_str("</body></html>\n");
    }
    if !status.problems.is_empty() {
        writeln!(
            out,
            "<p class=\"warn\">Not ready: what follows is the last known state and may be out of date.</p>\n<ul>{}</ul>",
            status.problems.iter().map(|p| format!("<li>{}</li>", Escaped(p))).collect::<String>()
        )?;
    }

    let (expected, action): (Vec<&PodRow>, Vec<&PodRow>) =
        explanation.misscheduled.iter().partition(|row| is_expected(&row.reason));
    let lost_unknown = explanation.looked_at.as_ref().and_then(LookedAt::lost_unknown);
    if explanation.misscheduled.is_empty() {
        // Green only when nothing is wrong and nothing went unseen.
        let clear = !explanation.needs_action() && lost_unknown.is_none() && status.problems.is_empty();
        let class = if clear { "ok" } else { "meta" };
        let text = explanation.nothing_misscheduled();
        writeln!(out, "<p class=\"{class}\">{}</p>", Escaped(text.trim_end()))?;
    }
    if !action.is_empty() {
        writeln!(out, "<h2 class=\"action\">Needs action: {}</h2>", plural(action.len(), "misscheduled daemon pod"))?;
        pod_table(out, "misscheduled", &action)?;
    }
    if !expected.is_empty() {
        writeln!(
            out,
            "<h2 class=\"expected\">Expected: {}</h2>\n<p class=\"meta\">A node draining away or a DaemonSet change \
             rolling out. Nothing to do unless it lasts.</p>",
            plural(expected.len(), "misscheduled daemon pod")
        )?;
        pod_table(out, "expected", &expected)?;
    }
    if !explanation.lost.is_empty() {
        lost_table(out, &explanation.lost)?;
    }
    if let Some(note) = lost_unknown {
        writeln!(out, "<p class=\"meta\">{}</p>", Escaped(&note))?;
    }
    if !explanation.uncovered.is_empty() {
        uncovered_table(out, &explanation.uncovered)?;
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

fn is_expected(reason: &str) -> bool {
    Reason::from_name(reason).is_some_and(Reason::expected)
}

const POD_COLUMNS: [&str; 9] =
    ["Namespace", "DaemonSet", "Pod", "Node", "Reason", "Key", "Changed by", "Since", "Suggested fix"];
const LOST_COLUMNS: [&str; 8] =
    ["Namespace", "DaemonSet", "Node", "Reason", "Key", "Changed by", "Since", "Suggested fix"];

fn pod_table(out: &mut String, id: &str, rows: &[&PodRow]) -> fmt::Result {
    let cells = rows.iter().map(|row| {
        let [namespace, daemonset, pod, node] =
            [&row.namespace, &row.daemonset, &row.pod, &row.node].map(|s| Escaped(s).to_string());
        let [reason, key, manager, since] = common(&row.reason, &row.key, &row.manager, &row.since, row.age_seconds);
        (false, vec![namespace, daemonset, pod, node, reason, key, manager, since, Escaped(&row.fix).to_string()])
    });
    table(out, id, &POD_COLUMNS, cells)
}

fn lost_table(out: &mut String, lost: &[LostRow]) -> fmt::Result {
    writeln!(
        out,
        "<h2 class=\"action\">Lost nodes</h2>\n<p>{} without {} daemon pod: the DaemonSet controller deleted it when the node \
         stopped qualifying, and the DaemonSet's status counts {} as fine. The reason is the one the pod had; \
         grey rows are expected.</p>",
        plural(lost.len(), "node"),
        if lost.len() == 1 { "its" } else { "their" },
        if lost.len() == 1 { "it" } else { "them" },
    )?;
    let (action, expected): (Vec<&LostRow>, Vec<&LostRow>) = lost.iter().partition(|row| !is_expected(&row.reason));
    let cells = action.into_iter().chain(expected).map(|row| {
        let [namespace, daemonset, node] = [&row.namespace, &row.daemonset, &row.node].map(|s| Escaped(s).to_string());
        let [reason, key, manager, since] = common(&row.reason, &row.key, &row.manager, &row.since, row.age_seconds);
        (
            is_expected(&row.reason),
            vec![namespace, daemonset, node, reason, key, manager, since, Escaped(&row.fix).to_string()],
        )
    });
    table(out, "lost", &LOST_COLUMNS, cells)
}

const UNCOVERED_COLUMNS: [&str; 8] =
    ["Namespace", "DaemonSet", "Node", "Pod", "Reason", "Detail", "Since", "Suggested fix"];

fn uncovered_table(out: &mut String, rows: &[UncoveredRow]) -> fmt::Result {
    let expected = |row: &&UncoveredRow| Uncovered::from_name(&row.reason).is_some_and(Uncovered::expected);
    let (starting, action): (Vec<&UncoveredRow>, Vec<&UncoveredRow>) = rows.iter().partition(expected);
    let class = if action.is_empty() { "expected" } else { "action" };
    writeln!(
        out,
        "<h2 class=\"{class}\">Nodes without an available pod</h2>\n<p>{} needing action, {} on {} way \
         (grey: expected). The DaemonSet should run on each; its pod there is missing, unplaced or not Ready.</p>",
        plural(action.len(), "node"),
        starting.len(),
        if starting.len() == 1 { "its" } else { "their" },
    )?;
    let cells = action.into_iter().chain(starting).map(|row| {
        let pod = if row.pod.is_empty() { "none" } else { &row.pod };
        let [namespace, daemonset, node, pod, detail] =
            [&*row.namespace, &row.daemonset, &row.node, pod, &row.detail].map(|s| Escaped(s).to_string());
        let reason = ReasonLink(&row.reason).to_string();
        let since = format!("<span title=\"{}\">{} ago</span>", Escaped(&row.since), human_age(row.age_seconds));
        (expected(&row), vec![namespace, daemonset, node, pod, reason, detail, since, Escaped(&row.fix).to_string()])
    });
    table(out, "uncovered", &UNCOVERED_COLUMNS, cells)
}

/// The reason (linked), key, manager and age cells both tables have.
fn common(reason: &str, key: &str, manager: &str, since: &str, age: i64) -> [String; 4] {
    [
        ReasonLink(reason).to_string(),
        format!("<code>{}</code>", Escaped(key)),
        Escaped(&manager_cell(reason, manager)).to_string(),
        format!("<span title=\"{}\">{} ago</span>", Escaped(since), human_age(age)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::explain::tests::lost_row;
    use crate::report::explain::{IneligibleRow, LostRow, PodRow};
    use crate::report::html::RUNBOOKS;

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

    const READY: PageStatus<'static> = PageStatus { problems: &[], synced: true, error: None, query: "" };

    fn looked_at(namespace: Option<&str>) -> LookedAt {
        LookedAt {
            source: "cluster https://k8s:6443".into(),
            namespace: namespace.map(Into::into),
            daemonset: None,
            daemonsets: 2,
            nodes: 5,
            misscheduled_elsewhere: None,
            as_of: "2026-11-25T03:00:00Z".into(),
            warnings: vec![],
            read_once: false,
            watching_since: Some("2026-11-25T02:00:00Z".into()),
        }
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
        let drain = PodRow {
            pod: "agent-y".into(),
            reason: "autoscaler_drain".into(),
            key: "ToBeDeletedByClusterAutoscaler".into(),
            manager: String::new(),
            ..row("pool")
        };
        let explanation = Explanation {
            looked_at: Some(looked_at(None)),
            misscheduled: vec![row("pool"), drain],
            lost: vec![LostRow {
                since: "2026-11-22T10:00:00Z".into(),
                fix: "check NFD on n2".into(),
                ..lost_row(7200)
            }],
            uncovered: vec![],
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
            "As of <time>2026-11-25T03:00:00Z</time>, in any namespace: 2 DaemonSets on 5 nodes, from cluster https://k8s:6443, watched since 2026-11-25T02:00:00Z.",
            "<meta http-equiv=\"refresh\" content=\"30\">",
            "<h2 class=\"action\">Needs action: 1 misscheduled daemon pod</h2>",
            "<h2 class=\"expected\">Expected: 1 misscheduled daemon pod</h2>",
            "agent-x",
            "<a href=\"https://github.com/misschedule-exporter/misschedule-exporter/blob/main/docs/runbooks.md#label_drift\">label_drift</a>",
            "autoscaler_drain</a><span class=\"tag\">expected</span>",
            "<td data-label=\"Changed by\">&lt;unknown&gt;</td>",
            "kubectl-label",
            "5m ago",
            "restore it",
            "<td>7</td>",
            "<h2 class=\"action\">Lost nodes</h2>",
            "<td data-label=\"Node\">n2</td><td data-label=\"Reason\"><a href=",
            ">nfd-master</td><td data-label=\"Since\" class=\"age\"><span title=\"2026-11-22T10:00:00Z\">2h ago</span></td><td data-label=\"Suggested fix\" class=\"fix\">check NFD on n2</td>",
        ] {
            assert!(page.contains(text), "missing {text:?}");
        }
        // Relative links: the page works behind kubectl proxy and a path prefix.
        for link in ["href=\"metrics\"", "href=\"explain\"", "href=\"readyz\""] {
            assert!(page.contains(link), "missing {link}");
        }
        assert!(!page.contains("href=\"/"), "no absolute link");
        let (action, expected) = page.split_once("id=\"expected\"").unwrap();
        assert!(action.contains("agent-x") && !action.contains("agent-y"));
        assert!(expected.contains("agent-y"));
        assert!(!page.contains("Not ready"));
    }

    #[test]
    fn every_reason_has_its_runbook_section() {
        let runbooks = include_str!("../../docs/runbooks.md");
        for reason in Reason::ALL {
            assert!(runbooks.contains(&format!("\n### `{reason}`\n")), "docs/runbooks.md has no section for {reason}");
        }
        let mixin = include_str!("../../mixin/config.libsonnet");
        assert!(mixin.contains(&format!("'{RUNBOOKS}#%s'")), "the page and the alerts link the same runbooks");
    }

    #[test]
    fn says_when_nothing_is_misscheduled_or_not_ready_or_filtered() {
        let quiet = Explanation { looked_at: Some(looked_at(Some("a&b"))), ..Explanation::default() };
        let page = render_page(&quiet, &READY);
        assert!(
            page.contains("No misscheduled daemon pods in namespace a&amp;b: 2 DaemonSets on 5 nodes checked"),
            "{page}"
        );
        assert!(page.contains("Showing only part of what was read. <a href=\"?\">Show all</a>"));
        assert!(!page.contains("<table"));
        assert!(page.contains("<p class=\"ok\">No misscheduled"), "green only when nothing is wrong");

        let lost = Explanation { looked_at: quiet.looked_at.clone(), lost: vec![lost_row(5)], ..Default::default() };
        let page = render_page(&lost, &READY);
        assert!(page.contains("<p class=\"meta\">No misscheduled daemon pods"), "lost nodes: no green line");
        assert!(page.contains(" But a DaemonSet lost 1 node: see Lost nodes below.</p>"), "{page}");

        // A snapshot cannot know lost nodes: said so, and no green line.
        let once = LookedAt { source: "snapshot s.json".into(), read_once: true, ..looked_at(None) };
        let page = render_page(&Explanation { looked_at: Some(once), ..Default::default() }, &READY);
        assert!(page.contains("<p class=\"meta\">No misscheduled") && !page.contains("class=\"ok\""), "{page}");
        assert!(page.contains("<p class=\"meta\">Lost nodes: unknown to a snapshot, where a node"), "{page}");

        let problems = ["pods: watch failing, serving the last list: HTTP 503".to_owned()];
        let failing = PageStatus { problems: &problems, ..READY };
        let page = render_page(&quiet, &failing);
        assert!(page.contains("Not ready: what follows is the last known state") && page.contains("<li>pods: watch"));
        // Before the first lists, no answer at all: never a green line.
        let unsynced = PageStatus { synced: false, ..failing };
        let page = render_page(&Explanation::default(), &unsynced);
        assert!(page.contains("No answer yet") && !page.contains("No misscheduled"), "{page}");

        let missing = PageStatus { error: Some("daemonsets.apps \"x\" not found"), ..READY };
        let page = render_page(&Explanation::default(), &missing);
        assert!(page.contains("class=\"error\">daemonsets.apps &quot;x&quot; not found."));
        assert!(!page.contains("No misscheduled"));
    }
}
