#!/usr/bin/env bash
# The lab: the cluster our users run, on loopback, built from the upstream Go modules.
#
#   lab.sh build [COMPONENT...|all]   build and cache the binaries (control plane and KWOK always;
#                                     all: every component that can be built here)
#   lab.sh up DIR [COMPONENT...]      start a cluster in DIR; waits until every node is Ready
#   lab.sh down DIR                   stop everything `up` started in DIR
#   lab.sh bin                        print the directory holding this version's kubectl
#
# `up DIR` alone starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# KWOK with LAB_NODES nodes (default 3, named lab-node-1...). Named components add to that:
#   nfd         nfd-master, out of cluster, with the NodeFeature CRDs: write NodeFeature
#               objects and nfd-master labels the nodes. It runs "on" a node of its own,
#               lab-control-plane, tainted as kubeadm taints a control-plane node
#   autoscaler  cluster-autoscaler with the kwok cloud provider: not buildable here yet
#               (AUTOSCALER_BLOCKED below says why); asking for it fails at once
#   ksm         kube-state-metrics; its address is KSM_URL in DIR/env
# `up` writes DIR/kubeconfig (admin), DIR/exporter.kubeconfig (a user with no rights until a
# test binds some), DIR/env (KEY=VALUE lines: addresses, tokens, logs) and one pid file each.
#
# Settings (environment):
#   LAB_K8S_VERSION  Kubernetes version (default: the pin in tests/lab/go/kubernetes)
#   LAB_NODES        nodes `up` creates (default 3; 0 for none)
#   LAB_POD_STAGES   KWOK's pod Stages: fast (kwokctl's default; a delete finishes at once) or
#                    general (upstream's other set: a delete finishes at a random moment between
#                    1 s and the end of its grace period, as a kubelet's containers stop)
#                    Either way, a pod annotated lab.misschedule.io/fault (image-pull, crash-loop,
#                    not-ready) gets what a kubelet writes then instead (stages/pod-faults.yaml),
#                    and one annotated lab.misschedule.io/stop: at-grace-end goes only when its
#                    grace period ends (stages/pod-stop-at-grace.yaml); a pod the node lifecycle
#                    controller marked NotReady (its node's heartbeats lagged) is reported Ready
#                    again, as a kubelet does (stages/pod-ready-again.yaml)
#   APISERVER_EXTRA_ARGS  extra kube-apiserver flags, kept across start-apiserver
#   MISSCHEDULE_CACHE     cache root (default ~/.cache/misschedule-exporter)
# Fault tests also use `kill-apiserver DIR` (SIGKILL) and `start-apiserver DIR`.
set -euo pipefail

LAB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT="${MISSCHEDULE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/misschedule-exporter}/lab"

# The version MODDIR's go.mod requires of MODULE (a require line or a line of a require block).
required() { awk -v m="$2" '($1 == "require" && $2 == m) { print $3; exit } ($1 == m && $2 ~ /^v/) { print $2; exit }' "$1/go.mod"; }

