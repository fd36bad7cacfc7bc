#!/usr/bin/env bash
# Everything the test suite needs, then the suite. Safe to run on a fresh Debian machine.
#   - Debian packages for the control plane (etcd, Go, rsync, openssl, curl), and
#     prometheus + prometheus-alertmanager (promtool, amtool, a real Prometheus and Alertmanager)
#   - kube-apiserver and kube-controller-manager v1.20.2, built once from Debian's
#     source package and cached under ~/.cache/misschedule-exporter (6-10 min the first time)
#   - cargo test: unit, property, snapshot, CLI and real-control-plane tests
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
# promtool, amtool and Alertmanager for the alerting tests; a real Prometheus for the dashboard test.
missing=()
for pkg in prometheus prometheus-alertmanager; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash tests/controlplane/controlplane.sh build
echo "[test] control plane binaries ready after $((SECONDS - started))s"
cargo test --locked --all-targets
echo "[test] done in $((SECONDS - started))s"
