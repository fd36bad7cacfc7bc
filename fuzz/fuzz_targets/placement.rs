//! The selector and toleration rules on arbitrary nodes and templates: no panics, and
//! two properties of the controller's rules that must hold for every input.
#![no_main]

use std::collections::BTreeMap;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use misschedule_exporter::model::{
    LabelSet, Node, NodeManagers, Placement, Requirement, SelectorOperator, Str, Taint, TaintEffect, Toleration,
    TolerationOperator,
};
use misschedule_exporter::rules::eligibility::{node_selector_term, should_run};

/// Few keys, so that selectors, labels and taints actually meet; free-form values.
#[derive(Arbitrary, Debug)]
enum Key {
    Zone,
    Pool,
    Gpu,
    Drain,
    NodeName,
    Other(String),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Key::Zone => "topology.kubernetes.io/zone",
            Key::Pool => "pool",
            Key::Gpu => "feature.node.kubernetes.io/pci-10de.present",
            Key::Drain => "ToBeDeletedByClusterAutoscaler",
            Key::NodeName => "metadata.name",
            Key::Other(s) => s,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    node_name: String,
    labels: Vec<(Key, String)>,
    taints: Vec<(Key, String, u8)>,
    node_selector: Vec<(Key, String)>,
    terms: Option<Vec<(Vec<(Key, u8, Vec<String>)>, Vec<(Key, u8, Vec<String>)>)>>,
    tolerations: Vec<(Key, u8, String, Option<u8>)>,
    template_node_name: Option<String>,
    host_network: bool,
}

fn s(text: &str) -> Str {
    Arc::from(text)
}

fn effect(n: u8) -> TaintEffect {
    [TaintEffect::NoSchedule, TaintEffect::PreferNoSchedule, TaintEffect::NoExecute, TaintEffect::Other][n as usize % 4]
}

fn requirements(raw: &[(Key, u8, Vec<String>)]) -> Vec<Requirement> {
    const OPERATORS: [&str; 7] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"];
    raw.iter()
        .map(|(key, op, values)| Requirement {
            key: s(key.as_str()),
            operator: SelectorOperator::parse(OPERATORS[*op as usize % OPERATORS.len()]),
            values: values.iter().map(|v| s(v)).collect(),
        })
        .collect()
}

fuzz_target!(|input: Input| {
    let labels: BTreeMap<Str, Str> = input.labels.iter().map(|(k, v)| (s(k.as_str()), s(v))).collect();
    let taints: Vec<Taint> = input
        .taints
        .iter()
        .map(|(k, v, e)| Taint { key: s(k.as_str()), value: s(v), effect: effect(*e), time_added: None })
        .collect();
    let node = Node {
        name: s(&input.node_name),
        labels: Arc::new(labels.into_iter().collect::<LabelSet>()),
        taints: taints.into(),
        nfd_label_keys: Arc::from([]),
        nfd_taint_keys: Arc::from([]),
        managers: NodeManagers::default(),
        fingerprint: None,
    };
    let mut node_selector: Vec<(Str, Str)> = input.node_selector.iter().map(|(k, v)| (s(k.as_str()), s(v))).collect();
    node_selector.sort();
    node_selector.dedup_by(|a, b| a.0 == b.0);
    let placement = Placement {
        node_name: input.template_node_name.as_deref().map(s),
        node_selector,
        required_terms: input.terms.as_ref().map(|terms| {
            terms
                .iter()
                .map(|(expressions, fields)| node_selector_term(requirements(expressions), requirements(fields)))
                .collect()
        }),
        tolerations: input
            .tolerations
            .iter()
            .map(|(k, op, v, e)| Toleration {
                key: s(k.as_str()),
                operator: [TolerationOperator::Exists, TolerationOperator::Equal, TolerationOperator::Unsupported]
                    [*op as usize % 3],
                value: s(v),
                effect: e.map(effect),
            })
            .collect(),
        host_network: input.host_network,
    };
    let verdict = should_run(&node, &placement);

    // PreferNoSchedule never matters.
    let mut softer_taints = node.taints.to_vec();
    softer_taints.push(Taint { key: s("soft"), value: s(""), effect: TaintEffect::PreferNoSchedule, time_added: None });
    let softer = Node { taints: softer_taints.into(), ..node.clone() };
    assert_eq!(should_run(&softer, &placement), verdict, "a PreferNoSchedule taint changed the verdict");

    // Tolerating everything (an empty key with Exists) leaves only placement to decide.
    let mut tolerant = placement.clone();
    tolerant.tolerations.push(Toleration {
        key: s(""),
        operator: TolerationOperator::Exists,
        value: s(""),
        effect: None,
    });
    let without_taints = Node { taints: Box::new([]), ..node.clone() };
    assert_eq!(
        should_run(&node, &tolerant),
        should_run(&without_taints, &placement),
        "tolerating every taint must equal having none"
    );
});