PINNED_K8S=$(required "$LAB/go/kubernetes" k8s.io/kubernetes)
PINNED_K8S=${PINNED_K8S#v}
K8S_VERSION="${LAB_K8S_VERSION:-$PINNED_K8S}"
K8S_VERSION="${K8S_VERSION#v}"

log() { printf '[lab] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- building ---------------------------------------------------------------------------

# The machine's Go when it is new enough for MODDIR's go line, a toolchain from the module proxy otherwise.
use_go_for() {
  command -v go >/dev/null || die "Go (1.21 or newer, which can fetch a newer toolchain) is needed to build the lab; CI machines have it"
  local need have
  need=$(sed -n 's/^go //p' "$1/go.mod")
  have=$(go env GOVERSION); have=${have#go}
  if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
    export GOTOOLCHAIN="go$need"
    log "Go $have is older than the $need $1 needs: using GOTOOLCHAIN=$GOTOOLCHAIN"
  fi
}

# Where NAME's binaries for this wrapper module live: keyed by the version and by the module's pins.
cache_dir() { # cache_dir NAME VERSION MODDIR
  local sum
  sum=$(cat "$3/go.mod" "$3/go.sum" 2>/dev/null | sha256sum | cut -c1-10)
  printf '%s/%s-%s-%s' "$CACHE_ROOT" "$1" "$2" "$sum"
}

# build_tools OUT MODDIR TAGS LDFLAGS [NAME=]PACKAGE...: build each package into OUT.tmp/bin,
# as NAME or as the package's last element.
build_tools() {
  local out=$1 moddir=$2 tags=$3 ldflags=$4; shift 4
  use_go_for "$moddir"
  mkdir -p "$out.tmp/bin"
  local pkg name started
  for pkg in "$@"; do
    name=$(basename "$pkg"); [[ $pkg == *=* ]] && { name=${pkg%%=*}; pkg=${pkg#*=}; }
    started=$SECONDS
    (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out.tmp/bin/$name" "$pkg") ||
      die "building $pkg failed (module $moddir)"
    log "built $name in $((SECONDS - started))s"
  done
}

finish() { rm -rf "$1"; mv "$1.tmp" "$1"; log "cached in $1"; }

# A wrapper module for LAB_K8S_VERSION other than the pinned one: the pinned module's shape,
# with every staging module replaced by that release's published version.
kubernetes_module() {
  if [ "$K8S_VERSION" = "$PINNED_K8S" ]; then echo "$LAB/go/kubernetes"; return; fi
  local dir="$CACHE_ROOT/src/kubernetes-v$K8S_VERSION" gomod
  if [ ! -f "$dir/go.sum" ]; then
    use_go_for "$LAB/go/kubernetes"
    gomod=$(cd "$LAB/go/kubernetes" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
    [ -f "$gomod" ] || die "the module proxy serves no k8s.io/kubernetes v$K8S_VERSION"
    mkdir -p "$dir"
    {
      sed '/^require/,$d' "$LAB/go/kubernetes/go.mod" | sed "s/^go .*/$(grep '^go ' "$gomod")/"
      echo "require k8s.io/kubernetes v$K8S_VERSION"
      echo
      echo 'replace ('
      sed -n '/^replace (/,/^)/p' "$gomod" | sed -n "s|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\t\1 => \1 v0.${K8S_VERSION#*.}|p"
      echo ')'
    } >"$dir/go.mod"
    (cd "$dir" && go mod tidy) >&2 || { rm -rf "$dir"; die "the module proxy does not serve every module of Kubernetes v$K8S_VERSION (above); try another patch release"; }
  fi
  echo "$dir"
}

kubernetes_bin() { echo "$(cache_dir kubernetes "v$K8S_VERSION" "$(kubernetes_module)")/bin"; }

build_kubernetes() {
  local moddir out minor ld="" p
  moddir=$(kubernetes_module)
  out=$(cache_dir kubernetes "v$K8S_VERSION" "$moddir")
  [ -x "$out/bin/kubectl" ] && return 0
  minor=${K8S_VERSION#*.}; minor=${minor%%.*}
  # What hack/lib/version.sh stamps, so that /version and `kubectl version` tell the truth.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  log "building Kubernetes v$K8S_VERSION (about 5 min on 2 cores the first time)"
  build_tools "$out" "$moddir" "" "$ld" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  finish "$out"
}

# A simple component: NAME, its wrapper module, the module it pins, the package(s) to build.
component_dir() { cache_dir "$1" "$(required "$LAB/go/$1" "$2")" "$LAB/go/$1"; }

build_simple() { # build_simple NAME MODULE TAGS PACKAGE...
  local name=$1 module=$2 tags=$3 out; shift 3
  out=$(component_dir "$name" "$module")
  [ -d "$out/bin" ] && return 0
  build_tools "$out" "$LAB/go/$name" "$tags" "" "$@"
  case $name in
    kwok) # The Stages kwokctl feeds KWOK, as the module ships them.
      local src; src=$(cd "$LAB/go/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
      mkdir -p "$out.tmp/stages"
      cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
        "$src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" "$out.tmp/stages/"
      for set in fast general; do
        mkdir -p "$out.tmp/stages/pod-$set"
        cp "$src/kustomize/stage/pod/$set/"pod-{ready,complete,delete}.yaml "$out.tmp/stages/pod-$set/"
      done ;;
    nfd) # The CRDs nfd-master serves (NodeFeature, NodeFeatureRule, NodeFeatureGroup).
      local src; src=$(cd "$LAB/go/nfd" && go list -m -f '{{.Dir}}' sigs.k8s.io/node-feature-discovery)
      cp "$src/deployment/base/nfd-crds/nfd-api-crds.yaml" "$out.tmp/" ;;
  esac
  finish "$out"
}

build_component() {
  case $1 in
    etcd) build_simple etcd go.etcd.io/etcd/server/v3 "" etcd=go.etcd.io/etcd/server/v3 ;;
    kwok) build_simple kwok sigs.k8s.io/kwok "" sigs.k8s.io/kwok/cmd/kwok ;;
    nfd) build_simple nfd sigs.k8s.io/node-feature-discovery "" \
      sigs.k8s.io/node-feature-discovery/cmd/nfd-master ;;
    ksm) build_simple ksm k8s.io/kube-state-metrics/v2 "" kube-state-metrics=k8s.io/kube-state-metrics/v2 ;;
    autoscaler) die "$AUTOSCALER_BLOCKED" ;;
    *) die "unknown component $1 (nfd, autoscaler, ksm)" ;;
  esac
}

OPTIONAL=(nfd ksm autoscaler)
# Why `autoscaler` cannot be had yet. Every cluster-autoscaler commit with the kwok provider
# that the module proxy serves here (k8s.io/autoscaler/cluster-autoscaler, e.g. master of
# 2025-06-13) builds against its sibling module k8s.io/autoscaler/cluster-autoscaler/apis
# through a `replace ./apis`; the proxy serves that module only at 20240627115740-d52e4b9665d7,
# whose ProvisioningRequest API has no v1, which those commits import; and it serves neither
# sigs.k8s.io/cluster-autoscaler nor any matching apis version.
AUTOSCALER_BLOCKED="cluster-autoscaler cannot be built from the module proxy here: no served commit with the kwok provider has its apis module served (see AUTOSCALER_BLOCKED in tests/lab/lab.sh)"

build() {
  apt_install openssl curl
  local started=$SECONDS wanted=("$@")
  [ "${wanted[*]:-}" = all ] && wanted=(nfd ksm)
  build_component etcd
  build_kubernetes
  build_component kwok
  local c
  for c in "${wanted[@]}"; do build_component "$c"; done
  log "binaries ready after $((SECONDS - started))s"
}

apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  log "installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- running ----------------------------------------------------------------------------

# free_port DIR: a loopback port for one of the lab's components, below the kernel's ephemeral
# range and never one this lab chose before (DIR/ports.chosen). The port is let go before the
# component binds it, and one from bind(0) may meanwhile be handed to any connection on the
# machine or to another lab's bind(0): etcd once failed so beside another lab. (tests/support/
# http.rs chooses the tests' own ports the same way.)
free_port() {
  python3 - "$1/ports.chosen" <<'EOP'
import random, socket, sys
lowest, ephemeral_start = 10000, int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
with open(sys.argv[1], "a+") as chosen:
    chosen.seek(0)
    taken = set(chosen.read().split())
    while True:
        # Where the ephemeral range starts low, there is no room below it: the kernel chooses.
        port = random.randrange(lowest, ephemeral_start) if ephemeral_start - lowest >= 1000 else 0
        if str(port) in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        chosen.write(f"{port}\n")
        print(port)
        break
EOP
}

# wait_for SECONDS PIDFILE DESCRIPTION COMMAND...: until COMMAND succeeds; fails at once when
# the process `start` recorded in PIDFILE has exited.
wait_for() {
  local deadline=$((SECONDS + $1)) pid name what=$3; pid=$(cat "$2"); name=$(basename "$2" .pid); shift 3
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { log "$name exited"; return 1; }
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
- name: lab
  cluster: {server: "$2", certificate-authority: "$3"}
users:
- name: user
  user: {token: "$4"}
contexts:
- name: lab
  context: {cluster: lab, user: user}
current-context: lab
EOK
}

# start DIR NAME COMMAND...: run in the background, log to DIR/NAME.log, pid in DIR/NAME.pid.
start() {
  local dir=$1 name=$2; shift 2
  "$@" >>"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

# This machine's first non-loopback IPv4 address: KWOK gives it to every node as its
# InternalIP, so that a hostNetwork pod's address reaches a process on this machine.
host_ip() {
  hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.' | grep -v '^127\.' || echo 127.0.0.1
}

start_etcd() { # start_etcd DIR ETCD_BIN: sets etcd_port
  local dir=$1 peer_port; etcd_port=$(free_port "$dir"); peer_port=$(free_port "$dir")
  # A lab, not production: no fsync, so that 2 cores and a shared disk keep up.
  start "$dir" etcd "$2/etcd" --name lab --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "lab=http://127.0.0.1:$peer_port" --listen-metrics-urls "http://127.0.0.1:$(free_port "$dir")"
  wait_for 30 "$dir/etcd.pid" etcd curl -sf "http://127.0.0.1:$etcd_port/health"
}

up() {
  local dir=$1; shift
  local c components=("$@")
  for c in "${components[@]}"; do [[ " ${OPTIONAL[*]} " == *" $c "* ]] || die "unknown component $c (${OPTIONAL[*]})"; done
  build "${components[@]}"
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  local bin etcd_bin kwok_dir
  bin=$(kubernetes_bin); etcd_bin="$(component_dir etcd go.etcd.io/etcd/server/v3)/bin"
  kwok_dir=$(component_dir kwok sigs.k8s.io/kwok)

  # A CA, and a server certificate it signs: rustls rejects a self-signed CA used as a server cert.
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=misschedule-lab-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
    -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null

  local admin_token exporter_token nfd_token etcd_port api_port server
  admin_token=$(openssl rand -hex 16); exporter_token=$(openssl rand -hex 16); nfd_token=$(openssl rand -hex 16)
  # nfd-master acts as itself (the admission guard tells its changes from a person's), with
  # a cluster-admin's rights: it writes labels, taints, annotations and its own CRDs.
  printf '%s,admin,admin,"system:masters"\n%s,misschedule-exporter,misschedule-exporter\n%s,nfd-master,nfd-master,"system:masters"\n' \
    "$admin_token" "$exporter_token" "$nfd_token" >"$dir/tokens.csv"
  api_port=$(free_port "$dir")
  server="https://127.0.0.1:$api_port"
  start_etcd "$dir" "$etcd_bin" || die "etcd did not start (log: $dir/etcd.log)"

  printf 'ETCD_PORT=%s\nAPI_PORT=%s\nADMIN_TOKEN=%s\nBIN=%s\nAPISERVER_EXTRA_ARGS=%q\n' \
    "$etcd_port" "$api_port" "$admin_token" "$bin" "${APISERVER_EXTRA_ARGS:-}" >"$dir/ports"
  start_apiserver "$dir"

  write_kubeconfig "$dir/kubeconfig" "$server" "$dir/ca.crt" "$admin_token"
  write_kubeconfig "$dir/exporter.kubeconfig" "$server" "$dir/ca.crt" "$exporter_token"
  write_kubeconfig "$dir/nfd.kubeconfig" "$server" "$dir/ca.crt" "$nfd_token"
  local kc="$dir/kubeconfig"

  # The controllers a DaemonSet's life touches, and those the components below rely on:
  # node lifecycle (condition taints, NoExecute eviction), the garbage collectors, service
  # accounts (pods need one), endpoints (the API server's service proxy), quotas, namespaces.
  # At the default 20 QPS the controller creates pods too slowly for larger scenes.
  start "$dir" controller-manager "$bin/kube-controller-manager" --kubeconfig "$kc" --leader-elect=false \
    --controllers daemonset-controller,garbage-collector-controller,taint-eviction-controller,node-lifecycle-controller,pod-garbage-collector-controller,serviceaccount-controller,endpoints-controller,endpointslice-controller,resourcequota-controller,namespace-controller \
    --kube-api-qps 1000 --kube-api-burst 2000 --secure-port 0
  start "$dir" scheduler "$bin/kube-scheduler" --kubeconfig "$kc" --leader-elect=false \
    --kube-api-qps 1000 --kube-api-burst 2000 --secure-port 0

  # KWOK runs every node: heartbeats through leases, pods Running and Ready, deletes finished.
  local stages=${LAB_POD_STAGES:-fast}
  [ -d "$kwok_dir/stages/pod-$stages" ] || die "LAB_POD_STAGES is fast or general, not $stages"
  # KWOK's pod-ready and pod-delete Stages leave alone the pods our own Stages drive
  # (stages/: a fault a kubelet reports, a delete that takes the whole grace period).
  for f in "$kwok_dir/stages/"*.yaml "$kwok_dir/stages/pod-$stages/"*.yaml "$LAB/stages/"*.yaml; do
    echo ---
    case $(basename "$f") in
      pod-ready.yaml) without_annotation lab.misschedule.io/fault <"$f" ;;
      pod-delete.yaml) without_annotation lab.misschedule.io/stop <"$f" ;;
      *) cat "$f" ;;
    esac
  done >"$dir/kwok.yaml"
  # One KWOK plays every kubelet, on the cores the control plane uses. With its default 4
  # lease workers, renewals under churn at 1,000 nodes fell from 5,000 a minute to 19 and
  # nodes went NotReady by the hundred (their pods flapped); with 32 they kept up (5,700).
  cat >>"$dir/kwok.yaml" <<'EOK'
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: # given a KwokConfiguration, KWOK defaults none of them: each is its default here but one
  cidr: 10.0.0.0/24
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 32
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
EOK
  start "$dir" kwok "$kwok_dir/bin/kwok" --kubeconfig "$kc" --config "$dir/kwok.yaml" --manage-all-nodes=true \
    --node-ip "$(host_ip)" --node-lease-duration-seconds 40 --server-address "127.0.0.1:$(free_port "$dir")"

  cat >"$dir/env" <<EOE
