#!/usr/bin/env bash
# Packs kubectl-misschedule for krew and writes its plugin manifest.
#   scripts/krew-manifest.sh [--binary PATH] [--out DIR] [--manifest FILE]
# Defaults: the release build (built if needed), target/dist, plugins/misschedule.yaml.
#
# The archive holds the binary and LICENSE, packed with sorted names, fixed times and owners
# and a gzip header without name or time, so the same binary always gives the same digest.
# A release: run this on the release build for each platform, upload target/dist/*.tar.gz to the
# URL the manifest names, and commit the manifest (or send it to krew-index). The version and the
# download location come from Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 [--binary PATH] [--out DIR] [--manifest FILE]" >&2; exit 2; }
binary="" out=target/dist manifest=plugins/misschedule.yaml
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
    --binary) binary=$2 ;;
    --out) out=$2 ;;
    --manifest) manifest=$2 ;;
    *) usage ;;
  esac
  shift 2
done

# [package] comes first in Cargo.toml, so the first match is the package's own.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] && [ -n "$repository" ] || { echo "error: Cargo.toml has no package version or repository" >&2; exit 1; }

if [ -z "$binary" ]; then
  cargo build --release --locked --bin kubectl-misschedule
  binary=target/release/kubectl-misschedule
fi
[ -x "$binary" ] || { echo "error: $binary is not an executable" >&2; exit 1; }

# krew's platform labels are Go's GOOS/GOARCH.
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "error: no krew arch name for $(uname -m)" >&2; exit 1 ;;
esac

archive=kubectl-misschedule_v${version}_${os}_${arch}.tar.gz
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
install -m 0755 "$binary" "$staging/kubectl-misschedule"
install -m 0644 LICENSE "$staging/LICENSE"
mkdir -p "$out" "$(dirname "$manifest")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$staging" -cf - kubectl-misschedule LICENSE |
  gzip -9n >"$out/$archive"
sha256=$(sha256sum "$out/$archive" | cut -d' ' -f1)
echo "$sha256  $archive" >"$out/$archive.sha256"

cat >"$manifest" <<EOF
# Written by scripts/krew-manifest.sh from Cargo.toml and the archive it packed.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: misschedule
spec:
  version: v$version
  homepage: $repository
  shortDescription: Explain why DaemonSet pods are misscheduled
  description: |
    Lists the DaemonSet pods that the DaemonSet controller counts as misscheduled
    (KubeDaemonSetMisScheduled), each with its node, the reason (autoscaler drain, a
    changed DaemonSet, a node-feature-discovery label, an added taint, label drift), the
    label or taint behind it, who changed it (the field manager) and a suggested fix.
    Live from the API server, from a snapshot, or from a running misschedule-exporter
    with --from-exporter. "kubectl misschedule what-if label|taint|apply -f" says which
    daemon pods a change would delete or strand, before you make it.
  caveats: |
    Live, it needs get and list on nodes, daemonsets, controllerrevisions and pods.
    With --from-exporter NS/SERVICE it needs only get on services and services/proxy.
  platforms:
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $repository/releases/download/v$version/$archive
    sha256: $sha256
    files:
    - from: kubectl-misschedule
      to: .
    - from: LICENSE
      to: .
    bin: kubectl-misschedule
EOF
echo "[krew] $out/$archive ($sha256) and $manifest"
