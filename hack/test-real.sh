#!/usr/bin/env bash
# make test-real: the real-node suite (test/real). When no real cluster runs it starts one,
# builds and pushes the images, runs the suite and removes the cluster again, then checks that
# the host is as it was before (HostState: mounts, interfaces, routes, iptables and nftables
# rules, kernel settings, network namespaces, cgroups, modules, the node's fixed paths). A
# cluster that was already running (make real-cluster) is used and left running.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS
step() { echo "test-real: $* ($((SECONDS - start))s)"; }

go -C test build -o "$root/bin/realcluster" ./cmd/realcluster
dir=${REAL_CLUSTER_DIR:-$root/.real-cluster}
started=
if [ ! -f "$dir/env" ]; then
  # What a cluster that died half-started or was killed left (its directory here, empty cgroups
  # from any directory) is removed before the host is looked at.
  bin/realcluster down
  bin/realcluster snapshot >bin/host-before.txt
  started=1
fi
building=
cleanup() {
  local rc=$?
  # The images' build, should the cluster have failed first: its whole process group.
  if [ -n "$building" ]; then
    kill -- "-$building" 2>/dev/null || :
    wait "$building" 2>/dev/null || :
  fi
  if [ -n "$started" ]; then
    bin/realcluster down || rc=1
    bin/realcluster snapshot >bin/host-after.txt
    if ! diff -u bin/host-before.txt bin/host-after.txt; then
      echo "test-real: the host is not as it was before the real cluster (diff above)" >&2
      rc=1
    else
      step "the host is as it was before the real cluster ($(wc -l <bin/host-before.txt) facts compared)"
    fi
  fi
  exit $rc
}
trap cleanup EXIT
# The images build while the cluster's tools do: on a cold machine each waits on the network
# (Debian's mirror, the npm registry, the module proxy) where the other computes. apt first,
# once, for both: two apt-gets at once would fight over dpkg's lock. Under make test, an images
# build started earlier may still run (hack/test.sh): this one waits for it (the images cache's
# lock), then checks what it left unchecked.
hack/packages.sh node images
setsid make -s images IMAGES_ARGS="-registry none" >bin/images-build.log 2>&1 &
building=$!
up=$SECONDS
make -s real-cluster
step "real cluster up (make real-cluster: $((SECONDS - up))s)"
if ! wait "$building"; then
  building=
  cat bin/images-build.log >&2
  echo "test-real: building the images failed (above)" >&2
  exit 1
fi
building=
step "images built ($(grep -c '^images: [^ ]* *sha256' bin/images-build.log) of them)"
if [ -n "$started" ]; then
  # The comparison at the end proves something only if the snapshot sees a running cluster.
  bin/realcluster snapshot >bin/host-during.txt
  seen=$(diff bin/host-before.txt bin/host-during.txt | grep -c '^>' || true)
  if [ "$seen" = 0 ]; then
    echo "test-real: the host snapshot does not see the running cluster" >&2
    exit 1
  fi
  step "the host snapshot sees the running cluster ($seen facts more than before)"
fi
make -s images
step "images pushed"
make -s build >/dev/null
# -parallel: the suite's lanes run at once, more of them than this machine has cores (Go's
# default), since they mostly wait.
# REAL_RUN runs only the tests it matches (go test -run; make screenshots).
go -C test test -count=1 -parallel 8 -timeout 45m ${V:+-v} ${REAL_RUN:+"-run=$REAL_RUN"} ./real/
step "suite passed"
