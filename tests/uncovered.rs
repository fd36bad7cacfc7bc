//! Why a node a DaemonSet should run on has no available pod: the pure rules, against what
//! the real kube-scheduler wrote (tests/fixtures/scheduler-messages, one file per version,
//! recorded by scripts/record-scheduler-messages.sh).

use std::path::Path;

use misschedule_exporter::rules::uncovered::scheduler_detail;

/// Each recorded DaemonSet's scene, and the reason the scheduler gives for its own node.
const EXPECTED: [(&str, &str); 5] = [
    ("memory", "Insufficient memory"),
    ("cpu", "Insufficient cpu"),
    ("both", "Insufficient cpu, Insufficient memory"),
    ("port-b", "node(s) didn't have free ports for the requested pod ports"),
    ("shy", "node(s) didn't match pod anti-affinity rules"),
];

#[test]
fn the_scheduler_detail_is_the_target_nodes_reason_in_every_recorded_version() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scheduler-messages");
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut seen = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let [daemonset, node, message] = line.splitn(3, '\t').collect::<Vec<_>>()[..] else {
                panic!("{}: not DaemonSet, node, message: {line}", path.display())
            };
            let (_, want) = EXPECTED.iter().find(|(ds, _)| *ds == daemonset).expect("a recorded scene");
            assert_eq!(scheduler_detail(message), *want, "{} {daemonset} on {node}", path.display());
            seen.push(daemonset);
        }
        for (ds, _) in EXPECTED {
            assert!(seen.contains(&ds), "{}: no message for {ds}", path.display());
        }
        versions.push(path.file_stem().unwrap().to_string_lossy().into_owned());
    }
    versions.sort();
    assert!(
        versions.iter().any(|v| v.starts_with("1.33.")) && versions.iter().any(|v| v.starts_with("1.37.")),
        "{versions:?}"
    );
}
