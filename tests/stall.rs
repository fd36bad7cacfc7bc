//! A stream that goes silent on the real API server. The lab's kube-apiserver (1.37) sends
//! every watch a bookmark about each minute, so a watch whose connection stays open but
//! passes nothing (a proxy that freezes, as a broken middlebox does) is declared stalled
//! within the 90 s limit, not at the watch's 290 s timeout. (A file of its own: its lab
//! idles for minutes, and the fault tests' labs run side by side.) The lab's API server is
//! started with --watch-cache (the default): bookmarks come from the watch cache.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use support::cluster::*;
use support::proxy::Proxy;

fn stalls(exporter: &Exporter) -> BTreeMap<String, f64> {
    exporter.per_resource("misschedule_exporter_watch_stalls_total", "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the lab: scripts/test.sh runs it"]
async fn a_frozen_stream_is_caught_through_the_real_api_servers_bookmarks() {
    let cp = ControlPlane::start("stall");
    let admin = Cluster::connect(cp.get("ADMIN_KUBECONFIG")).await;
    agent_scene(&admin, &["n1", "n2"]).await;
    grant_exporter(&admin, &READ).await;
    let (proxy, kubeconfig) = Proxy::for_exporter(&cp).await;
    // The defaults: --watch-stall-seconds 90, --watch-timeout-seconds 290.
    let exporter = Exporter::start_with(&kubeconfig, &[], &cp.dir.join("exporter.log"));
    wait_until("ready", Duration::from_secs(30), || exporter.ready()).await;
    expect(&admin, &exporter, "watching", BTreeSet::new()).await;
    // Long enough for every watch to have had a periodic bookmark well before its deadline:
    // on a fresh API server the first periodic one came about 2 minutes after the watch
    // started (each minute after that), and the exporter applies the short limit only to a
    // watch that has seen one.
    tokio::time::sleep(Duration::from_secs(150)).await;
    let before = stalls(&exporter);

    proxy.freeze();
    let frozen = std::time::Instant::now();
    let detected = loop {
        let now = stalls(&exporter);
        if now.iter().all(|(resource, n)| *n > before[resource]) {
            break frozen.elapsed();
        }
        assert!(frozen.elapsed() < Duration::from_secs(200), "not every watch stalled: before {before:?}, now {now:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("MEASURED a frozen stream on the real API server: every watch stalled {detected:?} after the freeze");
    assert!(!exporter.ready(), "stalled watches leave the exporter unready");
    // Within the 90 s limit (and some slack for the scrape); without periodic bookmarks the
    // limit would be the call's 290 s timeout plus 5 s.
    assert!(detected <= Duration::from_secs(100), "stalls took {detected:?}: the bookmarks were not used");

    proxy.thaw();
    // Back once the proxy recovers: after the relist, the new watches' first bookmarks prove
    // them. Of a resource nobody writes (DaemonSets here) the server bookmarks a watch only
    // once its watch cache learns a newer version, so the watch nudges it (a consistent read
    // of one object) within a quarter of the limit; without that it could hear nothing for
    // 90 s, be declared stalled again, and relist again and again (seen: not ready 400 s
    // after the thaw). The stall backoff, a nudge and the next minute's bookmark: 200 s.
    let thawed = std::time::Instant::now();
    while !exporter.ready() {
        if thawed.elapsed() > Duration::from_secs(200) {
            let watch_lines: Vec<String> = exporter
                .metrics()
                .lines()
                .filter(|l| l.starts_with("misschedule_exporter_watch_") && !l.ends_with(" 0"))
                .map(str::to_owned)
                .collect();
            panic!("not ready 200 s after the thaw: {:?}\n{}", exporter.get("/readyz"), watch_lines.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("MEASURED ready again {:?} after the thaw", thawed.elapsed());
    expect(&admin, &exporter, "watching again", BTreeSet::new()).await;
}
