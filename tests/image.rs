//! The image's build, without a container engine: assemble exactly what the Dockerfile's
//! build stage copies (minus `.dockerignore`) and build it as the Dockerfile does, offline
//! and with the lock file, so a context that cannot build fails here first.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The build stage's `COPY SOURCE... DEST` lines (not `--from`), relative to its WORKDIR.
fn build_stage_copies(dockerfile: &str) -> Vec<(Vec<String>, String)> {
    let mut stages = dockerfile.split("\nFROM ").skip(1);
    let build = stages.next().expect("a build stage");
    build
        .lines()
        .filter_map(|line| line.strip_prefix("COPY "))
        .filter(|args| !args.starts_with("--"))
        .map(|args| {
            let mut words: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
            let dest = words.pop().expect("a destination");
            (words, dest)
        })
        .collect()
}

/// `.dockerignore` as plain paths; anything fancier would need Docker's own matcher, so it
/// is refused rather than half-understood.
fn ignored(dockerignore: &str) -> Vec<String> {
    dockerignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .inspect(|l| assert!(!l.contains(['*', '?', '!', '[']), "tests/image.rs reads plain paths only: {l}"))
        .map(|l| l.trim_end_matches('/').to_owned())
        .collect()
}

fn copy(from: &Path, to: &Path, relative: &Path, ignore: &[String]) {
    let name = relative.to_string_lossy();
    if ignore.iter().any(|i| name == *i || name.starts_with(&format!("{i}/"))) {
        return;
    }
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy(&entry.path(), &to.join(entry.file_name()), &relative.join(entry.file_name()), ignore);
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("COPY {}: {e}", from.display()));
    }
}

#[test]
fn the_dockerfile_copies_and_labels_what_a_release_needs() {
    let dockerfile = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    let copied: Vec<String> = build_stage_copies(&dockerfile).into_iter().flat_map(|(sources, _)| sources).collect();
    for needed in ["Cargo.toml", "Cargo.lock", "build.rs", "src", "benches"] {
        assert!(copied.iter().any(|c| c == needed), "the build stage does not copy {needed}: {copied:?}");
    }
    assert!(dockerfile.contains("cargo build --release --locked --bins"));
    for binary in ["misschedule-exporter", "kubectl-misschedule"] {
        let line = format!("COPY --from=build /src/target/release/{binary} /usr/local/bin/{binary}");
        assert!(dockerfile.contains(&line), "the image lacks {binary}");
    }
    for label in ["source", "version", "revision"] {
        assert!(dockerfile.contains(&format!("org.opencontainers.image.{label}=")), "no OCI {label} label");
    }
    assert!(
        dockerfile.contains("MISSCHEDULE_REVISION=\"$REVISION\""),
        "build_info's revision comes from the build arg"
    );
}

#[test]
#[ignore = "builds the crate a second time: scripts/test.sh runs it"]
fn the_docker_context_builds_offline() {
    let root = Path::new(ROOT);
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let ignore = ignored(&std::fs::read_to_string(root.join(".dockerignore")).unwrap_or_default());
    let context = std::env::temp_dir().join(format!("misschedule-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&context);
    for (sources, dest) in build_stage_copies(&dockerfile) {
        // `COPY a b ./` puts each into the directory; `COPY src ./src` names the copy.
        let into_dir = dest.ends_with('/') || sources.len() > 1;
        for source in sources {
            let to: PathBuf = if into_dir { context.join(&dest).join(&source) } else { context.join(&dest) };
            copy(&root.join(&source), &to, Path::new(&source), &ignore);
        }
    }
    // Its own target directory: the outer `cargo test` holds the lock on ours.
    let target = root.join("target/image-context");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--locked", "--offline", "--bins"])
        .env("CARGO_TARGET_DIR", &target)
        .env("MISSCHEDULE_REVISION", "0123456789ab")
        .current_dir(&context)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&context);
    assert!(out.status.success(), "the Docker context does not build:\n{}", String::from_utf8_lossy(&out.stderr));
    for binary in ["misschedule-exporter", "kubectl-misschedule"] {
        let version = Command::new(target.join("debug").join(binary)).arg("--version").output().unwrap();
        assert!(version.status.success(), "{binary} --version");
    }
}
