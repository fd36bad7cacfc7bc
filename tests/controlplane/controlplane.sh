#!/usr/bin/env bash
# A real Kubernetes control plane on loopback: etcd, kube-apiserver and
# kube-controller-manager (daemonset + garbagecollector controllers only).
#
#   controlplane.sh build          install build deps, build and cache the binaries
#   controlplane.sh up DIR         start everything; writes DIR/env and kubeconfigs
#   controlplane.sh down DIR       stop what `up` started
#
# The binaries come from Debian's `kubernetes` source package (v1.20.2) and are
# cached under $MISSCHEDULE_CACHE so that only the first run pays the build.
set -euo pipefail

K8S_VERSION=1.20.2
CACHE_ROOT="${MISSCHEDULE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/misschedule-exporter}"
BIN_DIR="$CACHE_ROOT/k8s-v$K8S_VERSION/bin"

log() { printf '[controlplane] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=""
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  log "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# `apt-get source` needs deb-src entries; derive them from the machine's own deb entries.
ensure_deb_src() {
  if grep -rqs '^\s*deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then return 0; fi
  log "adding deb-src entries derived from the deb entries"
  local out=/etc/apt/sources.list.d/misschedule-deb-src
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | as_root tee "$out.sources" >/dev/null
  elif [ -f /etc/apt/sources.list ]; then
    grep -E '^\s*deb\s' /etc/apt/sources.list | sed -e 's/^\s*deb\s/deb-src /' | as_root tee "$out.list" >/dev/null
  else
    die "no apt sources found to derive a deb-src line from"
  fi
  apt_updated=""
}

build() {
  if [ -x "$BIN_DIR/kube-apiserver" ] && [ -x "$BIN_DIR/kube-controller-manager" ]; then
    log "using cached binaries in $BIN_DIR"
    return 0
  fi
  apt_install etcd-server golang-go rsync openssl dpkg-dev curl ca-certificates
  ensure_deb_src
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi

  local work="$CACHE_ROOT/k8s-v$K8S_VERSION/src"
  rm -rf "$work"; mkdir -p "$work"
  log "fetching Debian's kubernetes source package"
  (cd "$work" && apt-get source -qq kubernetes >/dev/null)
  local tree
  tree=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
  [ -f "$tree/Makefile" ] || die "unpacked source has no Makefile: $tree"
  grep -q "$K8S_VERSION" "$work"/kubernetes_*.dsc || log "warning: source package is not v$K8S_VERSION"

  # The tree's Makefile wants a GOPATH layout; the generated OpenAPI code only comes from make.
  mkdir -p "$work/.go/src/k8s.io"
  ln -sfn "$tree" "$work/.go/src/k8s.io/kubernetes"
  log "building kube-apiserver and kube-controller-manager (6-10 min on 2 cores)"
  (
    cd "$work/.go/src/k8s.io/kubernetes"
    export GOPATH="$work/.go" GO111MODULE=off GOFLAGS=-mod=vendor CGO_ENABLED=0 GOCACHE="$CACHE_ROOT/go-build"
    make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" KUBE_VERBOSE=0 >"$work/build.log" 2>&1
  ) || { tail -40 "$work/build.log" >&2; die "kubernetes build failed (log: $work/build.log)"; }
  local out="$work/.go/src/k8s.io/kubernetes/_output/bin"
  mkdir -p "$BIN_DIR"
  cp "$out/kube-apiserver" "$out/kube-controller-manager" "$BIN_DIR/"
  rm -rf "$work"
  log "cached binaries in $BIN_DIR"
}

case "${1:-}" in
  build) build ;;
  *) echo "usage: $0 build | up DIR | down DIR" >&2; exit 2 ;;
esac
