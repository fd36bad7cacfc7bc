//! `kubectl misschedule what-if` and `--snapshot` as a user runs them, offline, on the shipped
//! snapshots. Bad input gets one `error:` line and a non-zero exit.
//!
//! kubectl runs a plugin as `kubectl-misschedule ARGS...`, passing the arguments through, so
//! the fast tier runs the binary so and needs no kubectl installed; one slow test checks that
//! the real kubectl finds the plugin on PATH and answers the same.

use std::process::{Command, Output};

use serde_json::Value;

/// A user's environment with no cluster: no kubeconfig to fall back on.
fn offline(command: &mut Command) -> Output {
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .expect("run the plugin")
}

fn plugin(args: &[&str]) -> Output {
    offline(Command::new(env!("CARGO_BIN_EXE_kubectl-misschedule")).args(args))
}

/// `kubectl misschedule ARGS...` through the real kubectl, with the plugin on PATH.
fn through_kubectl(args: &[&str]) -> Output {
    let plugin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-misschedule")).parent().unwrap();
    let path = format!("{}:{}", plugin_dir.display(), std::env::var("PATH").unwrap_or_default());
    offline(Command::new("kubectl").arg("misschedule").args(args).env("PATH", path))
}

#[test]
#[ignore = "needs kubectl: scripts/test.sh runs it"]
fn kubectl_finds_the_plugin_and_answers_the_same() {
    for args in [
        &["--snapshot", SNAPSHOT, "-o", "json"][..],
        &["what-if", "label", "node", "n1", "disk-", "--snapshot", SNAPSHOT],
        &["what-if", "taint", "n1", "x=y:Bad", "--snapshot", SNAPSHOT],
    ] {
        let (direct, via) = (plugin(args), through_kubectl(args));
        assert_eq!(via.status.code(), direct.status.code(), "{args:?}: {}", String::from_utf8_lossy(&via.stderr));
        assert_eq!(without_clock(&via.stdout), without_clock(&direct.stdout), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&via.stderr), String::from_utf8_lossy(&direct.stderr), "{args:?}");
    }
}

/// The answer minus what the clock moves between two runs: `as_of` and each row's age, which
/// differ by a second when the two runs straddle one. Text output carries neither.
fn without_clock(stdout: &[u8]) -> String {
    let Ok(mut answer) = serde_json::from_slice::<Value>(stdout) else {
        return String::from_utf8_lossy(stdout).into_owned();
    };
    if let Some(looked_at) = answer["looked_at"].as_object_mut() {
        looked_at.remove("as_of").expect("every answer says when");
    }
    for rows in answer.as_object_mut().into_iter().flat_map(|a| a.values_mut()).filter_map(Value::as_array_mut) {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            row.remove("age_seconds");
        }
    }
    answer.to_string()
}

const SNAPSHOT: &str = "examples/label-drift.json";

