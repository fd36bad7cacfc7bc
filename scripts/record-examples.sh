#!/usr/bin/env bash
# Re-record examples/ from the scenes of the lab's scenario suite (tests/controlplane.rs), with
# the lab's kubectl and --show-managed-fields, so that every manager in them is known.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/lab/lab.sh build nfd
PATH="$(bash tests/lab/lab.sh bin):$PATH" RECORD_SNAPSHOTS="$PWD/examples" \
  cargo test --locked --test controlplane -- --include-ignored --nocapture
