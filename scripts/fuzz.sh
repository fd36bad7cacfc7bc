#!/usr/bin/env bash
# Bounded fuzzing of the snapshot parser (through the index and /metrics) and of the
# selector/toleration rules, with libFuzzer and AddressSanitizer, which need the nightly
# toolchain and cargo-fuzz: both are installed if missing. scripts/test.sh (and so CI) runs it.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
# The build goes to the lab's cache, beside the Go builds, so that it survives a fresh clone:
# 10 minutes on 2 cores the first time (most of it the exporter and k8s-openapi, instrumented),
# about 30 seconds after that.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz --version 0.13.2
target_dir=${FUZZ_TARGET_DIR:-$HOME/.cache/misschedule-exporter/fuzz-target}
# The snapshot corpus starts from the recorded examples, so mutations begin from real objects.
mkdir -p fuzz/corpus/snapshot
cp examples/*.json examples/*.yaml fuzz/corpus/snapshot/
for target in snapshot placement; do
  echo "[fuzz] $target for ${seconds}s"
  log=fuzz/$target.log
  if ! cargo +nightly fuzz run --target-dir "$target_dir" "$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    grep -E "panicked|ERROR|SUMMARY" "$log" | head -20
    echo "[fuzz] $target FAILED (log: $log); the crashing input is under fuzz/artifacts/$target"
    exit 1
  fi
  grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$log"
done
echo "[fuzz] no crashes"
