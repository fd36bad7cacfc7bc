#!/usr/bin/env bash
# Packs kubectl-misschedule for krew and writes its plugin manifest, one platform per archive.
#
#   scripts/krew-manifest.sh pack [--binary PATH] [--platform OS/ARCH] [--out DIR]
#       packs one archive, kubectl-misschedule_v<version>_<os>_<arch>.tar.gz, into DIR
#       (default: the host's release build and platform, target/dist)
#   scripts/krew-manifest.sh manifest [--manifest FILE] ARCHIVE...
#       writes one manifest with a platform entry per archive given (os and arch read from
#       each archive's name), default plugins/misschedule.yaml
#   scripts/krew-manifest.sh [--binary PATH] [--out DIR] [--manifest FILE]
#       both, for the host alone
#
# A release packs each platform's build (linux/amd64, linux/arm64, darwin/arm64) on its own
# runner, gathers the archives, runs `manifest` once on all of them, uploads the archives to the
# URL the manifest names and commits the manifest (or sends it to krew-index). The archive holds
# the binary and LICENSE, packed with sorted names, fixed times and owners and a gzip header
# without name or time, so the same binary always gives the same digest. The version and the
# download location come from Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 pack [--binary PATH] [--platform OS/ARCH] [--out DIR]" >&2
  echo "       $0 manifest [--manifest FILE] ARCHIVE..." >&2
  echo "       $0 [--binary PATH] [--out DIR] [--manifest FILE]" >&2
  exit 2
}
die() { echo "error: $*" >&2; exit 1; }

# [package] comes first in Cargo.toml, so the first match is the package's own.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] && [ -n "$repository" ] || die "Cargo.toml has no package version or repository"

# krew's platform labels are Go's GOOS/GOARCH.
host_platform() {
  local os arch
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "no krew arch name for $(uname -m)" ;;
  esac
  echo "$os/$arch"
}

pack() { # binary platform out -> prints the archive's path
  local binary=$1 platform=$2 out=$3 os arch archive staging
  case $platform in
    linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64 | windows/amd64) ;;
    *) die "--platform $platform: expected linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 or windows/amd64" ;;
  esac
  os=${platform%/*} arch=${platform#*/}
  [ -x "$binary" ] || die "$binary is not an executable"
  archive=$out/kubectl-misschedule_v${version}_${os}_${arch}.tar.gz
  staging=$(mktemp -d)
  install -m 0755 "$binary" "$staging/kubectl-misschedule"
  install -m 0644 LICENSE "$staging/LICENSE"
  mkdir -p "$out"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$staging" -cf - kubectl-misschedule LICENSE |
    gzip -9n >"$archive"
  rm -rf "$staging"
  echo "$(sha256sum "$archive" | cut -d' ' -f1)  $(basename "$archive")" >"$archive.sha256"
  echo "$archive"
}

manifest() { # manifest archive...
  local manifest=$1 archive name rest os arch seen=" "
  shift
  [ $# -gt 0 ] || die "no archives given"
  mkdir -p "$(dirname "$manifest")"
  {
    cat <<EOF
# Written by scripts/krew-manifest.sh from Cargo.toml and the archives it was given.
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
EOF
    for archive in "$@"; do
      [ -f "$archive" ] || die "$archive: no such archive"
      name=$(basename "$archive")
      rest=${name#kubectl-misschedule_v${version}_}
      [ "$rest" != "$name" ] && [ "${rest%.tar.gz}" != "$rest" ] ||
        die "$name: expected kubectl-misschedule_v${version}_<os>_<arch>.tar.gz (this version's)"
      rest=${rest%.tar.gz} os=${rest%_*} arch=${rest#*_}
      case " $seen " in *" $os/$arch "*) die "$os/$arch given twice" ;; esac
      seen="$seen$os/$arch "
      cat <<EOF
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $repository/releases/download/v$version/$name
    sha256: $(sha256sum "$archive" | cut -d' ' -f1)
    files:
    - from: kubectl-misschedule
      to: .
    - from: LICENSE
      to: .
    bin: kubectl-misschedule
EOF
    done
  } >"$manifest.tmp"
  mv "$manifest.tmp" "$manifest"
  echo "[krew] $manifest:$seen" >&2
}

command=both
case ${1:-} in pack | manifest) command=$1; shift ;; esac
binary="" platform="" out=target/dist manifest_file=plugins/misschedule.yaml archives=()
while [ $# -gt 0 ]; do
  case $1 in
    --binary | --platform | --out | --manifest)
      [ $# -ge 2 ] || usage
      case $1 in
        --binary) binary=$2 ;; --platform) platform=$2 ;; --out) out=$2 ;; --manifest) manifest_file=$2 ;;
      esac
      shift 2 ;;
    -*) usage ;;
    *) [ "$command" = manifest ] || usage; archives+=("$1"); shift ;;
  esac
done
if [ "$command" != manifest ]; then
  if [ -z "$binary" ]; then
    cargo build --release --locked --bin kubectl-misschedule
    binary=target/release/kubectl-misschedule
  fi
  archive=$(pack "$binary" "${platform:-$(host_platform)}" "$out")
  # `pack` prints the archive's path, for a release script to gather.
  if [ "$command" = pack ]; then echo "$archive"; else echo "[krew] $archive" >&2; fi
  archives=("$archive")
fi
[ "$command" = pack ] || manifest "$manifest_file" "${archives[@]}"
