//! The krew manifest (plugins/misschedule.yaml) and the archive scripts/krew-manifest.sh packs:
//! the manifest passes krew's own checks (sigs.k8s.io/krew pkg/index/validation), names this
//! version and the release download, and installing the archive as krew does (verify the digest,
//! unpack, copy `files`, link `bin`) gives a plugin that runs.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

// krew's index.Plugin, v1alpha2; unknown fields are refused so a typo cannot pass unseen.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Plugin {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Spec {
    version: String,
    homepage: String,
    short_description: String,
    description: String,
    caveats: Option<String>,
    platforms: Vec<Platform>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Platform {
    selector: Selector,
    uri: String,
    sha256: String,
    files: Vec<FileOperation>,
    bin: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Selector {
    match_labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOperation {
    from: String,
    to: String,
}

const PLUGIN_BINARY: &str = "kubectl-misschedule";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn parse(path: &Path) -> Plugin {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not a krew Plugin: {e}", path.display()))
}

/// krew's ValidatePlugin, plus what krew-index expects of a binary plugin.
fn krew_problems(file_stem: &str, plugin: &Plugin) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_owned());
        }
    };
    let spec = &plugin.spec;
    check(plugin.api_version == "krew.googlecontainertools.github.com/v1alpha2", "apiVersion");
    check(plugin.kind == "Plugin", "kind");
    check(plugin.metadata.name == file_stem, "metadata.name matches the file name");
    check(plugin.metadata.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "safe name");
    check(!spec.short_description.is_empty(), "shortDescription");
    check(!spec.description.is_empty(), "description");
    check(spec.homepage.starts_with("https://"), "homepage is https");
    check(is_semver_with_v(&spec.version), "version is v-prefixed semver");
    check(!spec.platforms.is_empty(), "a platform");
    // krew picks the first platform that matches: two with one selector make the second dead.
    let selectors: std::collections::BTreeSet<_> = spec.platforms.iter().map(|p| &p.selector.match_labels).collect();
    check(selectors.len() == spec.platforms.len(), "platform selectors are distinct");
    for platform in &spec.platforms {
        let labels = &platform.selector.match_labels;
        check(!labels.is_empty(), "a non-empty selector");
        check(labels.keys().all(|k| k == "os" || k == "arch"), "selector keys are os and arch");
        check(platform.uri.starts_with("https://"), "uri is https");
        check(
            platform.sha256.len() == 64
                && platform.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "sha256",
        );
        check(!platform.bin.is_empty(), "bin");
        check(!platform.files.is_empty(), "file operations");
        check(platform.files.iter().any(|f| f.from == platform.bin), "files copy bin");
        check(platform.files.iter().any(|f| f.from == "LICENSE"), "files copy LICENSE");
    }
    problems
}

fn is_semver_with_v(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else { return false };
    let core = rest.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn expected_uri(platform: &Platform) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let labels = &platform.selector.match_labels;
    format!(
        "{}/releases/download/v{version}/{PLUGIN_BINARY}_v{version}_{}_{}.tar.gz",
        env!("CARGO_PKG_REPOSITORY"),
        labels.get("os").map_or("", String::as_str),
        labels.get("arch").map_or("", String::as_str),
    )
}

