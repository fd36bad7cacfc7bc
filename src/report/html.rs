//! The HTML the landing page is made of: text escaped for element content and attribute
//! values, reasons linked to their runbooks, and tables that fold into cards on a narrow
//! window.

use std::fmt::{self, Display, Write as _};

use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;

/// Where each reason's runbook section is (`docs/runbooks.md`, one `###` per reason), as the
/// mixin's `runbookURLPattern` points its alerts.
pub const RUNBOOKS: &str = "https://github.com/misschedule-exporter/misschedule-exporter/blob/main/docs/runbooks.md";

/// A table whose cells carry their column's name, so that a narrow window shows each row
/// as a card of labelled lines instead of a table wider than the window.
pub fn table(
    out: &mut String,
    id: &str,
    columns: &[&str],
    rows: impl Iterator<Item = (bool, Vec<String>)>,
) -> fmt::Result {
    write!(out, "<table id=\"{id}\" class=\"rows\"><thead><tr>")?;
    columns.iter().try_for_each(|c| write!(out, "<th>{c}</th>"))?;
    out.push_str("</tr></thead><tbody>\n");
    for (expected, cells) in rows {
        out.push_str(if expected { "<tr class=\"expected\">" } else { "<tr>" });
        for (column, cell) in columns.iter().zip(cells) {
            let class = match *column {
                "Since" => " class=\"age\"",
                "Suggested fix" => " class=\"fix\"",
                "Key" => " class=\"key\"",
                _ => "",
            };
            write!(out, "<td data-label=\"{column}\"{class}>{cell}</td>")?;
        }
        out.push_str("</tr>\n");
    }
    out.write_str("</tbody></table>\n")
}

/// A reason, linked to its runbook section, tagged when it is expected.
pub struct ReasonLink<'a>(pub &'a str);

impl Display for ReasonLink<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A misscheduled or lost node's reason, or an uncovered node's: each has a section.
        let known = Reason::from_name(self.0)
            .map(|r| (r.as_str(), r.expected()))
            .or_else(|| Uncovered::from_name(self.0).map(|r| (r.as_str(), r.expected())));
        match known {
            Some((name, expected)) => {
                write!(f, "<a href=\"{RUNBOOKS}#{name}\">{name}</a>")?;
                if expected {
                    f.write_str("<span class=\"tag\">expected</span>")?;
                }
                Ok(())
            }
            None => Escaped(self.0).fmt(f),
        }
    }
}

/// Text made safe for HTML element content and quoted attribute values.
pub struct Escaped<'a>(pub &'a str);

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

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(Escaped(r#"a<b>&"c'd"#).to_string(), "a&lt;b&gt;&amp;&quot;c&#39;d");
        assert_eq!(Escaped("plain").to_string(), "plain");
        assert_eq!(Escaped("").to_string(), "");
        assert_eq!(Escaped("ünïcode<").to_string(), "ünïcode&lt;");
    }
}
