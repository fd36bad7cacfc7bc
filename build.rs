//! What `misschedule_exporter_build_info` says besides the version: the source revision
//! (`MISSCHEDULE_REVISION`, as the image build passes it, else git's, else `unknown`) and
//! the compiler (`rustc --version`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MISSCHEDULE_REVISION");
    let revision = std::env::var("MISSCHEDULE_REVISION").ok().filter(|r| !r.is_empty()).or_else(git_revision);
    println!("cargo:rustc-env=MISSCHEDULE_REVISION={}", revision.as_deref().unwrap_or("unknown"));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(Command::new(rustc).arg("--version"));
    // `rustc 1.95.0 (59807616e 2026-04-14)`: the label is the version.
    let version = version.as_deref().and_then(|v| v.split_whitespace().nth(1)).unwrap_or("unknown");
    println!("cargo:rustc-env=MISSCHEDULE_RUSTC={version}");
}

/// The checkout's commit, if this is a git checkout with git on PATH; rebuilt when it moves.
fn git_revision() -> Option<String> {
    let head = Path::new(".git/HEAD");
    if !head.exists() {
        return None;
    }
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Some(reference) = std::fs::read_to_string(head).ok()?.strip_prefix("ref: ") {
        let path = Path::new(".git").join(reference.trim());
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    output(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]))
}

fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok().filter(|o| o.status.success())?;
    String::from_utf8(out.stdout).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}
