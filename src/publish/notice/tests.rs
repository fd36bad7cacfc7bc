//! The notice's words, names and kinds.

use super::*;

/// A misscheduled pod's notice, as `misscheduled` builds it.
fn pod_uid(uid: u8) -> Uid {
    Uid::parse(&format!("00000000-0000-0000-0000-0000000000{uid:02x}"))
}

pub(crate) fn notice(uid: u8, reason: Reason, key: &str, manager: Option<&str>) -> Notice {
    let uid = pod_uid(uid);
    let id = |name: String| ObjectRef { namespace: "ns".into(), name: name.into() };
    Notice {
        kind: Kind::Misscheduled,
        subject: Subject::Pod(uid.clone()),
        verdict: Verdict::Skip { reason, key: key.into(), manager: manager.map(Str::from) },
        regarding: Target { id: id("agent".into()), uid: "ds-uid".into() },
        related: Some(Target { id: id(format!("agent-{uid}")), uid: uid.to_string() }),
        node: "n1".into(),
        orphan: false,
        episode: 1,
        of: None,
        said: None,
        announce: true,
        index_may_be_behind: false,
    }
}

#[test]
fn note_names_everything_and_fits_the_api_limit() {
    let n = notice(1, Reason::LabelDrift, "gpu", Some("kubectl-label"));
    assert_eq!(
        n.note(),
        "Pod agent-00000000-0000-0000-0000-000000000001 on node n1 is misscheduled: reason label_drift, key gpu, changed by kubectl-label. Fix: node n1 no longer matches gpu; restore the label (kubectl label node n1 gpu=...) or change the DaemonSet's selector"
    );
    assert!(!notice(1, Reason::LabelDrift, "gpu", None).note().contains("changed by"));
    let orphan = Notice { orphan: true, ..n };
    assert!(orphan.note().contains("Fix: orphan pod (no controller)"), "{}", orphan.note());
    let long = notice(1, Reason::LabelDrift, &"é".repeat(2000), None);
    let note = long.note();
    assert!(note.len() <= MAX_NOTE_BYTES && note.ends_with('…'), "{}", note.len());
}

#[test]
fn one_event_name_per_subject_and_verdict_everywhere() {
    let n = notice(1, Reason::LabelDrift, "gpu", Some("ops"));
    let name = n.event_name();
    assert!(name.starts_with("agent.") && name.len() == "agent.".len() + 16, "{name}");
    assert_eq!(notice(1, Reason::LabelDrift, "gpu", Some("ops")).event_name(), name, "deterministic");
    // Any part of the verdict, or another pod, is another Event.
    let others = [
        notice(2, Reason::LabelDrift, "gpu", Some("ops")),
        notice(1, Reason::TaintAdded, "gpu", Some("ops")),
        notice(1, Reason::LabelDrift, "gpu2", Some("ops")),
        notice(1, Reason::LabelDrift, "gpu", None),
        notice(1, Reason::LabelDrift, "gp", Some("uops")),
    ];
    let names: std::collections::HashSet<String> = others.iter().map(Notice::event_name).collect();
    assert_eq!(names.len(), others.len());
    assert!(!names.contains(&name));
    // The longest DaemonSet name still makes a valid name.
    let mut long = n.clone();
    long.regarding.id.name = "a".repeat(253).into();
    assert_eq!(long.event_name().len(), 253);
}

#[test]
fn a_lost_node_is_its_own_event() {
    let pod = notice(1, Reason::NfdChange, "gpu", Some("nfd-master"));
    let subject = Subject::Node { daemonset: "ds-uid".into(), node: "n1".into() };
    let lost = Notice { kind: Kind::NodeLost, subject, related: None, ..pod.clone() };
    assert_eq!(
        lost.note(),
        "Node n1 lost its daemon pod and the DaemonSet no longer covers it: reason nfd_change, key gpu, changed by nfd-master. Fix: node-feature-discovery no longer reports gpu on n1; check NFD on the node or relax the DaemonSet's selector"
    );
    assert_ne!(lost.event_name(), pod.event_name());
    // A node named like a pod's UID is still another subject.
    let twin = Notice {
        subject: Subject::Node { daemonset: "ds-uid".into(), node: pod_uid(1).to_string().into() },
        ..lost.clone()
    };
    assert_ne!(twin.event_name(), pod.event_name());
    let verdict = Verdict::Skip { reason: Reason::DaemonSetChanged, key: "gpu".into(), manager: None };
    let changed = Notice { verdict, ..lost };
    assert!(changed.fix().contains("no longer wants n1"), "{}", changed.fix());
}

