#!/usr/bin/env bash
# Re-record examples/ on the lab, with the lab's kubectl and --show-managed-fields, so that
# every manager in them is known:
#   - the scenes whose pods stay misscheduled (cluster-autoscaler-drain, taint-added,
#     toleration-removed), from the scenario suite (tests/controlplane.rs);
#   - the scenes where the controller deletes the pods (label-drift, nfd-label-removed,
#     noexecute-terminating, daemonset-selector-changed, affinity-changed), from
#     tests/terminating.rs, whose nodes take the whole grace period to finish a delete, so
#     that the snapshot catches the pods terminating. (Where a kubelet finishes the delete at
#     once, a snapshot shows nothing misscheduled: what lasts is a lost node, which only a
#     watching exporter knows.)
# tests/examples.rs checks every recording against the controller's status.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/lab/lab.sh build nfd
export PATH="$(bash tests/lab/lab.sh bin):$PATH" RECORD_SNAPSHOTS="$PWD/examples"
cargo test --locked --test controlplane --test terminating -- --include-ignored --nocapture
