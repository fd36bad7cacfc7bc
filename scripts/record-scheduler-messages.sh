#!/usr/bin/env bash
# Records what the real kube-scheduler says about daemon pods it cannot place, into
# tests/fixtures/scheduler-messages/VERSION.tsv (node, then the PodScheduled message), for
# the pure tests of the per-node detail (rules/uncovered.rs). One lab per version:
#   scripts/record-scheduler-messages.sh            # the lab's default (CI's) version
#   LAB_K8S_VERSION=1.33.5 scripts/record-scheduler-messages.sh
# Scenes, each on a 3-node lab: requests above one node's allocatable (cpu, memory, both),
# a host port two DaemonSets want, and a required pod anti-affinity.
set -euo pipefail
cd "$(dirname "$0")/.."
lab=tests/lab/lab.sh
bash "$lab" build >/dev/null
PATH="$(bash "$lab" bin):$PATH"
dir=$(mktemp -d)
trap 'bash "$lab" down "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
LAB_NODES=3 bash "$lab" up "$dir" >/dev/null
export KUBECONFIG="$dir/kubeconfig"
version=$(kubectl version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')

# lab-node-3 is small: 2 CPUs and 1 GiB (KWOK keeps a node's status as it is set).
kubectl patch node lab-node-3 --subresource=status --type=merge \
  -p '{"status":{"capacity":{"memory":"1Gi","cpu":"2","pods":"110"},"allocatable":{"memory":"1Gi","cpu":"2","pods":"110"}}}' >/dev/null
ds() { # name, extra pod spec (JSON object merged into the container / pod)
  cat <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: $1, namespace: default}
spec:
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec: $2
---
YAML
}
{
  ds memory '{"containers": [{"name": "c", "image": "x", "resources": {"requests": {"memory": "2Gi"}}}]}'
  ds cpu '{"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}]}'
  ds both '{"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}'
  ds port-a '{"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 9100, "hostPort": 9100}]}]}'
} | kubectl apply -f - >/dev/null
sleep 5
{
  ds port-b '{"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 9100, "hostPort": 9100}]}]}'
  ds shy '{"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "port-a"}}, "topologyKey": "kubernetes.io/hostname"}]}}, "containers": [{"name": "c", "image": "x"}]}'
} | kubectl apply -f - >/dev/null

out="tests/fixtures/scheduler-messages/${version#v}.tsv"
mkdir -p "$(dirname "$out")"
for _ in $(seq 1 60); do
  pending=$(kubectl get pods -o json | python3 -c '
import json, sys
pods = json.load(sys.stdin)["items"]
rows = []
for p in pods:
    for c in p.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
            terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            rows.append((p["metadata"]["labels"]["app"], terms[0]["matchFields"][0]["values"][0], c["message"]))
for app, node, message in sorted(rows):
    print(f"{app}\t{node}\t{message}")
')
  # memory, cpu and both on lab-node-3; port-b and shy on every node.
  if [ "$(printf '%s\n' "$pending" | grep -c .)" -ge 9 ]; then break; fi
  sleep 1
done
{
  printf '# kube-scheduler %s: DaemonSet, its pod'"'"'s target node, the PodScheduled=False message (recorded by scripts/record-scheduler-messages.sh)\n' "$version"
  printf '%s\n' "$pending"
} > "$out"
echo "wrote $out: $(grep -vc '^#' "$out") messages"
