//! The two text formats `/metrics` speaks. prometheus-client writes OpenMetrics only; the
//! Prometheus text format 0.0.4 (what a scraper gets unless it asks for OpenMetrics) differs
//! from it, for what we expose, only in the lines rewritten here.

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// A Prometheus exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0, which Prometheus asks for first.
    OpenMetrics,
    /// The Prometheus text format 0.0.4: what curl, older scrapers and `*/*` get.
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// One gauge family from its rows, as a `Collector` writes what it reads at scrape time.
pub fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue + fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One counter family from its rows: `name` without `_total`, which the samples get.
pub fn counters<L: EncodeLabelSet, V: EncodeCounterValue + fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// OpenMetrics text (as prometheus-client writes it) in the 0.0.4 text format:
/// - a counter family `x` is named by its samples, `x_total`, in `# HELP` and `# TYPE`;
/// - `# UNIT` and `# EOF` do not exist in 0.0.4 and are dropped.
///
/// Everything else (gauges, histograms, label and value syntax) is written alike in both.
/// `# HELP` precedes `# TYPE`, so a HELP line waits for the TYPE that says whether to rename it.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let mut text = String::with_capacity(openmetrics.len() + 256);
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.split_inclusive('\n') {
        if line == "# EOF\n" || line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut text, help.take(), None);
            let name = rest.split([' ', '\n']).next().unwrap_or_default();
            help = Some((name, &rest[name.len()..]));
            continue;
        }
        if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|rest| rest.trim_end().split_once(' ')) {
            let counter = kind == "counter";
            let renamed = |family: &str| if counter { format!("{family}_total") } else { family.to_owned() };
            flush_help(&mut text, help.take(), Some(&renamed(name)));
            text.push_str("# TYPE ");
            text.push_str(&renamed(name));
            text.push(' ');
            text.push_str(kind);
            text.push('\n');
            continue;
        }
        flush_help(&mut text, help.take(), None);
        text.push_str(line);
    }
    flush_help(&mut text, help, None);
    text
}

/// Writes a held `# HELP name…` line, under `name` or the name its TYPE gave it.
fn flush_help(text: &mut String, help: Option<(&str, &str)>, renamed: Option<&str>) {
    if let Some((name, after_name)) = help {
        text.push_str("# HELP ");
        text.push_str(renamed.unwrap_or(name));
        text.push_str(after_name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::{Registry, Unit};

    #[test]
    fn counters_are_renamed_and_openmetrics_only_lines_dropped() {
        let openmetrics = "# HELP requests Requests served.\n# TYPE requests counter\nrequests_total{code=\"200\"} 3\n\
                           # HELP up Whether it is up.\n# TYPE up gauge\nup 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(openmetrics),
            "# HELP requests_total Requests served.\n# TYPE requests_total counter\nrequests_total{code=\"200\"} 3\n\
             # HELP up Whether it is up.\n# TYPE up gauge\nup 1\n"
        );
    }

    /// Everything prometheus-client writes for the metric types we use, through the real encoder.
    #[test]
    fn the_real_encoder_output_converts_line_for_line() {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        counter.inc_by(7);
        registry.register("events", "Watch events", counter);
        let gauges = Family::<Vec<(String, String)>, Gauge>::default();
        gauges.get_or_create(&vec![("reason".into(), "taint \"x\"\\n".into())]).set(2);
        registry.register("pods", "Misscheduled pods", gauges);
        let histogram = Histogram::new([0.1, 1.0]);
        histogram.observe(0.5);
        registry.register_with_unit("scrape_duration", "Scrape time", Unit::Seconds, histogram);
        let mut openmetrics = String::new();
        prometheus_client::encoding::text::encode(&mut openmetrics, &registry).expect("encodes");

        let text = openmetrics_to_text(&openmetrics);
        assert!(
            text.contains("# HELP events_total Watch events.\n# TYPE events_total counter\nevents_total 7\n"),
            "{text}"
        );
        assert!(text.contains("pods{reason=\"taint \\\"x\\\"\\\\n\"} 2\n"), "{text}");
        assert!(text.contains("# TYPE scrape_duration_seconds histogram\n"), "{text}");
        assert!(text.contains("scrape_duration_seconds_bucket{le=\"+Inf\"} 1\n"), "{text}");
        assert!(!text.contains("# UNIT") && !text.contains("# EOF"), "{text}");
        // Only the rewritten lines differ.
        let kept = |s: &str| s.lines().filter(|l| !l.starts_with('#')).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(kept(&text), kept(&openmetrics));
    }

    #[test]
    fn a_help_line_without_a_type_is_kept() {
        assert_eq!(openmetrics_to_text("# HELP lonely\nx 1\n"), "# HELP lonely\nx 1\n");
        assert_eq!(
            openmetrics_to_text("# HELP c Total.\n# TYPE c counter"),
            "# HELP c_total Total.\n# TYPE c_total counter\n"
        );
        assert_eq!(openmetrics_to_text(""), "");
    }
}