K8S_VERSION=v$K8S_VERSION
KUBE_SERVER=$server
KUBE_CA=$dir/ca.crt
ADMIN_TOKEN=$admin_token
EXPORTER_TOKEN=$exporter_token
ADMIN_KUBECONFIG=$kc
EXPORTER_KUBECONFIG=$dir/exporter.kubeconfig
KUBECTL=$bin/kubectl
LAB_BIN=$bin
ETCD_ENDPOINT=http://127.0.0.1:$etcd_port
APISERVER_LOG=$dir/apiserver.log
CONTROLLER_MANAGER_LOG=$dir/controller-manager.log
SCHEDULER_LOG=$dir/scheduler.log
KWOK_LOG=$dir/kwok.log
EOE

  # Namespaces need their default ServiceAccount before pods can be created in them.
  wait_for 60 "$dir/controller-manager.pid" "service accounts" "$bin/kubectl" --kubeconfig "$kc" -n default get serviceaccount default ||
    die "the controller manager made no default ServiceAccount (log: $dir/controller-manager.log)"
  add_nodes "$dir" "${LAB_NODES:-3}"

  for c in "${components[@]}"; do "up_$c" "$dir"; done
  log "lab up: Kubernetes v$K8S_VERSION at $server; env in $dir/env"
}

