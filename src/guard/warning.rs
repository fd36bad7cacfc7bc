//! The guard's words: one warning line per kind of effect, and the refusal. kubectl prints
//! each warning as `Warning: ...`; the API server keeps 256 runes of each and 4 KiB in all
//! (`k8s.io/apiserver/pkg/endpoints/filters/warning.go`), so each line names pods until it
//! is full and counts the rest.

use crate::rules::admission::{BYPASS_ANNOTATION, DENY, GUARD_ANNOTATION};
use crate::whatif::{Effect, Row};

/// Runes the API server keeps of one warning.
pub const MAX_WARNING_CHARS: usize = 256;
/// Every line starts so, so that a reader of many warnings knows whose it is.
pub const PREFIX: &str = "misschedule: ";

/// One line per effect the rows have, in the order of harm: at most four, each within
/// [`MAX_WARNING_CHARS`].
pub fn effect_lines(rows: &[Row]) -> Vec<String> {
    [Effect::Delete, Effect::Misschedule, Effect::Recover, Effect::Create]
        .into_iter()
        .filter_map(|effect| {
            let of: Vec<&Row> = rows.iter().filter(|r| r.effect == effect).collect();
            (!of.is_empty()).then(|| effect_line(effect, &of))
        })
        .collect()
}

fn effect_line(effect: Effect, rows: &[&Row]) -> String {
    let n = rows.len();
    let pods = if n == 1 { "daemon pod" } else { "daemon pods" };
    let head = match effect {
        Effect::Delete => format!("this change deletes {n} {pods}"),
        Effect::Misschedule => format!("this change leaves {n} {pods} running where they should not (misscheduled)"),
        Effect::Recover => format!("this change makes {n} misscheduled {pods} count as scheduled again"),
        Effect::Create => format!("this change makes the DaemonSet controller create {n} {pods}"),
    };
    listed(&format!("{PREFIX}{head}: "), rows.iter().map(|r| item(r)))
}

/// `namespace/daemonset on node (reason key)`.
fn item(row: &Row) -> String {
    let why = [row.reason.as_str(), row.key.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>();
    let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(" ")) };
    format!("{}/{} on {}{why}", row.namespace, row.daemonset, row.node)
}

/// `head` and as many `items` as fit in one warning, then how many more there are.
fn listed(head: &str, items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut line = head.to_owned();
    for (shown, item) in items.enumerate() {
        // The first item goes in whole, cut with the line if it must be.
        if shown > 0 {
            let after = total - shown - 1;
            let reserve = if after == 0 { 0 } else { format!(", and {after} more").len() };
            if chars(&line) + 2 + chars(&item) + reserve > MAX_WARNING_CHARS {
                line.push_str(&format!(", and {} more", total - shown));
                break;
            }
            line.push_str(", ");
        }
        line.push_str(&item);
    }
    truncate(line)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Cut to the limit; only a name longer than a whole warning gets here.
fn truncate(mut line: String) -> String {
    if let Some((at, _)) = line.char_indices().nth(MAX_WARNING_CHARS) {
        line.truncate(at);
    }
    line
}

/// How to go ahead anyway with a refused change.
pub enum Bypass {
    /// A node: annotate it first; the change itself is a label or taint command.
    Node(String),
    /// A DaemonSet: the annotation goes in the same change.
    DaemonSet,
}

/// The refusal: which protected DaemonSets lose what, and how to go ahead anyway.
pub fn refusal(disrupted: &[&Row], bypass: &Bypass) -> String {
    let mut daemonsets: Vec<String> = disrupted.iter().map(|r| format!("{}/{}", r.namespace, r.daemonset)).collect();
    daemonsets.dedup();
    let (which, sets, their) =
        if daemonsets.len() == 1 { ("DaemonSet", "sets", "its") } else { ("DaemonSets", "set", "their") };
    let what = listed("", disrupted.iter().map(|r| format!("{} {}", r.effect.as_str(), item(r))));
    let how = match bypass {
        Bypass::Node(name) => format!(
            "annotate the node first, saying why: kubectl annotate node {name} {BYPASS_ANNOTATION}='<why>' (and remove it when done)"
        ),
        Bypass::DaemonSet => {
            format!("add the annotation {BYPASS_ANNOTATION}: '<why>' to the DaemonSet in this same change")
        }
    };
    format!(
        "{which} {} {sets} {GUARD_ANNOTATION}: {DENY}, and this change would disrupt {their} pods: {what}. To go ahead anyway, {how}.",
        daemonsets.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ds: &str, node: &str, effect: Effect) -> Row {
        Row {
            namespace: "monitoring".into(),
            daemonset: ds.into(),
            node: node.into(),
            pod: format!("{ds}-{node}"),
            effect,
            reason: "label_drift".into(),
            key: "nvidia.com/gpu.present".into(),
        }
    }

    #[test]
    fn one_line_per_effect_in_the_order_of_harm() {
        let rows =
            [row("a", "n1", Effect::Create), row("gpu-agent", "gpu-7", Effect::Delete), row("b", "n2", Effect::Delete)];
        assert_eq!(
            effect_lines(&rows),
            [
                "misschedule: this change deletes 2 daemon pods: monitoring/gpu-agent on gpu-7 (label_drift nvidia.com/gpu.present), monitoring/b on n2 (label_drift nvidia.com/gpu.present)",
                "misschedule: this change makes the DaemonSet controller create 1 daemon pod: monitoring/a on n1 (label_drift nvidia.com/gpu.present)",
            ]
        );
        assert!(effect_lines(&[]).is_empty());
    }

    #[test]
    fn a_long_list_is_counted_within_the_limit() {
        let rows: Vec<Row> = (0..500).map(|i| row(&format!("ds-{i}"), &format!("node-{i}"), Effect::Delete)).collect();
        let lines = effect_lines(&rows);
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert!(line.chars().count() <= MAX_WARNING_CHARS, "{line}");
        assert!(
            line.starts_with("misschedule: this change deletes 500 daemon pods: monitoring/ds-0 on node-0"),
            "{line}"
        );
        let shown = line.matches(" on node-").count();
        assert!(line.ends_with(&format!(", and {} more", 500 - shown)), "{line}");
        // A name longer than a warning is cut, not sent whole.
        let huge = row(&"x".repeat(400), "n1", Effect::Delete);
        let line = &effect_lines(&[huge])[0];
        assert!(line.chars().count() <= MAX_WARNING_CHARS, "{line}");
        assert_eq!(line.chars().count(), MAX_WARNING_CHARS, "{line}");
    }

    #[test]
    fn the_refusal_names_the_protection_and_the_way_round_it() {
        let r = row("gpu-agent", "gpu-7", Effect::Delete);
        assert_eq!(
            refusal(&[&r], &Bypass::Node("gpu-7".into())),
            "DaemonSet monitoring/gpu-agent sets misschedule.io/guard: deny, and this change would disrupt its pods: \
             delete monitoring/gpu-agent on gpu-7 (label_drift nvidia.com/gpu.present). To go ahead anyway, annotate \
             the node first, saying why: kubectl annotate node gpu-7 misschedule.io/guard-bypass='<why>' (and remove it when done)."
        );
        let text = refusal(&[&r], &Bypass::DaemonSet);
        assert!(
            text.ends_with(
                "add the annotation misschedule.io/guard-bypass: '<why>' to the DaemonSet in this same change."
            ),
            "{text}"
        );
    }
}
