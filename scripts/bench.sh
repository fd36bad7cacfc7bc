#!/usr/bin/env bash
# Runs the scale benchmark and writes docs/benchmarks.md from its output.
#   scripts/bench.sh            full scale: 5,000 nodes, 40 DaemonSets, 200,000 pods (~2 min)
#   scripts/bench.sh --smoke    small and quick (what CI runs; does not touch docs/)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--smoke" ]; then
  exec cargo bench --locked --bench scale -- --smoke
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo bench --locked --bench scale -- "$@" | tee "$out"
table=$(sed -n '/^Scale:/,$p' "$out")

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
cat > docs/benchmarks.md <<EOD
# Benchmarks

Written by \`scripts/bench.sh\`; do not edit by hand. Reproduce with:

\`\`\`sh
scripts/bench.sh
\`\`\`

- Date: $(date -u +%Y-%m-%d)
- Machine: $(nproc) cores ($cpu), $(free -g | awk '/Mem:/ {print $2}') GiB memory
- Exporter: $(git describe --always --dirty 2>/dev/null || echo unknown), $(rustc --version)
- Allocator: jemalloc (tikv-jemallocator), as in the exporter binary

## In-process, at the issue's scale
A synthetic cluster shaped like the DaemonSet controller's objects (\`benches/synth\`):
every DaemonSet runs on every node, each reaching it a different way (nodeSelectors,
NFD labels, multi-term, NotIn and Exists affinities, tolerations), and 1% of nodes
carry the cluster-autoscaler's drain taint.

- Cold start: the initial lists are encoded as the API server would send them
  (untimed). Decoding them into the shapes the watcher uses and applying them is
  timed, on one thread.
- RSS: VmRSS from /proc, read after the sync, with everything the process holds.
- Scrapes: 8 client threads GET /metrics over loopback for 10 s.
- Events: pre-built watch events (80% pod status updates, 10% node heartbeats,
  1% drain taints added or removed, 9% pods deleted and recreated) applied through
  \`Index::apply\`, the watcher's own path. This includes dropping each decoded
  object.

$table
EOD
echo "wrote docs/benchmarks.md"