without_annotation() { # without_annotation KEY: a Stage on stdin, selecting only objects without KEY
  local extra="    - key: '.metadata.annotations[\"$1\"]'
      operator: 'DoesNotExist'"
  awk -v extra="$extra" '{ print } /^    matchExpressions:$/ && !done { print extra; done = 1 }'
}

add_nodes() { # add_nodes DIR COUNT: as a kubelet registers them; KWOK makes them Ready.
  local dir=$1 count=$2 kubectl i
  kubectl="$(. "$dir/ports"; echo "$BIN")/kubectl --kubeconfig $dir/kubeconfig"
  [ "$count" -gt 0 ] || return 0
  for i in $(seq 1 "$count"); do
    cat <<EON
apiVersion: v1
kind: Node
metadata:
  name: lab-node-$i
  labels: {kubernetes.io/hostname: lab-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
  annotations: {kwok.x-k8s.io/node: fake, volumes.kubernetes.io/controller-managed-attach-detach: "true"}
---
EON
  done | $kubectl apply -f - >/dev/null
  # KWOK initialises nodes a few at a time: 2,000 took longer than 2 minutes here.
  $kubectl wait --for=condition=Ready node --all --timeout="$((120 + count / 5))s" >/dev/null ||
    die "nodes did not become Ready (log: $dir/kwok.log)"
  log "$count nodes Ready"
}

up_nfd() {
  local dir=$1 nfd kc="$1/kubeconfig" kubectl
  nfd=$(component_dir nfd sigs.k8s.io/node-feature-discovery)
  kubectl="$(. "$dir/ports"; echo "$BIN")/kubectl"
  # nfd-master runs where a cluster runs it, on a control-plane node (it annotates its own
  # node at start): one that no daemon pod without a toleration for it runs on.
  cat <<EON | "$kubectl" --kubeconfig "$kc" apply -f - >/dev/null
apiVersion: v1
kind: Node
metadata:
  name: lab-control-plane
  labels: {kubernetes.io/hostname: lab-control-plane, node-role.kubernetes.io/control-plane: ""}
  annotations: {volumes.kubernetes.io/controller-managed-attach-detach: "true"}
spec:
  taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
EON
  "$kubectl" --kubeconfig "$kc" apply --server-side -f "$nfd/nfd-api-crds.yaml" >/dev/null
  "$kubectl" --kubeconfig "$kc" wait --for=condition=Established crd/nodefeatures.nfd.k8s-sigs.io --timeout=60s >/dev/null
  # Out of cluster: nfd-master reads its namespace from here, and writes NodeFeature-derived labels.
  "$kubectl" --kubeconfig "$kc" create namespace node-feature-discovery >/dev/null
  local metrics; metrics=$(free_port "$dir")
  KUBERNETES_NAMESPACE=node-feature-discovery NODE_NAME=lab-control-plane start "$dir" nfd-master "$nfd/bin/nfd-master" \
    -kubeconfig "$dir/nfd.kubeconfig" -port "$metrics" -config /dev/null
  echo "NFD_NAMESPACE=node-feature-discovery" >>"$dir/env"
  echo "NFD_VERSION=$(required "$LAB/go/nfd" sigs.k8s.io/node-feature-discovery)" >>"$dir/env"
  echo "NFD_LOG=$dir/nfd-master.log" >>"$dir/env"
  wait_for 60 "$dir/nfd-master.pid" nfd-master curl -sf "http://127.0.0.1:$metrics/healthz" || die "nfd-master did not start (log: $dir/nfd-master.log)"
}

up_ksm() {
  local dir=$1 ksm port
  ksm=$(component_dir ksm k8s.io/kube-state-metrics/v2)
  port=$(free_port "$dir")
  start "$dir" ksm "$ksm/bin/kube-state-metrics" --kubeconfig "$dir/kubeconfig" --host 127.0.0.1 --port "$port" \
    --telemetry-host 127.0.0.1 --telemetry-port "$(free_port "$dir")" --resources daemonsets,pods,nodes
  echo "KSM_URL=http://127.0.0.1:$port" >>"$dir/env"
  echo "KSM_VERSION=$(required "$LAB/go/ksm" k8s.io/kube-state-metrics/v2)" >>"$dir/env"
  echo "KSM_LOG=$dir/ksm.log" >>"$dir/env"
  wait_for 60 "$dir/ksm.pid" kube-state-metrics curl -sf "http://127.0.0.1:$port/metrics" || die "kube-state-metrics did not start (log: $dir/ksm.log)"
}

up_autoscaler() { die "$AUTOSCALER_BLOCKED"; }

# (Re)start kube-apiserver on the ports `up` chose; waits until it is ready.
start_apiserver() {
  local dir=$1
  # shellcheck disable=SC1091
  . "$dir/ports"
  # APISERVER_EXTRA_ARGS (given to `up`) is word-split on purpose, e.g. "--watch-cache=false".
  # shellcheck disable=SC2086
  start "$dir" apiserver "$BIN/kube-apiserver" $APISERVER_EXTRA_ARGS \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none --secure-port "$API_PORT" \
    --tls-cert-file "$dir/server.crt" --tls-private-key-file "$dir/server.key" --client-ca-file "$dir/ca.crt" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "$dir/sa.key" --service-account-signing-key-file "$dir/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/24 \
    --allow-privileged
  wait_for 90 "$dir/apiserver.pid" kube-apiserver curl -sf --cacert "$dir/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
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
  local dir=$1 name
  for name in autoscaler ksm nfd-master kwok scheduler controller-manager apiserver etcd; do stop "$dir" "$name"; done
}

case "${1:-}" in
  build) shift; build "$@" ;;
  up) [ -n "${2:-}" ] || die "usage: $0 up DIR [COMPONENT...]"; up "${@:2}" ;;
  down) [ -n "${2:-}" ] || die "usage: $0 down DIR"; down "$2" ;;
  bin) kubernetes_bin ;;
  kill-apiserver) [ -n "${2:-}" ] || die "usage: $0 kill-apiserver DIR"; stop "$2" apiserver KILL ;;
  start-apiserver) [ -n "${2:-}" ] || die "usage: $0 start-apiserver DIR"; start_apiserver "$2" ;;
  *) echo "usage: $0 build [COMPONENT...|all] | up DIR [COMPONENT...] | down DIR | bin" >&2; exit 2 ;;
esac
