#!/usr/bin/env bash
# Re-record examples/ from the scenes of the real-control-plane suite, with kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v kubectl >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null
fi
bash tests/controlplane/controlplane.sh build
RECORD_SNAPSHOTS="$PWD/examples" cargo test --locked --test controlplane -- --nocapture
