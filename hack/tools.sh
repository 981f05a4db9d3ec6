#!/usr/bin/env bash
# Builds the project's tool binaries from source through the Go module proxy into bin/.
#
# Usage: [TOOLS_GOARCH=arm64] hack/tools.sh NAME...   (or "all"; "real" for what the real node
#        needs besides)
#
# Every binary is built from a wrapper module under hack/tools/<group>/ whose go.mod and go.sum
# pin the exact version. A built binary is kept in a per-user cache keyed by name, version and a
# hash of the wrapper module, so a second clone on the same machine links it in seconds; bin/NAME
# is a symlink into that cache, which is also how "present at the right version" is checked.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
cache="${CLOUDSPACE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudspace-operator/tools}"
mkdir -p "$bin" "$cache"

k8s_version=v1.34.4
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/component-base/version.gitTreeState=clean"

# spec NAME prints: group version package [extra go build args...]
spec() {
  case "$1" in
    etcd) echo "etcd v3.6.5 go.etcd.io/etcd/server/v3" ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
      echo "kubernetes $k8s_version k8s.io/kubernetes/cmd/$1" ;;
    # The real node's own (hack/real-cluster.sh), in a module of their own so that adding them
    # did not change the control plane's cache key.
    kubelet | kube-proxy) echo "kubenode $k8s_version k8s.io/kubernetes/cmd/$1" ;;
    containerd | containerd-shim-runc-v2 | ctr) echo "containerd v2.2.9 github.com/containerd/containerd/v2/cmd/$1" ;;
    registry) echo "registry v3.1.2 github.com/distribution/distribution/v3/cmd/registry" ;;
    # CoreDNS with the few plugins the real cluster uses (hack/tools/coredns/main.go).
    coredns) echo "coredns v1.15.0 ." ;;
    # The real cluster's NetworkPolicy enforcer (its firewall alone; README, "A real cluster").
    kube-router) echo "kube-router v2.1.0 github.com/cloudnativelabs/kube-router/v2/cmd/kube-router" ;;
    # The catalog image's health probe (OLM probes its registry pods with it).
    grpc_health_probe) echo "grpc-health-probe v0.4.61 github.com/grpc-ecosystem/grpc-health-probe" ;;
    kwok | kwokctl) echo "kwok v0.8.0 sigs.k8s.io/kwok/cmd/$1" ;;
    controller-gen) echo "controller-gen v0.19.0 sigs.k8s.io/controller-tools/cmd/controller-gen" ;;
    kustomize) echo "kustomize v5.7.1 sigs.k8s.io/kustomize/kustomize/v5" ;;
    operator-sdk) echo "operator-sdk v1.34.1 github.com/operator-framework/operator-sdk/cmd/operator-sdk" ;;
    scorecard-test) echo "operator-sdk v1.34.1 github.com/operator-framework/operator-sdk/images/scorecard-test" ;;
    opm) echo "opm v1.55.0 github.com/operator-framework/operator-registry/cmd/opm" ;;
    # Every validator OperatorHub's catalogs run (hack/tools/bundlecheck/main.go: our own, in a
    # module of its own, as the validators need newer Kubernetes libraries than the operator).
    bundlecheck) echo "bundlecheck v0.45.0 ." ;;
    # Checks and tests the operator's alerting rules (make test-alerts); the server scrapes the
    # operator on the real cluster (its image: test/infra/images, prometheus).
    promtool | prometheus) echo "prometheus v0.316.0 github.com/prometheus/prometheus/cmd/$1" ;;
    olm | catalog | package-server) echo "olm v0.33.0 github.com/operator-framework/operator-lifecycle-manager/cmd/$1" ;;
    cpb) echo "olm v0.33.0 github.com/operator-framework/operator-lifecycle-manager/util/cpb" ;;
    client-gen | lister-gen | informer-gen | applyconfiguration-gen)
      echo "codegen v0.34.4 k8s.io/code-generator/cmd/$1" ;;
    protoc-gen-go) echo "protoc-gen v1.36.10 google.golang.org/protobuf/cmd/protoc-gen-go" ;;
    protoc-gen-go-grpc) echo "protoc-gen v1.5.1 google.golang.org/grpc/cmd/protoc-gen-go-grpc" ;;
    *) echo "unknown tool: $1" >&2; return 1 ;;
  esac
}

# Every tool is linked without its symbol table and DWARF, as Kubernetes' and helm's own release
# builds are: linking kube-apiserver took 8 s rather than 21 s. (Not part of the cache key: a
# tool built before behaves the same.)
ldflags_for() {
  case "$1" in
    kube-*|kubectl|kubelet) echo "-s -w $k8s_ldflags" ;;
    *) echo "-s -w" ;;
  esac
}

