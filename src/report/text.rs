//! The explanation as `explain -o` and `kubectl misschedule -o` print it: aligned tables,
//! JSON or YAML.

use std::fmt::Write as _;

use crate::report::explain::{Explanation, LostRow, PodRow, UncoveredRow};
use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

pub fn human_age(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// How `explain -o` and `kubectl misschedule -o` print an explanation: one meaning each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The rows: the misscheduled pods (what-if: the pairs the change moves).
    #[default]
    Table,
    /// More: the suggested fix and the nodes each DaemonSet skips (what-if: what the
    /// controller does).
    Wide,
    /// The whole answer as JSON: for an explanation, the object `GET /explain` serves;
    /// for what-if, the change and its effects (docs/what-if.md).
    Json,
    /// The same as YAML.
    Yaml,
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// The explanation as `output` says.
pub fn print(explanation: &Explanation, output: Output) -> Result<String, OutputError> {
    Ok(match output {
        Output::Table => render(explanation, false),
        Output::Wide => render(explanation, true),
        Output::Json => serde_json::to_string_pretty(explanation)? + "\n",
        Output::Yaml => serde_saphyr::to_string(explanation)?,
    })
}

/// The MANAGER cell: who made the change, `<unknown>` when no record names one, and `-`
/// for the reasons where the node did not change.
pub fn manager_cell(reason: &str, manager: &str) -> String {
    match (Reason::from_name(reason).is_none_or(Reason::node_changed), manager) {
        (false, _) => "-".to_owned(),
        (true, "") => UNKNOWN.to_owned(),
        (true, manager) => manager.to_owned(),
    }
}

const UNKNOWN: &str = "<unknown>";

/// Why a manager is unknown, and who would know: said once under the table.
fn unknown_manager_note(source: &str) -> String {
    let why = if source.starts_with("snapshot") {
        "the snapshot holds no managedFields entry naming who made the change: record it with \
         --show-managed-fields (kubectl drops them otherwise); a label removed before it was taken leaves none either"
    } else if source.starts_with("exporter") {
        "no managedFields entry names who made the change: a label or taint removed before the exporter \
         started leaves none; a replica that was running then may know"
    } else {
        "no managedFields entry names who made the change: a label or taint removed before this command read \
         the node leaves none; a running exporter that watched it go knows (--from-exporter NAMESPACE/SERVICE)"
    };
    format!("\nMANAGER {UNKNOWN}: {why}.\n")
}

/// Aligned text tables; `wide` adds the suggested fix and the nodes each DaemonSet skips.
fn render(explanation: &Explanation, wide: bool) -> String {
    let mut out = String::new();
    let source = explanation.looked_at.as_ref().map_or("", |l| l.source.as_str());
    if explanation.misscheduled.is_empty() {
        out.push_str(&explanation.nothing_misscheduled());
    } else {
        let row = |r: &PodRow| {
            [
                r.namespace.clone(),
                r.daemonset.clone(),
                r.pod.clone(),
                r.node.clone(),
                r.reason.clone(),
                r.key.clone(),
                manager_cell(&r.reason, &r.manager),
                human_age(r.age_seconds),
            ]
        };
        let header = ["NAMESPACE", "DAEMONSET", "POD", "NODE", "REASON", "KEY", "MANAGER", "AGE"];
        if wide {
            let rows: Vec<[String; 9]> = explanation
                .misscheduled
                .iter()
                .map(|r| {
                    let [a, b, c, d, e, f, g, h] = row(r);
                    [a, b, c, d, e, f, g, h, r.fix.clone()]
                })
                .collect();
            let [a, b, c, d, e, f, g, h] = header;
            table(&mut out, [a, b, c, d, e, f, g, h, "SUGGESTED FIX"], &rows);
        } else {
            let rows: Vec<[String; 8]> = explanation.misscheduled.iter().map(row).collect();
            table(&mut out, header, &rows);
        }
    }
    if !explanation.lost.is_empty() {
        let since = explanation.looked_at.as_ref().and_then(|l| l.watching_since.as_deref());
        let since = since.map(|t| format!(", seen since {t}")).unwrap_or_default();
        out.push_str(&format!(
            "\nLost nodes (the controller deleted the daemon pod; the DaemonSet no longer covers them{since}):\n"
        ));
        let row = |r: &LostRow| {
            [
                r.namespace.clone(),
                r.daemonset.clone(),
                r.node.clone(),
                r.reason.clone(),
                r.key.clone(),
                manager_cell(&r.reason, &r.manager),
                human_age(r.age_seconds),
                r.fix.clone(),
            ]
        };
        let header = ["NAMESPACE", "DAEMONSET", "NODE", "REASON", "KEY", "MANAGER", "AGE", "SUGGESTED FIX"];
        table_with_fix(&mut out, header, explanation.lost.iter().map(row).collect(), wide);
    }
    uncovered_tables(&mut out, &explanation.uncovered, wide);
    if wide && !explanation.ineligible.is_empty() {
        out.push_str("\nNodes each DaemonSet skips (why desired < node count):\n");
        let rows: Vec<[String; 5]> = explanation
            .ineligible
            .iter()
            .map(|r| [r.namespace.clone(), r.daemonset.clone(), r.reason.clone(), r.key.clone(), r.nodes.to_string()])
            .collect();
        table(&mut out, ["NAMESPACE", "DAEMONSET", "REASON", "KEY", "NODES"], &rows);
    }
    if let Some(note) = explanation.looked_at.as_ref().and_then(|l| l.lost_unknown()) {
        out.push_str(&format!("\n{note}\n"));
    }
    if explanation.has_unknown_manager() {
        out.push_str(&unknown_manager_note(source));
    }
    for warning in explanation.looked_at.iter().flat_map(|l| &l.warnings) {
        out.push_str(&format!("\nWarning: {warning}\n"));
    }
    out
}

/// "Nodes without an available pod": those that need action, then the expected ones (pods
/// on their way), which a plain table only counts.
fn uncovered_tables(out: &mut String, rows: &[UncoveredRow], wide: bool) {
    let expected = |r: &&UncoveredRow| Uncovered::from_name(&r.reason).is_some_and(Uncovered::expected);
    let (starting, action): (Vec<&UncoveredRow>, Vec<&UncoveredRow>) = rows.iter().partition(expected);
    let cells = |r: &UncoveredRow| {
        let pod = if r.pod.is_empty() { "<none>".to_owned() } else { r.pod.clone() };
        [
            r.namespace.clone(),
            r.daemonset.clone(),
            r.node.clone(),
            pod,
            r.reason.clone(),
            r.detail.clone(),
            human_age(r.age_seconds),
            r.fix.clone(),
        ]
    };
    let header = ["NAMESPACE", "DAEMONSET", "NODE", "POD", "REASON", "DETAIL", "AGE", "SUGGESTED FIX"];
    let print = |out: &mut String, rows: &[&UncoveredRow]| {
        table_with_fix(out, header, rows.iter().map(|r| cells(r)).collect(), wide);
    };
    if !action.is_empty() {
        out.push_str("\nNodes without an available pod, needing action:\n");
        print(out, &action);
    }
    if !starting.is_empty() && wide {
        out.push_str("\nNodes without an available pod yet (expected: pods on their way):\n");
        print(out, &starting);
    } else if !starting.is_empty() {
        let nodes = if starting.len() == 1 { "1 node".to_owned() } else { format!("{} nodes", starting.len()) };
        out.push_str(&format!(
            "\n{nodes} without an available pod yet: pods on their way (expected; -o wide lists them).\n"
        ));
    }
}

/// A table whose last column is the suggested fix, shown only with `-o wide`.
fn table_with_fix(out: &mut String, header: [&str; 8], rows: Vec<[String; 8]>, wide: bool) {
    if wide {
        table(out, header, &rows);
        return;
    }
    let narrow: Vec<[String; 7]> = rows.into_iter().map(|[a, b, c, d, e, f, g, _]| [a, b, c, d, e, f, g]).collect();
    let [a, b, c, d, e, f, g, _] = header;
    table(out, [a, b, c, d, e, f, g], &narrow);
}

/// An aligned text table, as kubectl prints one: two spaces between columns.
pub fn table<const N: usize>(out: &mut String, header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 == N {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::explain::tests::{lost_row, of, row};
    use crate::report::scope::LookedAt;

    #[test]
    fn an_unknown_manager_is_said_unknown_with_who_would_know() {
        let removed = PodRow { reason: "label_drift".into(), manager: String::new(), ..row("a", 5) };
        let mut answer = of(vec![removed]);
        answer.looked_at = Some(LookedAt { source: "cluster https://k8s".into(), ..LookedAt::default() });
        let table = print(&answer, Output::Table).unwrap();
        assert!(table.contains("label_drift  dedicated  <unknown>"), "{table}");
        assert!(table.contains("\nMANAGER <unknown>: no managedFields entry names who made the change"), "{table}");
        assert!(table.contains("(--from-exporter NAMESPACE/SERVICE)"), "{table}");
        answer.looked_at = Some(LookedAt { source: "snapshot s.json".into(), ..LookedAt::default() });
        assert!(print(&answer, Output::Table).unwrap().contains("record it with --show-managed-fields"));
        // Where the node did not change, there is no manager to know: a dash, no note.
        let changed = PodRow { reason: "daemonset_changed".into(), manager: String::new(), ..row("a", 5) };
        let table = print(&of(vec![changed]), Output::Table).unwrap();
        assert!(table.contains("daemonset_changed  dedicated  -  ") && !table.contains("MANAGER <unknown>"), "{table}");
        // JSON keeps the contract: an empty string.
        assert!(
            print(&of(vec![PodRow { manager: String::new(), ..row("a", 5) }]), Output::Json)
                .unwrap()
                .contains("\"manager\": \"\"")
        );
    }

    #[test]
    fn lost_nodes_have_their_own_section() {
        let with_loss = Explanation { lost: vec![lost_row(5)], ..of(vec![row("a", 5)]) };
        let table = print(&with_loss, Output::Table).unwrap();
        assert!(table.contains("\nLost nodes (the controller deleted the daemon pod"), "{table}");
        assert!(table.contains("NODE  REASON      KEY"), "{table}");
        assert!(
            table.contains("n2    nfd_change  feature.node.kubernetes.io/pci-10de.present  nfd-master  5s"),
            "{table}"
        );
        assert!(!table.contains("check NFD"), "the fix is for -o wide: {table}");
        assert!(print(&with_loss, Output::Wide).unwrap().contains("nfd-master  5s   check NFD"));
        assert!(!print(&of(vec![row("a", 5)]), Output::Table).unwrap().contains("Lost nodes"));
        let json = print(&with_loss, Output::Json).unwrap();
        assert!(json.contains("\"lost\": [") && json.contains("\"fix\": \"check NFD\""), "{json}");
    }

    #[test]
    fn no_misscheduled_pod_is_no_all_clear_while_nodes_are_lost() {
        let looked_at =
            LookedAt { source: "cluster https://k8s".into(), daemonsets: 2, nodes: 3, ..LookedAt::default() };
        let mut answer = Explanation { looked_at: Some(looked_at), ..of(Vec::new()) };
        let quiet = print(&answer, Output::Table).unwrap();
        assert!(quiet.starts_with("No misscheduled daemon pods") && !quiet.contains("lost"), "{quiet}");
        answer.lost = vec![lost_row(5)];
        let table = print(&answer, Output::Table).unwrap();
        assert!(
            table.starts_with(
                "No misscheduled daemon pods in any namespace: 2 DaemonSets on 3 nodes checked \
                 (cluster https://k8s). But a DaemonSet lost 1 node: see Lost nodes below.\n"
            ),
            "{table}"
        );
        answer.lost.push(lost_row(7));
        assert!(
            print(&answer, Output::Table)
                .unwrap()
                .contains(" But the DaemonSets lost 2 nodes: see Lost nodes below.\n")
        );
    }

    #[test]
    fn an_answer_read_once_says_it_cannot_know_lost_nodes() {
        let looked_at =
            LookedAt { source: "cluster https://k8s".into(), daemonsets: 2, nodes: 3, ..LookedAt::default() };
        let watched = Explanation { looked_at: Some(looked_at.clone()), ..of(vec![row("a", 5)]) };
        assert!(!print(&watched, Output::Wide).unwrap().contains("Lost nodes"), "a watch saw pods go");
        let once = LookedAt { read_once: true, ..looked_at };
        for answer in [of(vec![row("a", 5)]), of(Vec::new())] {
            let answer = Explanation { looked_at: Some(once.clone()), ..answer };
            let table = print(&answer, Output::Table).unwrap();
            assert!(table.contains("\n\nLost nodes: unknown to one look at the cluster, where a node"), "{table}");
            assert!(table.contains("(kubectl misschedule --from-exporter NAMESPACE/SERVICE).\n"), "{table}");
            // JSON keeps its shape: `source` says it was read once.
            let json = print(&answer, Output::Json).unwrap();
            assert!(!json.contains("read_once") && !json.contains("unknown to"), "{json}");
        }
    }
}
