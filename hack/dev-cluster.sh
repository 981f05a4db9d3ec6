#!/usr/bin/env bash
# The embedded development cluster: KWOK with a real etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler built from source into bin/, listening on 127.0.0.1 only, and three fake
# nodes on which pods reach Running without a kubelet.
#
# Usage: hack/dev-cluster.sh up|down|status|stop|start
#   stop and start stop the whole control plane and start it again on the same state (a
#   control-plane outage, for the chaos run).
#   DEV_CLUSTER_DIR   state, logs and kubeconfig (default: <repo>/.dev-cluster)
#   DEV_CLUSTER_NAME  kwokctl cluster name (default: cloudspace)
#   DEV_CLUSTER_ADVERTISE_ADDRESS  kube-apiserver's --advertise-address, for a network namespace
#                     with nothing but loopback, where it finds no address of its own (never used)
#
# Storage: a default StorageClass "standard" provisioned with hostPath volumes by the controller
# manager (development only), so that Workspace volumes bind and their pods run.
#
# Node labels (so that GenericDaemon tests can target a subset):
#   dev-node-1  logs=true  cloudspace.dev/pool=general  topology.kubernetes.io/zone=zone-a
#   dev-node-2  logs=true  cloudspace.dev/pool=gpu      topology.kubernetes.io/zone=zone-b
#   dev-node-3             cloudspace.dev/pool=general  topology.kubernetes.io/zone=zone-b
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
dir="${DEV_CLUSTER_DIR:-$root/.dev-cluster}"
name="${DEV_CLUSTER_NAME:-cloudspace}"
export KWOK_WORKDIR="$dir/kwok"
export KUBECONFIG="$dir/kubeconfig"

step() { echo "dev-cluster: $*"; }

write_config() {
  mkdir -p "$dir"
  cat >"$dir/kwokctl.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeVersion: v1.34.4
  disableQPSLimits: true
  # Fake nodes' leases last 10 s (kwokctl's default is 200): a kwok controller started again,
  # after a control-plane outage, has a new identity and manages no pod until they expire.
  heartbeatFactor: 1
  nodeLeaseDurationSeconds: 10
  etcdBinary: $bin/etcd
  kubeApiserverBinary: $bin/kube-apiserver
  kubeControllerManagerBinary: $bin/kube-controller-manager
  kubeSchedulerBinary: $bin/kube-scheduler
  kwokControllerBinary: $bin/kwok
  kubectlBinary: $bin/kubectl
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: pvclaimbinder-sync-period
    value: 1s
  # Dynamic hostPath volumes (under /tmp/hostpath_pv) for the default StorageClass: a
  # development-only provisioner built into the controller manager.
  - key: enable-hostpath-provisioner
    value: "true"
- name: kube-apiserver
  extraArgs:
  # Room for 65k Services (the API server's default, a /24, holds 254): make bench's scale
  # phase makes a Service per resource.
  - key: service-cluster-ip-range
    value: 10.96.0.0/16
EOF
  if [ -n "${DEV_CLUSTER_ADVERTISE_ADDRESS:-}" ]; then
    cat >>"$dir/kwokctl.yaml" <<EOF
  - key: advertise-address
    value: $DEV_CLUSTER_ADVERTISE_ADDRESS
EOF
  fi
}

storage() {
  cat <<EOF
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
}

nodes() {
  local i labels
  for i in 1 2 3; do
    case $i in
      1) labels='logs: "true"
    cloudspace.dev/pool: general
    topology.kubernetes.io/zone: zone-a' ;;
      2) labels='logs: "true"
    cloudspace.dev/pool: gpu
    topology.kubernetes.io/zone: zone-b' ;;
      3) labels='cloudspace.dev/pool: general
    topology.kubernetes.io/zone: zone-b' ;;
    esac
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: dev-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: dev-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    type: kwok
    $labels
status:
  # devices.kubevirt.io/kvm: what KubeVirt's device plugin advertises for /dev/kvm, which the
  # VirtualMachine pod backend asks for.
  allocatable: {cpu: "256", memory: 2Ti, pods: "5000", ephemeral-storage: 10Ti, devices.kubevirt.io/kvm: "110"}
  capacity: {cpu: "256", memory: 2Ti, pods: "5000", ephemeral-storage: 10Ti, devices.kubevirt.io/kvm: "110"}
  nodeInfo: {architecture: amd64, kubeletVersion: fake, operatingSystem: linux}
  phase: Running
EOF
  done
}

running() {
  [ -f "$KUBECONFIG" ] && "$bin/kubectl" get --raw /readyz >/dev/null 2>&1
}

up() {
  local start=$SECONDS
  if running; then
    step "already running (kubeconfig: $KUBECONFIG)"
    return 0
  fi
  # A cluster left stopped (a reboot, a killed session) is removed and made anew: its state is
  # disposable and a fresh start is quicker than repairing it.
  "$bin/kwokctl" delete cluster --name "$name" >/dev/null 2>&1 || true
  write_config
  step "starting cluster $name from $bin"
  "$bin/kwokctl" create cluster --name "$name" --config "$dir/kwokctl.yaml" --wait 2m
  "$bin/kwokctl" get kubeconfig --name "$name" >"$KUBECONFIG.tmp" && mv "$KUBECONFIG.tmp" "$KUBECONFIG"
  { nodes; storage; } | "$bin/kubectl" apply --server-side -f - >/dev/null
  "$bin/kubectl" wait --for=condition=Ready node --all --timeout=60s >/dev/null
  step "ready in $((SECONDS - start))s; export KUBECONFIG=$KUBECONFIG"
}

# pids lists the cluster's own processes, from kwokctl's pid files.
pids() {
  cat "$KWOK_WORKDIR/clusters/$name/pids/"*.pid 2>/dev/null || true
}

# running_pid: the process exists and has not exited (a zombie has exited; only its parent's
# wait is missing).
running_pid() {
  [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# wait_exited waits up to 20 s for the processes $@ to exit (kwokctl signals the components and
# returns) and prints those still running.
wait_exited() {
  local left="$*" p i
  for i in $(seq 100); do
    local alive=""
    for p in $left; do running_pid "$p" && alive="$alive $p"; done
    left=$alive
    [ -z "$left" ] && break
    sleep 0.2
  done
  echo $left
}

down() {
  local p left
  left=$(pids)
  if [ -d "$KWOK_WORKDIR" ]; then
    "$bin/kwokctl" delete cluster --name "$name" >/dev/null
  fi
  left=$(wait_exited $left)
  for p in $left; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$dir"
  step "removed"
}

# stop stops every component of the cluster, keeping its state, and waits until they have exited.
stop() {
  local left
  left=$(pids)
  "$bin/kwokctl" stop cluster --name "$name" >/dev/null
  left=$(wait_exited $left)
  if [ -n "$left" ]; then
    echo "dev-cluster: still running after stop:$left" >&2
    return 1
  fi
  step "stopped"
}

# start starts the stopped components again and waits until the API server is ready.
start() {
  local i
  "$bin/kwokctl" start cluster --name "$name" >/dev/null
  for i in $(seq 300); do
    running && { step "started"; return 0; }
    sleep 0.2
  done
  echo "dev-cluster: the API server did not come back" >&2
  return 1
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  stop) stop ;;
  start) start ;;
  status) if running; then echo "running; KUBECONFIG=$KUBECONFIG"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status|stop|start" >&2; exit 2 ;;
esac
