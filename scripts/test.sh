#!/usr/bin/env bash
# Everything the test suite needs, then the suite. Safe to run on a fresh Debian machine.
#   - Debian packages for the control plane (etcd, Go, rsync, openssl, curl), and
#     prometheus + prometheus-alertmanager (promtool, amtool, a real Prometheus and Alertmanager),
#     jsonnet (renders the mixin), chromium (headless: the landing page in a real browser),
#     kubectl when the machine has none (Debian's kubernetes-client)
#   - PyPI helm-python-sdk 0.2.2 and kubernetes-validate for the chart tests
#   - kube-apiserver and kube-controller-manager v1.20.2, built once from Debian's
#     source package and cached under ~/.cache/misschedule-exporter (6-10 min the first time)
#   - cargo test, both tiers: the fast one (pure and in-process; plain `cargo test` runs only
#     it) and the slow one (control plane, Prometheus, Alertmanager, promtool, jsonnet, the chart, chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
# promtool, amtool and Alertmanager for the alerting tests; a real Prometheus for the dashboard test;
# jsonnet for the mixin; chromium to load the landing page.
missing=()
for pkg in prometheus prometheus-alertmanager jsonnet chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Real kubectl drives the control-plane tests and finds the plugin; Debian's is kubernetes-client.
command -v kubectl >/dev/null || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Helm v4's SDK (renders and lints the chart; no helm binary) and kubernetes-validate.
python3 -c 'import helm_python, kubernetes_validate' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'helm-python-sdk==0.2.2' 'kubernetes-validate==1.37.0'
bash tests/controlplane/controlplane.sh build
echo "[test] control plane binaries ready after $((SECONDS - started))s"
# A one-shot run gains nothing from incremental state, which would double the disk the build takes.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
cargo test --locked -- --include-ignored
# A short run of the scale benchmark: it checks its results at small size, not the targets.
bash scripts/bench.sh --smoke
echo "[test] done in $((SECONDS - started))s"