#[test]
fn the_committed_manifest_passes_krews_checks_and_names_this_release() {
    let plugin = parse(&repo().join("plugins/misschedule.yaml"));
    assert_eq!(krew_problems("misschedule", &plugin), Vec::<String>::new());
    assert_eq!(plugin.spec.version, format!("v{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(plugin.spec.homepage, env!("CARGO_PKG_REPOSITORY"));
    for platform in &plugin.spec.platforms {
        assert_eq!(platform.bin, PLUGIN_BINARY);
        assert_eq!(platform.uri, expected_uri(platform));
    }
    // Users read the caveats before installing: both ways of running need their own RBAC.
    let caveats = plugin.spec.caveats.as_deref().unwrap_or_default();
    assert!(caveats.contains("controllerrevisions") && caveats.contains("services/proxy"), "{caveats}");
}

#[test]
fn the_checks_catch_a_broken_manifest() {
    let broken = r#"
apiVersion: krew.googlecontainertools.github.com/v1alpha1
kind: Plugin
metadata: {name: other}
spec:
  version: "0.1"
  homepage: http://example.com
  shortDescription: ""
  description: d
  caveats: c
  platforms:
  - selector: {matchLabels: {distro: debian}}
    uri: http://example.com/a.tar.gz
    sha256: ABC
    files: [{from: README, to: .}]
    bin: kubectl-misschedule
"#;
    let plugin: Plugin = serde_saphyr::from_str(broken).expect("parses");
    let problems = krew_problems("misschedule", &plugin);
    for expected in [
        "apiVersion",
        "metadata.name matches the file name",
        "shortDescription",
        "homepage is https",
        "version is v-prefixed semver",
        "selector keys are os and arch",
        "uri is https",
        "sha256",
        "files copy bin",
        "files copy LICENSE",
    ] {
        assert!(problems.iter().any(|p| p == expected), "missed {expected}: {problems:?}");
    }
    let typo = broken.replace("caveats:", "caveat:");
    assert!(serde_saphyr::from_str::<Plugin>(&typo).is_err(), "an unknown field is refused");
}

/// `scripts/krew-manifest.sh ARGS`, its exit status.
fn script(args: &[&str]) -> std::process::Output {
    Command::new("bash").arg(repo().join("scripts/krew-manifest.sh")).args(args).output().expect("run the script")
}

#[test]
fn one_manifest_holds_every_platform_it_is_given() {
    let tmp = std::env::temp_dir().join(format!("misschedule-krew-platforms-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let out = tmp.to_str().unwrap();
    let binary = env!("CARGO_BIN_EXE_kubectl-misschedule");
    // Each release runner packs its own build; here the host's binary stands in for each.
    let mut archives = Vec::new();
    for platform in ["linux/amd64", "linux/arm64", "darwin/arm64"] {
        let packed = script(&["pack", "--binary", binary, "--platform", platform, "--out", out]);
        assert!(packed.status.success(), "{}", String::from_utf8_lossy(&packed.stderr));
        archives.push(String::from_utf8(packed.stdout).unwrap().trim().to_owned());
    }
    let manifest = tmp.join("misschedule.yaml");
    let mut args = vec!["manifest", "--manifest", manifest.to_str().unwrap()];
    args.extend(archives.iter().map(String::as_str));
    let written = script(&args);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let plugin = parse(&manifest);
    assert_eq!(krew_problems("misschedule", &plugin), Vec::<String>::new());
    let platforms: Vec<(String, String)> = plugin
        .spec
        .platforms
        .iter()
        .map(|p| (p.selector.match_labels["os"].clone(), p.selector.match_labels["arch"].clone()))
        .collect();
    let expected =
        [("linux", "amd64"), ("linux", "arm64"), ("darwin", "arm64")].map(|(o, a)| (o.to_owned(), a.to_owned()));
    assert_eq!(platforms, expected);
    for (platform, archive) in plugin.spec.platforms.iter().zip(&archives) {
        assert_eq!(platform.uri, expected_uri(platform));
        assert!(platform.uri.ends_with(Path::new(archive).file_name().unwrap().to_str().unwrap()));
        assert_eq!(platform.sha256, sha256_of(Path::new(archive)));
    }
    // Refused: a platform twice, another version's archive, a platform krew has no name for.
    let mut twice = args.clone();
    twice.push(&archives[0]);
    assert!(!script(&twice).status.success(), "a platform given twice");
    let stale = tmp.join("kubectl-misschedule_v0.0.1_linux_amd64.tar.gz");
    std::fs::copy(&archives[0], &stale).unwrap();
    let refused = script(&["manifest", "--manifest", manifest.to_str().unwrap(), stale.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("this version's"), "{refused:?}");
    assert!(!script(&["pack", "--binary", binary, "--platform", "plan9/386", "--out", out]).status.success());
    let _ = std::fs::remove_dir_all(&tmp);
}

fn pack(out: &Path) -> (PathBuf, Plugin) {
    let manifest = out.join("misschedule.yaml");
    let status = Command::new("bash")
        .arg(repo().join("scripts/krew-manifest.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_kubectl-misschedule"), "--out"])
        .arg(out)
        .arg("--manifest")
        .arg(&manifest)
        .status()
        .expect("run scripts/krew-manifest.sh");
    assert!(status.success(), "krew-manifest.sh failed: {status}");
    let plugin = parse(&manifest);
    (manifest, plugin)
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("sha256sum");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned()
}

#[test]
fn the_packed_archive_installs_as_krew_installs_it() {
    let tmp = std::env::temp_dir().join(format!("misschedule-krew-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (manifest, plugin) = pack(&tmp.join("first"));
    assert_eq!(krew_problems("misschedule", &plugin), Vec::<String>::new());
    let [platform] = plugin.spec.platforms.as_slice() else { panic!("one platform: the host's") };
    let archive_name = platform.uri.rsplit('/').next().unwrap_or_default();
    let archive = tmp.join("first").join(archive_name);

    // The committed manifest is this script's output; only the digest belongs to the release build.
    let committed = std::fs::read_to_string(repo().join("plugins/misschedule.yaml")).expect("committed manifest");
    let written = std::fs::read_to_string(&manifest).expect("written manifest");
    let without_digest =
        |text: &str| text.lines().filter(|l| !l.trim_start().starts_with("sha256:")).collect::<Vec<_>>().join("\n");
    assert_eq!(
        without_digest(&written),
        without_digest(&committed),
        "plugins/misschedule.yaml is stale: re-run scripts/krew-manifest.sh"
    );

    // krew refuses an archive whose digest differs; the same binary packs to the same bytes.
    assert_eq!(sha256_of(&archive), platform.sha256);
    let sidecar = std::fs::read_to_string(archive.with_file_name(format!("{archive_name}.sha256"))).expect("sidecar");
    assert_eq!(sidecar.trim(), format!("{}  {archive_name}", platform.sha256));
    let (_, again) = pack(&tmp.join("second"));
    assert_eq!(again.spec.platforms[0].sha256, platform.sha256, "packing is reproducible");

    // Unpack, apply the file operations, link bin the way krew links it into ~/.krew/bin.
    let unpacked = tmp.join("unpacked");
    let install = tmp.join("store/misschedule").join(&plugin.spec.version);
    let bin_dir = tmp.join("bin");
    for dir in [&unpacked, &install, &bin_dir] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let status = Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&unpacked).status().expect("tar");
    assert!(status.success());
    for op in &platform.files {
        let to = install.join(&op.to).join(&op.from);
        std::fs::copy(unpacked.join(&op.from), &to).unwrap_or_else(|e| panic!("copy {}: {e}", op.from));
    }
    let bin = install.join(&platform.bin);
    let mode = std::fs::metadata(&bin).expect("bin installed").permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "bin is executable by all: {mode:o}");
    symlink(&bin, bin_dir.join(PLUGIN_BINARY)).expect("link");

    // kubectl finds plugins on PATH by this name; run it as kubectl would.
    let out =
        Command::new(PLUGIN_BINARY).arg("--help").env("PATH", &bin_dir).output().expect("the installed plugin runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--from-exporter"));
    let _ = std::fs::remove_dir_all(&tmp);
}
