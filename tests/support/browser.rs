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

/// How wide the page at `url` lays out in a window `width` px wide, and the window's inner
/// width: a copy of the page (it is self-contained) with a script that measures it, since
/// the page itself carries none.
pub fn scroll_width(url: &str, width: u32) -> (u64, u64) {
    let page = page_text(url);
    let probe = "<script>document.body.setAttribute('data-width', \
                 document.documentElement.scrollWidth + ' ' + document.documentElement.clientWidth)</script></body>";
    let file = std::env::temp_dir().join(format!("misschedule-page-{}-{width}.html", std::process::id()));
    std::fs::write(&file, page.replace("</body>", probe)).unwrap();
    let dom = String::from_utf8(
        chromium(&[&format!("--window-size={width},900"), "--dump-dom", &format!("file://{}", file.display())]).stdout,
    )
    .unwrap();
    let _ = std::fs::remove_file(&file);
    let measured = dom.split("data-width=\"").nth(1).and_then(|rest| rest.split('"').next()).expect("the probe ran");
    let (page, window) = measured.split_once(' ').unwrap();
    (page.parse().unwrap(), window.parse().unwrap())
}

/// The body of `url` (plain HTTP on loopback).
fn page_text(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let port: u16 = host.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).expect("a port");
    super::http::get(port, &path).expect("the page").1
}

/// The DOM of `url` after the browser parsed it.
pub fn dom(url: &str) -> String {
    String::from_utf8(chromium(&["--dump-dom", url]).stdout).expect("UTF-8 DOM")
}

/// A 1400×900 screenshot of `url` in target/test-artifacts/`name` (not committed).
pub fn screenshot(url: &str, name: &str) -> PathBuf {
    screenshot_at(url, name, 1400)
}

/// A screenshot `width` px wide, scrollbars shown: a horizontal one would be seen.
pub fn screenshot_at(url: &str, name: &str, width: u32) -> PathBuf {
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = artifacts.join(name);
    let _ = std::fs::remove_file(&png);
    chromium(&[&format!("--window-size={width},900"), &format!("--screenshot={}", png.display()), url]);
    let image = std::fs::read(&png).expect("the screenshot");
    assert!(image.starts_with(b"\x89PNG"), "a PNG");
    println!("screenshot: {} ({} bytes)", png.display(), image.len());
    png
}