fn json(out: &Output) -> Value {
    assert!(out.status.success() || out.status.code() == Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn every_plugin_command_takes_a_snapshot() {
    let out = plugin(&["--snapshot", SNAPSHOT, "-o", "json"]);
    let explanation = json(&out);
    let pods: Vec<&str> =
        explanation["misscheduled"].as_array().unwrap().iter().map(|r| r["pod"].as_str().unwrap()).collect();
    assert_eq!(pods, ["ssd-agent-mcgxz"]);
    let out = plugin(&["--snapshot", SNAPSHOT, "--exit-code"]);
    assert_eq!(out.status.code(), Some(1), "a misscheduled pod with --exit-code");
    let out = plugin(&["--snapshot", SNAPSHOT, "--watch"]);
    assert_eq!(out.status.code(), Some(2), "--watch needs a cluster: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_answer_has_changes_and_desired_and_names_what_it_looked_at() {
    let out = plugin(&["what-if", "label", "node", "n1", "disk-", "--snapshot", SNAPSHOT, "-o", "json"]);
    let answer = json(&out);
    assert_eq!(answer["looked_at"]["source"], format!("snapshot {SNAPSHOT}"));
    assert_eq!(answer["looked_at"]["namespace"], Value::Null, "every namespace");
    assert_eq!(answer["looked_at"]["daemonsets"], 4);
    let changes = answer["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1);
    let row = &changes[0];
    for (field, want) in [
        ("namespace", "monitoring"),
        ("daemonset", "ssd-agent"),
        ("node", "n1"),
        ("pod", "ssd-agent-ztrdz"),
        ("effect", "delete"),
        ("reason", "label_drift"),
        ("key", "disk"),
    ] {
        assert_eq!(row[field], want, "{field}");
    }
    let desired = &answer["desired"][0];
    assert_eq!(
        (&desired["daemonset"], &desired["before"], &desired["after"]),
        (&Value::from("ssd-agent"), &Value::from(2), &Value::from(1))
    );

    // YAML is the same object.
    let out = plugin(&["what-if", "label", "n1", "disk-", "--snapshot", SNAPSHOT, "-o", "yaml"]);
    assert!(out.status.success());
    let mut yaml: Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(yaml["looked_at"]["change"], "label n1 disk-");
    yaml["looked_at"]["change"] = answer["looked_at"]["change"].clone();
    assert_eq!(yaml, answer);

    // The table says what it checked, also when nothing changes.
    let out = plugin(&["what-if", "label", "n1", "team=a", "--snapshot", SNAPSHOT, "-n", "monitoring"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("What-if label n1 team=a: 4 DaemonSets in namespace monitoring on 1 node, from snapshot examples/label-drift.json.\nNo daemon pod would be deleted"), "{table}");
}

#[test]
fn exit_code_is_1_only_when_a_pod_would_be_deleted_or_misscheduled() {
    let cases: [(&[&str], i32); 5] = [
        (&["label", "n1", "disk-"], 1),
        (&["taint", "n1", "dedicated=db:NoSchedule"], 1),
        (&["taint", "n1", "node.kubernetes.io/unschedulable:NoSchedule"], 0),
        (&["label", "n2", "disk=ssd"], 0),
        (&["label", "n1", "team=a"], 0),
    ];
    for (args, code) in cases {
        let out = plugin(&[&["what-if"], args, &["--snapshot", SNAPSHOT, "--exit-code"]].concat());
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = plugin(&["what-if", "label", "n1", "disk-", "--snapshot", SNAPSHOT]);
    assert_eq!(out.status.code(), Some(0), "without --exit-code");
}

#[test]
fn apply_takes_manifests_from_files_and_stdin() {
    let dir = std::env::temp_dir().join(format!("what-if-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("ssd-agent.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ssd-agent, namespace: monitoring}\nspec:\n  selector: {matchLabels: {app: ssd-agent}}\n  template:\n    metadata: {labels: {app: ssd-agent}}\n    spec:\n      nodeSelector: {disk: nvme}\n      containers: [{name: agent, image: agent:2}]\n",
    )
    .unwrap();
    let path = manifest.to_str().unwrap();
    let out = plugin(&["what-if", "apply", "-f", path, "--snapshot", SNAPSHOT, "-o", "json", "--exit-code"]);
    assert_eq!(out.status.code(), Some(1));
    let answer = json(&out);
    let rows: Vec<String> = answer["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{} {} {} {}", r["node"], r["effect"], r["reason"], r["key"]).replace('"', ""))
        .collect();
    assert_eq!(rows, ["n1 delete daemonset_changed disk", "n3 delete daemonset_changed disk"]);
    assert_eq!(answer["looked_at"]["namespace"], "monitoring");

    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-misschedule"))
        .args(["what-if", "apply", "-f", "-", "--snapshot", SNAPSHOT, "-o", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &std::fs::read(&manifest).unwrap()).unwrap();
    let from_stdin = child.wait_with_output().unwrap();
    assert_eq!(json(&from_stdin)["changes"], answer["changes"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_clear_line_and_a_non_zero_exit() {
    let dir = std::env::temp_dir().join(format!("what-if-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let malformed = file("malformed.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: [\n");
    let configmap = file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["apply", "-f", &malformed], 3, "not valid YAML"),
        (vec!["apply", "-f", &configmap], 3, "what-if apply takes DaemonSets (apps/v1), not v1 ConfigMap"),
        (vec!["apply", "-f", "/nonexistent/ds.yaml"], 3, "/nonexistent/ds.yaml: cannot read"),
        (
            vec!["taint", "n1", "dedicated=db:NoScheduled"],
            3,
            "invalid taint effect: NoScheduled, unsupported taint effect",
        ),
        (vec!["taint", "n1", "a=b=c:NoSchedule"], 3, "invalid taint spec: a=b=c:NoSchedule"),
        (vec!["taint", "n1", "dedicated=db"], 3, "invalid taint spec: dedicated=db"),
        (vec!["taint", "n1", "dedicated"], 3, "at least one taint update is required"),
        (vec!["taint", "n1", "absent-"], 3, "taint \"absent\" not found"),
        (vec!["label", "n9", "disk=ssd"], 3, "nodes \"n9\" not found in the snapshot"),
        (vec!["label", "n1", "zone=b"], 3, "'zone' already has a value (a), and --overwrite is false"),
        (
            vec!["taint", "n1", "a=1:NoSchedule", "a=2:NoSchedule"],
            3,
            "duplicated taints with the same key and effect: a=2:NoSchedule",
        ),
        (vec!["label", "n1", "disk=ssd", "n2"], 3, "all resources must be specified before label changes: n2"),
        (vec!["label", "n1"], 3, "at least one label update is required"),
        (vec!["label", "n1", "-l", "zone=a", "disk-"], 3, "name cannot be provided when a selector is specified"),
        (vec!["label", "-l", "zone in (a", "disk-"], 3, "invalid label selector"),
        (vec!["label", "n1", "bad key=x"], 3, "invalid label spec"),
    ];
    for (args, code, message) in cases {
        let out = plugin(&[&["what-if"], &args[..], &["--snapshot", SNAPSHOT]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed an answer");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(message), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let out = plugin(&["--watch", "what-if", "label", "n1", "disk-"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "error: --watch does not apply to what-if\n");
}

#[test]
fn the_documented_commands_print_what_the_docs_show() {
    let read = |file: &str| std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    // The samples: `$ kubectl misschedule what-if ...` and its output, up to the end of the block.
    for file in ["docs/what-if.md", "README.md"] {
        let text = read(file);
        let (_, sample) =
            text.split_once("$ kubectl misschedule what-if").unwrap_or_else(|| panic!("a sample in {file}"));
        let (command, rest) = sample.split_once('\n').unwrap();
        let shown = rest.split("```").next().unwrap();
        let args: Vec<&str> = ["what-if"].into_iter().chain(command.split_whitespace()).collect();
        let out = plugin(&args);
        assert!(out.status.success(), "{command}");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), shown, "{file} shows another output for {command}");
    }
    let doc = read("docs/what-if.md");
    // Every offline command it suggests runs.
    let offline: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("kubectl misschedule what-if") && l.contains("--snapshot examples/"))
        .collect();
    assert!(offline.len() >= 3, "{offline:?}");
    for line in offline {
        let args: Vec<&str> = line.split_whitespace().skip(2).collect();
        let out = plugin(&args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)) && !out.stdout.is_empty(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
