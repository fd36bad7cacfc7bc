#!/usr/bin/env bash
# Re-record examples/ from the scenes of the lab's scenario suite (tests/controlplane.rs), with
# the lab's kubectl and --show-managed-fields, so that every manager in them is known.
# It records the scenes whose pods stay misscheduled (cluster-autoscaler-drain, taint-added,
# toleration-removed). The others (label-drift, nfd-label-removed, noexecute-terminating,
# daemonset-selector-changed, affinity-changed) were recorded on the old control plane, which
# had no kubelet: there a deleted pod stayed terminating. On the lab, as on a real cluster,
# the controller deletes those pods and KWOK finishes the delete within a second, so a
# snapshot shows nothing misscheduled; what lasts is a lost node, which only a watching
# exporter knows.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/lab/lab.sh build nfd
PATH="$(bash tests/lab/lab.sh bin):$PATH" RECORD_SNAPSHOTS="$PWD/examples" \
  cargo test --locked --test controlplane -- --include-ignored --nocapture
