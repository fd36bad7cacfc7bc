//! Which format and encoding a scraper gets, from its `Accept` and `Accept-Encoding` headers
//! (RFC 9110 §12.5: comma-separated entries, each optionally weighted with `;q=`).
//!
//! Prometheus sends `application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,
//! */*;q=0.1` and `Accept-Encoding: gzip`; curl sends `*/*` and no encoding.

use crate::report::format::Format;

/// The format to serve: OpenMetrics when the client names it (a version we write) with a
/// weight at least that of plain text; otherwise the 0.0.4 text format, also for `*/*`,
/// for types we do not serve (a 406 would only break the scrape) and when there is no header.
pub fn format(accept: Option<&str>) -> Format {
    let Some(accept) = accept else { return Format::Text };
    let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
    for (media_type, params) in entries(accept) {
        let version = params.iter().find(|(k, _)| k.eq_ignore_ascii_case("version")).map(|(_, v)| *v);
        let weight = weight(&params);
        if media_type.eq_ignore_ascii_case("application/openmetrics-text") {
            if version.is_none_or(|v| v == "1.0.0" || v == "0.0.1") {
                openmetrics = openmetrics.max(weight);
            }
        } else if ["text/plain", "text/*", "*/*"].iter().any(|t| media_type.eq_ignore_ascii_case(t)) {
            text = text.max(weight);
        }
    }
    if openmetrics > 0.0 && openmetrics >= text { Format::OpenMetrics } else { Format::Text }
}

/// Whether the client takes a gzip body: `gzip` (or `*`, when gzip is not named) with a
/// non-zero weight.
pub fn gzip(accept_encoding: Option<&str>) -> bool {
    let Some(accept_encoding) = accept_encoding else { return false };
    let mut named = None;
    let mut any = None;
    for (coding, params) in entries(accept_encoding) {
        let weight = weight(&params);
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            named = Some(named.unwrap_or(0.0_f32).max(weight));
        } else if coding == "*" {
            any = Some(weight);
        }
    }
    named.or(any).is_some_and(|weight| weight > 0.0)
}

type Entry<'a> = (&'a str, Vec<(&'a str, &'a str)>);

/// `a;k=v;q=0.5, b` as `[("a", [("k", "v"), ("q", "0.5")]), ("b", [])]`, trimmed, empty entries skipped.
fn entries(header: &str) -> impl Iterator<Item = Entry<'_>> {
    header.split(',').filter_map(|entry| {
        let mut parts = entry.split(';').map(str::trim);
        let value = parts.next().filter(|v| !v.is_empty())?;
        let params =
            parts.filter_map(|p| p.split_once('=')).map(|(k, v)| (k.trim(), v.trim().trim_matches('"'))).collect();
        Some((value, params))
    })
}

/// The `q` weight, 1 when absent; a malformed weight counts as 0 (not acceptable), never as a panic.
fn weight(params: &[(&str, &str)]) -> f32 {
    match params.iter().find(|(k, _)| k.eq_ignore_ascii_case("q")) {
        None => 1.0,
        Some((_, q)) => q.parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMETHEUS: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn formats() {
        let cases: &[(Option<&str>, Format)] = &[
            (Some(PROMETHEUS), Format::OpenMetrics),
            (None, Format::Text),
            (Some("*/*"), Format::Text),
            (Some(""), Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (Some("Application/OpenMetrics-Text; version=\"1.0.0\""), Format::OpenMetrics),
            (Some("application/openmetrics-text;version=0.0.1"), Format::OpenMetrics),
            // A version we do not write is not a request for what we write.
            (Some("application/openmetrics-text;version=2.0.0"), Format::Text),
            (Some("application/openmetrics-text;q=0"), Format::Text),
            (Some("application/openmetrics-text;q=0.4, text/plain;q=0.5"), Format::Text),
            (Some("text/plain;q=0.5, application/openmetrics-text;q=0.5"), Format::OpenMetrics),
            (Some("application/json"), Format::Text),
            (Some("application/openmetrics-text;q=bogus, */*"), Format::Text),
            (Some(",,;;=,application/openmetrics-text;q=0.9;;"), Format::OpenMetrics),
        ];
        for (accept, expected) in cases {
            assert_eq!(format(*accept), *expected, "Accept: {accept:?}");
        }
    }

    #[test]
    fn encodings() {
        let cases: &[(Option<&str>, bool)] = &[
            (Some("gzip"), true),
            (Some("gzip, deflate, br"), true),
            (Some("br;q=1.0, gzip;q=0.8, *;q=0.1"), true),
            (Some("GZIP"), true),
            (Some("x-gzip"), true),
            (None, false),
            (Some(""), false),
            (Some("identity"), false),
            (Some("deflate, br"), false),
            (Some("gzip;q=0"), false),
            (Some("*"), true),
            (Some("*;q=0"), false),
            (Some("gzip;q=0, *"), false),
            (Some("gzip;q=nonsense"), false),
        ];
        for (accept_encoding, expected) in cases {
            assert_eq!(gzip(*accept_encoding), *expected, "Accept-Encoding: {accept_encoding:?}");
        }
    }
}
