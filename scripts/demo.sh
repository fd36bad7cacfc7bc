#!/usr/bin/env bash
# Run the exporter on a bundled snapshot (no cluster needed): print `explain`,
# then serve /metrics and show the exporter's series. Pass --serve to keep serving.
#   SNAPSHOT=examples/taint-added.json scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

snapshot=${SNAPSHOT:-examples/cluster-autoscaler-drain.json}
listen=${LISTEN:-127.0.0.1:18493}
cargo build --release --locked --quiet
# Where cargo put it, as cargo says: CARGO_TARGET_DIR or a config's build.target-dir moves it
# out of target/.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin=$target_dir/release/misschedule-exporter
[ -x "$bin" ] || { echo "demo: no exporter at $bin after the build; run 'cargo build --release' and look for it" >&2; exit 1; }

echo "== misschedule-exporter explain --snapshot $snapshot -o wide"
"$bin" explain --snapshot "$snapshot" -o wide

if [ "${1:-}" = "--serve" ]; then
  echo "== serving $snapshot on http://$listen/metrics (Ctrl-C to stop)"
  exec "$bin" --snapshot "$snapshot" --listen "$listen"
fi

"$bin" --snapshot "$snapshot" --listen "$listen" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://$listen/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
echo
echo "== GET http://$listen/metrics (daemonset_* series)"
curl -sf "http://$listen/metrics" | grep '^daemonset_misscheduled'
