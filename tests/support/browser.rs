//! Headless Chromium (Debian's `chromium`): the DOM a browser builds from a page, and a
//! screenshot for a person to look at.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Headless Chromium with a throwaway profile; the flags a container without a display needs.
pub fn chromium(args: &[&str]) -> Output {
    let profile = std::env::temp_dir().join(format!("misschedule-chromium-{}", std::process::id()));
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("chromium (Debian package `chromium`)");
    let _ = std::fs::remove_dir_all(profile);
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The DOM of `url` after the browser parsed it.
pub fn dom(url: &str) -> String {
    String::from_utf8(chromium(&["--dump-dom", url]).stdout).expect("UTF-8 DOM")
}

/// A 1400×900 screenshot of `url` in target/test-artifacts/`name` (not committed).
pub fn screenshot(url: &str, name: &str) -> PathBuf {
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = artifacts.join(name);
    let _ = std::fs::remove_file(&png);
    chromium(&["--window-size=1400,900", "--hide-scrollbars", &format!("--screenshot={}", png.display()), url]);
    let image = std::fs::read(&png).expect("the screenshot");
    assert!(image.starts_with(b"\x89PNG"), "a PNG");
    println!("screenshot: {} ({} bytes)", png.display(), image.len());
    png
}
