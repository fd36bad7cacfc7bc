#!/usr/bin/env bash
# A real Kubernetes control plane on loopback: etcd, kube-apiserver and
# kube-controller-manager (daemonset + garbagecollector controllers only).
#
#   controlplane.sh build          install build deps, build and cache the binaries
#   controlplane.sh up DIR         start everything; writes DIR/env and kubeconfigs
#   controlplane.sh down DIR       stop what `up` started
#   controlplane.sh kill-apiserver DIR / start-apiserver DIR   for fault tests
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
  # Needed to run the control plane, whether or not the binaries are cached.
  apt_install etcd-server openssl curl
  if [ -x "$BIN_DIR/kube-apiserver" ] && [ -x "$BIN_DIR/kube-controller-manager" ]; then
    log "using cached binaries in $BIN_DIR"
    return 0
  fi
  apt_install golang-go rsync dpkg-dev ca-certificates
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
  # Only the two binaries are kept: the tree and Go's build cache are gigabytes.
  rm -rf "$work" "$CACHE_ROOT/go-build"
  log "cached binaries in $BIN_DIR"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
  log "$what is up"
}

write_kubeconfig() { # write_kubeconfig FILE SERVER CA TOKEN
  cat >"$1" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$2", certificate-authority: "$3"}
users:
- name: user
  user: {token: "$4"}
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
EOK
}

up() {
  local dir=$1
  build
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  local etcd_port peer_port api_port
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)

  # A CA, and a server certificate it signs: rustls rejects a self-signed CA used as a server cert.
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=misschedule-test-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
    -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null

  local admin_token exporter_token
  admin_token=$(openssl rand -hex 16); exporter_token=$(openssl rand -hex 16)
  printf '%s,admin,admin,"system:masters"\n%s,misschedule-exporter,misschedule-exporter\n' \
    "$admin_token" "$exporter_token" >"$dir/tokens.csv"

  etcd --name test --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "test=http://127.0.0.1:$peer_port" >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  wait_for 30 etcd curl -sf "http://127.0.0.1:$etcd_port/health" || die "etcd did not start (log: $dir/etcd.log)"

  printf 'ETCD_PORT=%s\nAPI_PORT=%s\nADMIN_TOKEN=%s\nAPISERVER_EXTRA_ARGS=%q\n' \
    "$etcd_port" "$api_port" "$admin_token" "${APISERVER_EXTRA_ARGS:-}" >"$dir/ports"
  start_apiserver "$dir"
  local server="https://127.0.0.1:$api_port"

  write_kubeconfig "$dir/admin.kubeconfig" "$server" "$dir/ca.crt" "$admin_token"
  write_kubeconfig "$dir/exporter.kubeconfig" "$server" "$dir/ca.crt" "$exporter_token"

  # At the default 20 QPS the controller creates pods too slowly for larger scenes.
  "$BIN_DIR/kube-controller-manager" --kubeconfig "$dir/admin.kubeconfig" \
    --controllers daemonset,garbagecollector --leader-elect=false \
    --kube-api-qps 1000 --kube-api-burst 2000 --port 0 --secure-port 0 >"$dir/controller-manager.log" 2>&1 &
  echo $! >"$dir/controller-manager.pid"

  cat >"$dir/env" <<EOE
KUBE_SERVER=$server
KUBE_CA=$dir/ca.crt
ADMIN_TOKEN=$admin_token
EXPORTER_TOKEN=$exporter_token
ADMIN_KUBECONFIG=$dir/admin.kubeconfig
EXPORTER_KUBECONFIG=$dir/exporter.kubeconfig
ETCD_ENDPOINT=http://127.0.0.1:$etcd_port
APISERVER_LOG=$dir/apiserver.log
CONTROLLER_MANAGER_LOG=$dir/controller-manager.log
EOE
  log "control plane up: $server (env in $dir/env)"
}

# (Re)start kube-apiserver on the ports `up` chose; waits until it is ready.
start_apiserver() {
  local dir=$1
  # shellcheck disable=SC1091
  . "$dir/ports"
  # TaintNodesByCondition would leave every new node not-ready-tainted: there is no kubelet here.
  # APISERVER_EXTRA_ARGS (given to `up`) is word-split on purpose, e.g. "--watch-cache=false".
  # shellcheck disable=SC2086
  "$BIN_DIR/kube-apiserver" $APISERVER_EXTRA_ARGS \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
    --tls-cert-file "$dir/server.crt" --tls-private-key-file "$dir/server.key" --client-ca-file "$dir/ca.crt" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/24 \
    --allow-privileged >>"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
  wait_for 90 kube-apiserver curl -sf --cacert "$dir/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
    "https://127.0.0.1:$API_PORT/readyz" || die "kube-apiserver did not become ready (log: $dir/apiserver.log)"
}

stop() { # stop DIR NAME [SIGNAL]
  local pidfile="$1/$2.pid"
  [ -f "$pidfile" ] || return 0
  local pid; pid=$(cat "$pidfile")
  kill "-${3:-TERM}" "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

down() {
  local dir=$1
  stop "$dir" controller-manager
  stop "$dir" apiserver
  stop "$dir" etcd
}

case "${1:-}" in
  build) build ;;
  up) [ -n "${2:-}" ] || die "usage: $0 up DIR"; up "$2" ;;
  down) [ -n "${2:-}" ] || die "usage: $0 down DIR"; down "$2" ;;
  kill-apiserver) [ -n "${2:-}" ] || die "usage: $0 kill-apiserver DIR"; stop "$2" apiserver KILL ;;
  start-apiserver) [ -n "${2:-}" ] || die "usage: $0 start-apiserver DIR"; start_apiserver "$2" ;;
  *) echo "usage: $0 build | up DIR | down DIR | kill-apiserver DIR | start-apiserver DIR" >&2; exit 2 ;;
esac