tags_for() {
  case "$1" in
    opm) echo "json1,containers_image_openpgp" ;;
    containerd | containerd-shim-runc-v2 | ctr) echo "no_btrfs,no_devmapper" ;;
    *) echo "" ;;
  esac
}

# static NAME succeeds for the binaries that go into images (FROM scratch: no libc there) or are
# meant to be static (containerd's), and for those whose upstream builds them static
# (operator-sdk and OLM's, CGO_ENABLED=0 in their Makefiles; Prometheus's release builds): they
# are built with CGO_ENABLED=0. Tools of one wrapper module also share their compile only when
# they agree on it (cgo changes package net, and so every package above it): scorecard-test
# reuses operator-sdk's, cpb OLM's, promtool prometheus's.
static() {
  case "$1" in
    opm | cpb | grpc_health_probe | scorecard-test | coredns | containerd | containerd-shim-runc-v2 | ctr | prometheus) return 0 ;;
    operator-sdk | olm | catalog | package-server | promtool) return 0 ;;
    *) return 1 ;;
  esac
}

ensure() {
  local name=$1 group version pkg
  read -r group version pkg < <(spec "$name")
  local dir="$root/hack/tools/$group"
  local key
  local cgo=1
  if static "$name"; then cgo=0; fi
  # TOOLS_GOARCH: a static tool for linux on another architecture (an image's), linked in
  # bin/linux-ARCH/.
  local goarch=${TOOLS_GOARCH:-} link="$bin/$name" cross=
  if [ -n "$goarch" ] && [ "$goarch" != "$(go env GOHOSTARCH)" ]; then
    if [ $cgo = 1 ]; then echo "tools: $name is built for this machine only (TOOLS_GOARCH=$goarch)" >&2; return 1; fi
    cross="linux/$goarch"
    link="$bin/linux-$goarch/$name"
    mkdir -p "$bin/linux-$goarch"
  fi
  # The key is the wrapper module's (with its own Go code, which coredns and bundlecheck have),
  # "static" for a static build and the platform for another's (other keys stay as they were).
  key=$( { cat "$dir/go.mod" "$dir/go.sum"; cat "$dir"/*.go 2>/dev/null || true; if [ $cgo = 0 ]; then echo static; fi; if [ -n "$cross" ]; then echo "$cross"; fi; } | sha256sum | cut -c1-12)
  local target="$cache/$name-$version-$key/$name"
  if [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && [ -x "$target" ]; then
    return 0
  fi
  local start=$SECONDS
  # One build of a tool at a time: another tools.sh (make test-real builds the images while the
  # cluster's tools build, and both need some) waits for it and then links what it built.
  mkdir -p "$(dirname "$target")"
  local lock
  exec {lock}>"$target.lock"
  flock "$lock"
  if [ -x "$target" ]; then
    echo "tools: $name $version: linking from cache"
  else
    echo "tools: $name $version${cross:+ for $cross}: building from source ($pkg)"
    local tmp="$target.tmp.$$"
    # BUILD_GOGC: the Makefile's, for the compiler (Go's default when run by hand).
    (cd "$dir" && env CGO_ENABLED=$cgo GOGC=${BUILD_GOGC:-100} ${cross:+GOOS=linux GOARCH=$goarch} go build -ldflags "$(ldflags_for "$name")" -tags "$(tags_for "$name")" -o "$tmp" "$pkg")
    mv -f "$tmp" "$target"
  fi
  ln -sfn "$target" "$link"
  exec {lock}>&-
  echo "tools: $name $version: ready in $((SECONDS - start))s"
}

all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl
  controller-gen kustomize operator-sdk scorecard-test opm olm catalog protoc-gen-go protoc-gen-go-grpc
  client-gen lister-gen informer-gen applyconfiguration-gen)
# What the real node needs beyond the above (make real-cluster); not in "all", which the KWOK
# suites need.
# bundlecheck is the real suite's, which checks the bundles as pushed to the cluster's registry;
# prometheus its image's, which scrapes the operator there.
real=(kubelet kube-proxy kube-router containerd containerd-shim-runc-v2 ctr registry coredns package-server cpb grpc_health_probe bundlecheck prometheus)
[ $# -gt 0 ] || set -- all
for arg in "$@"; do
  if [ "$arg" = all ]; then
    for t in "${all[@]}"; do ensure "$t"; done
  elif [ "$arg" = real ]; then
    for t in "${real[@]}"; do ensure "$t"; done
  else
    ensure "$arg"
  fi
done
