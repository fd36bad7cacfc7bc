//! `/metrics`: the classification read from the index at scrape time (so no
//! stale series can outlive their pod), followed by the exporter's own telemetry.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use bytes::Bytes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::index::{LostNode, MisscheduledPod, UncoveredNode, nodes_by_reason};
use crate::model::DaemonSet;
use crate::report::format::{Format, counters, gauges, openmetrics_to_text};
use crate::report::gzip::{self, DeflateError, Deflated};
use crate::rules::reason::Reason;
use crate::rules::uncovered::Uncovered;
use crate::shared::Shared;

/// What `/metrics` serves: the classification, rendered once per index generation
/// and reused until the index changes (a scrape of 200,000 pods would otherwise
/// re-encode the same text every time), followed by the live self-metrics.
#[derive(Debug)]
pub struct Exposition {
    shared: Arc<Shared>,
    classification: Registry,
    telemetry: Registry,
    rendered_generation: Arc<AtomicU64>,
    cache: Mutex<Option<Rendered>>,
}

/// One generation's classification, in each form some scrape has asked for. The pieces are
/// shared by every response body still being sent, so a slow reader costs a reference.
#[derive(Debug)]
struct Rendered {
    generation: u64,
    openmetrics: Bytes,
    text: Option<Bytes>,
    /// Indexed by `slot(format)`; compressed only once a scraper asks for gzip.
    gzip: [Option<Deflated>; 2],
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("encoding the metrics failed")]
    Encode(#[from] fmt::Error),
    #[error(transparent)]
    Compress(#[from] DeflateError),
}

fn slot(format: Format) -> usize {
    match format {
        Format::OpenMetrics => 0,
        Format::Text => 1,
    }
}

impl Exposition {
    /// `self_metrics`: the exporter's own, rendered live after the classification
    /// (`Telemetry::register`).
    pub fn new(shared: Arc<Shared>, self_metrics: Registry) -> Self {
        let rendered_generation = Arc::new(AtomicU64::new(0));
        let mut classification = Registry::default();
        classification.register_collector(Box::new(ClusterCollector {
            shared: shared.clone(),
            rendered_generation: rendered_generation.clone(),
        }));
        Self { shared, classification, telemetry: self_metrics, rendered_generation, cache: Mutex::new(None) }
    }

    /// The body of a scrape, as chunks to send in order: the cached classification, then
    /// the self-metrics, in `format`; with `gzip`, one gzip member of both.
    pub fn body(&self, format: Format, gzip: bool) -> Result<Vec<Bytes>, RenderError> {
        let mut telemetry = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut telemetry, &self.telemetry)?;
        if format == Format::Text {
            telemetry = openmetrics_to_text(&telemetry);
        }
        // One renderer at a time; the others wait and reuse its result.
        let mut cache = self.cache.lock();
        let rendered = self.current(&mut cache)?;
        let classification = match format {
            Format::OpenMetrics => rendered.openmetrics.clone(),
            Format::Text => text_of(rendered)?.clone(),
        };
        if !gzip {
            return Ok(vec![classification, Bytes::from(telemetry)]);
        }
        let classification = match &mut rendered.gzip[slot(format)] {
            Some(compressed) => compressed.clone(),
            empty => empty.insert(Deflated::leading(&classification)?).clone(),
        };
        drop(cache);
        Ok(gzip::member(&[&classification], &Deflated::last(telemetry.as_bytes())?))
    }

    /// OpenMetrics text of everything, as one string.
    pub fn render(&self) -> Result<String, RenderError> {
        let chunks = self.body(Format::OpenMetrics, false)?;
        let mut out = String::with_capacity(chunks.iter().map(Bytes::len).sum());
        for chunk in chunks {
            // Both parts were encoded from `String`s.
            out.push_str(std::str::from_utf8(&chunk).map_err(|_| fmt::Error)?);
        }
        Ok(out)
    }

    /// The classification of the index's current generation, rendered if it is not yet.
    fn current<'c>(&self, cache: &'c mut Option<Rendered>) -> Result<&'c mut Rendered, fmt::Error> {
        let current = self.shared.read().generation();
        if cache.as_ref().is_none_or(|rendered| rendered.generation != current) {
            let mut text = String::with_capacity(cache.as_ref().map_or(64 * 1024, |r| r.openmetrics.len() + 4096));
            prometheus_client::encoding::text::encode_registry(&mut text, &self.classification)?;
            // The collector saw the generation it actually rendered, which may be newer than `current`.
            let generation = self.rendered_generation.load(Ordering::Acquire);
            *cache = Some(Rendered { generation, openmetrics: Bytes::from(text), text: None, gzip: [None, None] });
        }
        cache.as_mut().ok_or(fmt::Error)
    }
}

