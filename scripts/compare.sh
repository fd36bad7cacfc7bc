#!/usr/bin/env bash
# Re-record docs/compared.md: kube-state-metrics and kubernetes-mixin's DaemonSet alerts beside
# the exporter, on the lab (tests/compared.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/lab/lab.sh build nfd ksm
PATH="$(bash tests/lab/lab.sh bin):$PATH" COMPARED_MD="$PWD/docs/compared.md" \
  cargo test --locked --test compared -- --include-ignored --nocapture