#[test]
fn expected_reasons_and_recoveries_are_normal_events() {
    let drift = notice(1, Reason::LabelDrift, "gpu", Some("kubectl-label"));
    assert_eq!(drift.event_type(), "Warning");
    assert_eq!(notice(1, Reason::AutoscalerDrain, "ToBeDeletedByClusterAutoscaler", None).event_type(), "Normal");
    assert_eq!(notice(1, Reason::DaemonSetChanged, "nodeSelector", None).event_type(), "Normal");
    let recovered = drift.recovery();
    assert_eq!((recovered.kind.reason(), recovered.event_type()), ("Recovered", "Normal"));
    assert_eq!(
        recovered.note(),
        "Pod agent-00000000-0000-0000-0000-000000000001 on node n1 is no longer misscheduled: the DaemonSet may run it there again (it was: reason label_drift, key gpu, changed by kubectl-label)."
    );
    assert_ne!(recovered.event_name(), drift.event_name(), "its own Event");
    let lost = Notice {
        kind: Kind::NodeLost,
        subject: Subject::Node { daemonset: "ds-uid".into(), node: "n1".into() },
        related: None,
        ..drift
    };
    assert!(lost.recovery().note().starts_with("Node n1 is covered again"), "{}", lost.recovery().note());
    assert_ne!(lost.recovery().event_name(), recovered.event_name());
}

#[test]
fn each_action_is_its_reason_in_pascal_case() {
    for reason in Reason::ALL {
        let pascal: String =
            reason.as_str().split('_').map(|word| word[..1].to_ascii_uppercase() + &word[1..]).collect();
        assert_eq!(action(reason), pascal, "{reason}");
    }
}

#[test]
fn an_uncovered_node_is_one_event_per_episode_whatever_its_reason_becomes() {
    let said = |reason, detail: &str| Some(Said { reason, detail: detail.into() });
    let uncovered = Notice {
        kind: Kind::NodeUncovered,
        subject: Subject::Uncovered { daemonset: "ds-uid".into(), node: "n1".into() },
        verdict: Verdict::Uncovered,
        related: None,
        said: said(Uncovered::ImagePull, "ImagePullBackOff: image registry.example/agent:2"),
        ..notice(1, Reason::LabelDrift, "gpu", None)
    };
    assert_eq!(
        uncovered.note(),
        "Node n1 has no available pod of the DaemonSet: image_pull (ImagePullBackOff: image registry.example/agent:2). Fix: the image cannot be pulled: check its name and tag, the registry, and imagePullSecrets"
    );
    assert_eq!((uncovered.event_type(), uncovered.action()), ("Warning", "ImagePull"));
    assert_eq!(uncovered.annotations()["misschedule.io/reason"], "image_pull");
    // Reworded, or another reason: the same Event.
    let reworded = Notice { said: said(Uncovered::CrashLoop, "CrashLoopBackOff"), ..uncovered.clone() };
    assert_eq!(reworded.event_name(), uncovered.event_name());
    // Not the node's loss, nor another node.
    let lost = Notice {
        kind: Kind::NodeLost,
        subject: Subject::Node { daemonset: "ds-uid".into(), node: "n1".into() },
        ..notice(1, Reason::LabelDrift, "gpu", None)
    };
    assert_ne!(lost.event_name(), uncovered.event_name());
    let n2 =
        Notice { subject: Subject::Uncovered { daemonset: "ds-uid".into(), node: "n2".into() }, ..uncovered.clone() };
    assert_ne!(n2.event_name(), uncovered.event_name());
    let recovered = uncovered.recovery();
    assert_eq!(
        (recovered.event_type(), recovered.note().as_str()),
        ("Normal", "Node n1 has an available pod again (it had none: image_pull).")
    );
}
