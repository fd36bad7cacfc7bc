#!/usr/bin/env bash
# Bounded fuzzing of the snapshot parser (through the index and /metrics) and of the
# selector/toleration rules. Not part of CI: it needs the nightly toolchain and cargo-fuzz.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
# The snapshot corpus starts from the recorded examples, so mutations begin from real objects.
mkdir -p fuzz/corpus/snapshot
cp examples/*.json examples/*.yaml fuzz/corpus/snapshot/
for target in snapshot placement; do
  echo "[fuzz] $target for ${seconds}s"
  log=fuzz/$target.log
  if ! cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    grep -E "panicked|ERROR|SUMMARY" "$log" | head -20
    echo "[fuzz] $target FAILED (log: $log); the crashing input is under fuzz/artifacts/$target"
    exit 1
  fi
  grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$log"
done
echo "[fuzz] no crashes"
