#!/usr/bin/env bash
# Everything the test suite needs, then the suite. Safe to run on a fresh Debian machine with Go.
#   - Debian packages: prometheus + prometheus-alertmanager (promtool, amtool, a real Prometheus
#     and Alertmanager), jsonnet (renders the mixin), chromium (headless: the landing page in a
#     real browser), openssl and curl (the lab), g++ (libFuzzer, built by the fuzz targets' check)
#   - PyPI helm-python-sdk 0.2.2 and kubernetes-validate for the chart tests
#   - the lab (tests/lab/lab.sh): Kubernetes, etcd, KWOK, nfd-master and kube-state-metrics,
#     built once from their Go modules and cached under ~/.cache/misschedule-exporter (7.5 to 9
#     min on 2 cores the first time); its kubectl goes first on PATH
#   - nightly Rust and cargo-fuzz for scripts/fuzz.sh, the last step (a minute per target)
#   - cargo test, both tiers, with --no-fail-fast so that one failure hides no other: the fast
#     one (pure and in-process; plain `cargo test` runs only it) and the slow one (the lab,
#     kubectl, Prometheus, Alertmanager, promtool, jsonnet, the chart, chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
# promtool, amtool and Alertmanager for the alerting tests; a real Prometheus for the dashboard test;
# jsonnet for the mixin; chromium to load the landing page; g++ for libFuzzer, which the fuzz
# targets' build compiles.
missing=()
for pkg in prometheus prometheus-alertmanager jsonnet chromium g++; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Helm v4's SDK (renders and lints the chart; no helm binary) and kubernetes-validate.
python3 -c 'import helm_python, kubernetes_validate' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'helm-python-sdk==0.2.2' 'kubernetes-validate==1.37.0'
bash tests/lab/lab.sh build nfd ksm
echo "[test] lab binaries ready after $((SECONDS - started))s"
# The lab's kubectl, of the lab's version, is the one the live tests and the plugin run.
PATH="$(bash tests/lab/lab.sh bin):$PATH"
export PATH
# A one-shot run gains nothing from incremental state, which would double the disk the build takes.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# Two test binaries spend minutes waiting with little to do: the stall test five minutes on a
# frozen stream with its lab idle, and the API-fault tests four (four at a time) on timed
# faults against the fake API server. They run beside the rest, one after the other (so that at most one
# extra job shares the two cores), each from its own binary, while cargo runs the others and
# skips their tests by exact name. Every test binary is built first.
cargo test --locked --no-run
test_binary() {
  cargo test --locked --no-run --test "$1" --message-format=json |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
stall_test=a_frozen_stream_is_caught_through_the_real_api_servers_bookmarks
stall_bin=$(test_binary stall)
faults_bin=$(test_binary apifaults)
skips=(--skip "$stall_test")
while read -r name; do skips+=(--skip "$name"); done < <("$faults_bin" --list | sed -n 's/: test$//p')
[ ${#skips[@]} -gt 2 ] || { echo "[test] tests/apifaults.rs lists no tests" >&2; exit 1; }
beside_log=$(mktemp)
(
  beside_status=0
  "$stall_bin" --include-ignored --exact "$stall_test" || beside_status=1
  # Its tests wait on timers, not the CPU: four at once.
  "$faults_bin" --include-ignored --test-threads 4 || beside_status=1
  exit $beside_status
) >"$beside_log" 2>&1 &
beside_pid=$!
trap 'pkill -P "$beside_pid" 2>/dev/null; kill "$beside_pid" 2>/dev/null || true' EXIT
status=0
cargo test --locked --no-fail-fast -- --include-ignored --exact "${skips[@]}" || status=$?
beside_status=0
wait "$beside_pid" || beside_status=$?
trap - EXIT
echo "[test] tests/stall.rs and tests/apifaults.rs, run beside the others (exit $beside_status):"
cat "$beside_log"
rm -f "$beside_log"
[ "$status" -eq 0 ] && [ "$beside_status" -eq 0 ] ||
  { echo "[test] FAILED (cargo test exit $status, stall and API faults exit $beside_status)" >&2; exit 1; }
# A short run of the benchmarks: it checks their answers at small size, not the targets.
bash scripts/bench.sh --smoke
# The fuzz targets are a crate of their own: checked here against the lock they ship with
# (cargo fuzz takes no --locked), so that a change to the model or the dependencies cannot
# leave them unbuildable unnoticed (the placement target was, until 2026-11-30); then fuzzed
# for a bounded time. The check's own build goes to the lab's cache, as the fuzz build does,
# so that a fresh clone re-checks only the two crates of ours (2 minutes of a CI run otherwise).
cargo check --locked --manifest-path fuzz/Cargo.toml --bins \
  --target-dir "${FUZZ_CHECK_TARGET_DIR:-$HOME/.cache/misschedule-exporter/fuzz-check}"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo "[test] done in $((SECONDS - started))s"
