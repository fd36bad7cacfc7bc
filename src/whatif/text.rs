//! The answer as `-o` says: tables that name what was checked, or the object as JSON or YAML.

use super::{Answer, Row};
use crate::report::text::{Output, OutputError, table};

pub fn print(answer: &Answer, output: Output) -> Result<String, OutputError> {
    Ok(match output {
        Output::Table => render(answer, false),
        Output::Wide => render(answer, true),
        Output::Json => serde_json::to_string_pretty(answer)? + "\n",
        Output::Yaml => serde_saphyr::to_string(answer)?,
    })
}

fn render(answer: &Answer, wide: bool) -> String {
    let looked = &answer.looked_at;
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let daemonsets = plural(looked.daemonsets, "DaemonSet", "DaemonSets");
    let scope = match (&looked.daemonset, &looked.namespace) {
        (Some(ds), Some(ns)) => format!("{daemonsets} ({ns}/{ds})"),
        (Some(ds), None) => format!("{daemonsets} named {ds} in all namespaces"),
        (None, Some(ns)) => format!("{daemonsets} in namespace {ns}"),
        (None, None) => format!("{daemonsets} in all namespaces"),
    };
    let nodes = plural(looked.nodes, "node", "nodes");
    let mut out = format!("What-if {}: {scope} on {nodes}, from {}.\n", looked.change, looked.source);
    if looked.daemonsets == 0 || looked.nodes == 0 {
        out.push_str(
            "Nothing to check: no DaemonSet or no node matched; widen -n, --daemonset or the node selection.\n",
        );
        return out;
    }
    if answer.changes.is_empty() {
        out.push_str("No daemon pod would be deleted, misscheduled, recovered or created.\n");
    } else {
        let row = |r: &Row| {
            [
                r.namespace.clone(),
                r.daemonset.clone(),
                r.node.clone(),
                if r.pod.is_empty() { "-".to_owned() } else { r.pod.clone() },
                r.effect.as_str().to_owned(),
                r.reason.clone(),
                r.key.clone(),
                r.effect.meaning().to_owned(),
            ]
        };
        let header = ["NAMESPACE", "DAEMONSET", "NODE", "POD", "EFFECT", "REASON", "KEY", "WHAT THE CONTROLLER DOES"];
        out.push('\n');
        if wide {
            table(&mut out, header, &answer.changes.iter().map(row).collect::<Vec<_>>());
        } else {
            let rows: Vec<[String; 7]> = answer
                .changes
                .iter()
                .map(|r| {
                    let [a, b, c, d, e, f, g, _] = row(r);
                    [a, b, c, d, e, f, g]
                })
                .collect();
            let [a, b, c, d, e, f, g, _] = header;
            table(&mut out, [a, b, c, d, e, f, g], &rows);
        }
    }
    if !answer.terminating.is_empty() {
        out.push_str("\nAlready terminating (no change: the controller acts there once they are gone):\n");
        let rows: Vec<[String; 4]> = answer
            .terminating
            .iter()
            .map(|t| [t.namespace.clone(), t.daemonset.clone(), t.node.clone(), t.pod.clone()])
            .collect();
        table(&mut out, ["NAMESPACE", "DAEMONSET", "NODE", "POD"], &rows);
    }
    if !answer.desired.is_empty() {
        out.push_str("\nDesired (nodes each DaemonSet should run on):\n");
        let rows: Vec<[String; 3]> = answer
            .desired
            .iter()
            .map(|d| [d.namespace.clone(), d.daemonset.clone(), format!("{} -> {}", d.before, d.after)])
            .collect();
        table(&mut out, ["NAMESPACE", "DAEMONSET", "DESIRED"], &rows);
    }
    out
}