/// The classification in the 0.0.4 text format, converted on first use.
fn text_of(rendered: &mut Rendered) -> Result<&Bytes, fmt::Error> {
    if rendered.text.is_none() {
        // Encoded from a `String`, so always UTF-8.
        let openmetrics = std::str::from_utf8(&rendered.openmetrics).map_err(|_| fmt::Error)?;
        rendered.text = Some(Bytes::from(openmetrics_to_text(openmetrics)));
    }
    rendered.text.as_ref().ok_or(fmt::Error)
}

/// The `daemonset_*` families, read from the index at render time.
#[derive(Debug)]
struct ClusterCollector {
    shared: Arc<Shared>,
    rendered_generation: Arc<AtomicU64>,
}

/// The labels every per-pod series has.
fn pod_labels<'a>(ds: &'a DaemonSet, p: &'a MisscheduledPod<'_>, pod: &'a str) -> [(&'static str, &'a str); 5] {
    [
        ("namespace", &ds.id.namespace),
        ("daemonset", &ds.id.name),
        ("pod", pod),
        ("node", p.node),
        ("reason", p.classification.reason.as_str()),
    ]
}

/// The labels every per-uncovered-node series has.
fn uncovered_labels<'a>(ds: &'a DaemonSet, n: &'a UncoveredNode<'_>) -> [(&'static str, &'a str); 4] {
    [("namespace", &ds.id.namespace), ("daemonset", &ds.id.name), ("node", n.node), ("reason", n.reason.as_str())]
}

/// The labels every per-lost-node series has.
fn lost_labels<'a>(ds: &'a DaemonSet, n: &'a LostNode<'_>) -> [(&'static str, &'a str); 4] {
    [
        ("namespace", &ds.id.namespace),
        ("daemonset", &ds.id.name),
        ("node", n.node),
        ("reason", n.verdict.reason.as_str()),
    ]
}

