//! The rows the bench prints, the targets they are held to, and two runs side by side.

use std::time::Duration;

use crate::synth::Shape;

/// One measure: its value (for the growth between scales), as shown, and its target.
pub(crate) struct Row {
    pub(crate) what: std::borrow::Cow<'static, str>,
    pub(crate) value: f64,
    pub(crate) measured: String,
    pub(crate) target: String,
    pub(crate) met: Option<bool>,
}

impl Row {
    pub(crate) fn new(what: impl Into<std::borrow::Cow<'static, str>>, value: f64, measured: String) -> Self {
        Self { what: what.into(), value, measured, target: String::new(), met: None }
    }

    /// A scrape latency held to `target`, with how many scrapes and how large a body.
    pub(crate) fn scrapes(what: &'static str, p99: Duration, scrapes: usize, bytes: usize, target: Duration) -> Self {
        let shown = format!("{:.2} ms ({scrapes} scrapes, {} KiB each)", ms(p99), bytes / 1024);
        Self::new(what, ms(p99), shown).target(format!("≤ {} ms", target.as_millis()), p99 <= target)
    }

    pub(crate) fn target(self, target: impl Into<String>, met: bool) -> Self {
        Self { target: target.into(), met: Some(met), ..self }
    }

    pub(crate) fn met(&self) -> &'static str {
        match self.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        }
    }
}

/// The targets at 5,000 nodes (200,000 pods) and at 65,000 (2,600,000 pods).
pub(crate) struct Targets {
    pub(crate) cold_start: Duration,
    pub(crate) synced_rss_mib: f64,
    /// RSS after the allocator has purged the lists' garbage; no target at the largest scale.
    pub(crate) idle_rss_mib: Option<f64>,
    pub(crate) p99: Duration,
    pub(crate) gzip_p99: Duration,
    pub(crate) events_per_second: f64,
}

impl Targets {
    pub(crate) fn for_shape(shape: &Shape) -> Self {
        if shape.nodes >= 65_000 {
            Self {
                cold_start: Duration::from_secs(20),
                synced_rss_mib: 1024.0,
                idle_rss_mib: None,
                p99: Duration::from_millis(20),
                gzip_p99: Duration::from_millis(20),
                events_per_second: 500_000.0,
            }
        } else {
            Self {
                cold_start: Duration::from_secs(2),
                synced_rss_mib: 128.0,
                idle_rss_mib: Some(80.0),
                p99: Duration::from_millis(10),
                gzip_p99: Duration::from_millis(5),
                events_per_second: 500_000.0,
            }
        }
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// Rows as tab-separated lines, after a `# scale` line, for `--compare`.
pub(crate) fn write_tsv(path: &str, scale: [usize; 4], rows: &[Row]) {
    let mut out = format!("# scale\t{}\t{}\t{}\t{}\n", scale[0], scale[1], scale[2], scale[3]);
    for r in rows {
        out += &format!("{}\t{}\t{}\t{}\t{}\n", r.what, r.value, r.measured, r.target, r.met());
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
}

/// Two runs' rows side by side (`--compare SMALL.tsv LARGE.tsv`), with how each grew.
pub(crate) fn compare(small: &str, large: &str) {
    let read = |path: &str| {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        let mut lines = text.lines();
        let scale: Vec<usize> =
            lines.next().unwrap_or_default().split('\t').skip(1).filter_map(|v| v.parse().ok()).collect();
        assert_eq!(scale.len(), 4, "{path}: no scale line");
        let rows: Vec<Vec<String>> = lines.map(|l| l.split('\t').map(str::to_owned).collect()).collect();
        assert!(rows.iter().all(|r| r.len() == 5), "{path}: malformed rows");
        (scale, rows)
    };
    let ((s, small_rows), (l, large_rows)) = (read(small), read(large));
    let thousands = |n: usize| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    println!(
        "Scales: {} nodes × {} DaemonSets = {} pods, and {} nodes × {} DaemonSets = {} pods ({:.1}× the pods; {} and {} misscheduled)\n",
        thousands(s[0]),
        s[1],
        thousands(s[2]),
        thousands(l[0]),
        l[1],
        thousands(l[2]),
        l[2] as f64 / s[2] as f64,
        thousands(s[3]),
        thousands(l[3])
    );
    println!("| measure | {} nodes | {} nodes | grew | target | met |", thousands(s[0]), thousands(l[0]));
    println!("|---|---|---|---|---|---|");
    for (a, b) in small_rows.iter().zip(&large_rows) {
        assert_eq!(a[0], b[0], "the two runs measured different things");
        let (x, y) = (a[1].parse::<f64>().unwrap_or(0.0), b[1].parse::<f64>().unwrap_or(0.0));
        let grew = if x > 0.0 { format!("×{:.1}", y / x) } else { String::new() };
        let target = match (a[3].as_str(), b[3].as_str()) {
            ("", "") => String::new(),
            (t, u) if t == u => t.to_owned(),
            (t, u) => format!("{} / {}", if t.is_empty() { "–" } else { t }, if u.is_empty() { "–" } else { u }),
        };
        let met = match (a[4].as_str(), b[4].as_str()) {
            ("", "") => String::new(),
            (m, n) => format!("{} / {}", if m.is_empty() { "–" } else { m }, if n.is_empty() { "–" } else { n }),
        };
        println!("| {} | {} | {} | {grew} | {target} | {met} |", a[0], a[2], b[2]);
    }
}
