#!/usr/bin/env bash
# Everything the test suite needs, then the suite. Safe to run on a fresh Debian machine.
#   - Debian packages for the control plane (etcd, Go, rsync, openssl, curl)
#   - kube-apiserver and kube-controller-manager v1.20.2, built once from Debian's
#     source package and cached under ~/.cache/misschedule-exporter (6-10 min the first time)
#   - cargo test: unit, property, snapshot, CLI and real-control-plane tests
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
bash tests/controlplane/controlplane.sh build
echo "[test] control plane binaries ready after $((SECONDS - started))s"
cargo test --locked --all-targets
echo "[test] done in $((SECONDS - started))s"