impl Collector for ClusterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let index = self.shared.read();
        self.rendered_generation.store(index.generation(), Ordering::Release);
        // Until every list is complete a count is a guess (no pods yet reads as nothing
        // misscheduled, and uncovered nodes are found only once synced): the families stay
        // empty, which alerts read as no data, and `misschedule_exporter_cache_synced` says why.
        let daemonsets = if index.synced() { index.daemonsets() } else { Vec::new() };
        let misscheduled: Vec<_> = daemonsets.iter().map(|ds| (ds, ds.misscheduled_pods())).collect();
        // The index keeps pod names in pieces: each is built once per render.
        let names: Vec<String> =
            misscheduled.iter().flat_map(|(_, pods)| pods.iter().map(|p| p.pod.id.name())).collect();
        let pods = || {
            let rows = misscheduled.iter().flat_map(|(ds, pods)| pods.iter().map(move |p| (ds.ds, p)));
            rows.zip(&names).map(|((ds, p), name)| (ds, p, name.as_str()))
        };

        gauges(
            &mut encoder,
            "daemonset_misscheduled_pod_info",
            "A daemon pod on a node its DaemonSet should not run on, with the reason, the label or taint key behind it, and the field manager that changed it (empty when unknown)",
            pods().map(|(ds, p, name)| {
                let c = &p.classification;
                (
                    (
                        pod_labels(ds, p, name),
                        [("key", &*c.key), ("manager", c.manager.as_deref().unwrap_or_default())],
                    ),
                    1,
                )
            }),
        )?;
        gauges(
            &mut encoder,
            "daemonset_misscheduled_pod_since_timestamp_seconds",
            "When the pod became misscheduled (unix seconds): seen by the exporter, or else the best evidence in the objects",
            pods().map(|(ds, p, name)| (pod_labels(ds, p, name), p.since)),
        )?;
        gauges(
            &mut encoder,
            "daemonset_misscheduled_nodes",
            "Nodes running a daemon pod they should not, by the reason of the node's oldest such pod; summed by DaemonSet it equals status.numberMisscheduled",
            misscheduled.iter().flat_map(|(ds, pods)| {
                let counts = nodes_by_reason(pods);
                Reason::ALL.into_iter().map(move |reason| {
                    let labels = [
                        ("namespace", &*ds.ds.id.namespace),
                        ("daemonset", &*ds.ds.id.name),
                        ("reason", reason.as_str()),
                    ];
                    (labels, i64::from(counts[reason.index()]))
                })
            }),
        )?;
        let lost: Vec<_> = daemonsets.iter().map(|ds| (ds.ds, ds.lost_nodes())).collect();
        let lost = || lost.iter().flat_map(|(ds, nodes)| nodes.iter().map(move |n| (*ds, n)));
        gauges(
            &mut encoder,
            "daemonset_lost_node_info",
            "A node the DaemonSet stopped covering: its daemon pod was misscheduled and is gone, and the DaemonSet still skips the node; with the reason, key and field manager the pod had",
            lost().map(|(ds, n)| {
                let v = n.verdict;
                ((lost_labels(ds, n), [("key", &*v.key), ("manager", v.manager.as_deref().unwrap_or_default())]), 1)
            }),
        )?;
        gauges(
            &mut encoder,
            "daemonset_lost_node_since_timestamp_seconds",
            "When the node lost its daemon pod (unix seconds): seen by the exporter, or else the pod's delete request",
            lost().map(|(ds, n)| (lost_labels(ds, n), n.since)),
        )?;
        counters(
            &mut encoder,
            "daemonset_node_losses",
            "Nodes the DaemonSet stopped covering since the exporter started, by reason and key: one per loss, so a label that flaps counts each time",
            daemonsets.iter().flat_map(|ds| {
                ds.losses().into_iter().map(move |(reason, key, count)| {
                    let labels = [
                        ("namespace", &*ds.ds.id.namespace),
                        ("daemonset", &*ds.ds.id.name),
                        ("reason", reason.as_str()),
                        ("key", &**key),
                    ];
                    (labels, count)
                })
            }),
        )?;
        let uncovered: Vec<_> = daemonsets.iter().map(|ds| (ds.ds, ds.uncovered_nodes())).collect();
        let uncovered_rows = || uncovered.iter().flat_map(|(ds, nodes)| nodes.iter().map(move |n| (*ds, n)));
        let uncovered_pods: Vec<String> =
            uncovered_rows().map(|(_, n)| n.pod.map(|p| p.id.name()).unwrap_or_default()).collect();
        gauges(
            &mut encoder,
            "daemonset_uncovered_node_info",
            "A node the DaemonSet should run on without an available daemon pod, with the pod (empty when there is none), the reason and a short detail in the scheduler's or the kubelet's words",
            uncovered_rows().zip(&uncovered_pods).map(|((ds, n), pod)| {
                let detail = n.detail.unwrap_or_default();
                ((uncovered_labels(ds, n), [("pod", pod.as_str()), ("detail", detail)]), 1)
            }),
        )?;
        gauges(
            &mut encoder,
            "daemonset_uncovered_node_since_timestamp_seconds",
            "When the node became uncovered (unix seconds): seen by the exporter, or else what the pod's status says",
            uncovered_rows().map(|(ds, n)| (uncovered_labels(ds, n), n.since)),
        )?;
        gauges(
            &mut encoder,
            "daemonset_uncovered_nodes",
            "Nodes the DaemonSet should run on without an available daemon pod, by reason; every reason is present, zero included",
            uncovered.iter().flat_map(|(ds, nodes)| {
                let mut counts = [0i64; Uncovered::ALL.len()];
                for n in nodes {
                    counts[n.reason.index()] += 1;
                }
                Uncovered::ALL.into_iter().map(move |reason| {
                    let labels =
                        [("namespace", &*ds.id.namespace), ("daemonset", &*ds.id.name), ("reason", reason.as_str())];
                    (labels, counts[reason.index()])
                })
            }),
        )?;
        gauges(
            &mut encoder,
            "daemonset_eligible_nodes",
            "Nodes the DaemonSet should run on (equals status.desiredNumberScheduled)",
            daemonsets.iter().map(|ds| {
                ([("namespace", &*ds.ds.id.namespace), ("daemonset", &*ds.ds.id.name)], ds.eligible_nodes() as i64)
            }),
        )?;
        gauges(
            &mut encoder,
            "daemonset_ineligible_nodes",
            "Nodes the DaemonSet skips, by reason (node_selector, node_affinity, taint, node_name) and the first label or taint key that excludes them",
            daemonsets.iter().flat_map(|ds| {
                ds.ineligible_nodes().into_iter().map(move |(reason, key, count)| {
                    let labels = [
                        ("namespace", &*ds.ds.id.namespace),
                        ("daemonset", &*ds.ds.id.name),
                        ("reason", reason.as_str()),
                        ("key", &**key),
                    ];
                    (labels, i64::from(count))
                })
            }),
        )?;

        Ok(())
    }
}
