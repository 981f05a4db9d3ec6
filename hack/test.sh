#!/usr/bin/env bash
# make test: three lists of make targets, each run in order.
#
#   hack/test.sh FIRST... -- LAST... [-- ALONGSIDE...]
#
# FIRST run one after the other while what LAST needs builds in the background at the lowest
# CPU priority: the real cluster's own tools (hack/tools.sh real) and, at the same time, the
# images (make images, built only; their downloads wait on the network while the tools
# compile). On a cold machine they take about 12 and 15 minutes; the suites among FIRST leave a
# core idle for much of their time (they wait on API servers, controllers and timeouts), and at
# nice 19 the background gets only that, never the suites' share. When LAST start, a build
# still running gets normal priority, and theirs wait for it: hack/tools.sh for each tool it is
# building (its per-tool lock), make images for the whole build (the images cache's lock), then
# they take what it built. What it failed to build or check, they build or check again and show
# the error. On a warm machine everything is in the caches and the background ends at once.
#
# ALONGSIDE run at the lowest priority while LAST do, and must pass too: the real suite mostly
# waits on guests booting and timeouts, which leaves CPU for the fuzzers' instrumented build (6
# minutes of both cores on a cold machine). Their output follows LAST's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

first=() last=() alongside=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do first+=("$1"); shift; done
[ $# -gt 0 ] && shift
while [ $# -gt 0 ] && [ "$1" != -- ]; do last+=("$1"); shift; done
[ $# -gt 0 ] && shift
alongside=("$@")

mkdir -p bin
# Every Debian package the targets need, at once: an apt-get of the background build and one of
# a target's would fight over dpkg's lock.
hack/packages.sh launcher node images olm e2e browser

# lowest runs a command at the lowest CPU priority in a session of its own. setsid gives it an
# autogroup of its own too (Linux's CONFIG_SCHED_AUTOGROUP, on by default), between which CPU is
# shared evenly whatever the nice values of their processes: at nice 19 alone the background
# took a third of the CPU from the suites. So the autogroup's own nice is set too
# (/proc/PID/autogroup; absent without autogroups). An array, not a function, so that "&" runs
# setsid itself: $! is then the session's leader, whose process group cleanup kills.
lowest=(setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' bash)
# normal gives the session of PID normal priority again. That needs CAP_SYS_NICE (root, as make
# test-real runs); without it the session goes on at nice 19, and whoever waits for it waits
# longer.
normal() {
  { echo 0 >"/proc/$1/autogroup" && renice -n 0 -g "$1"; } >/dev/null 2>&1 || :
}

# promtool too, which only test-alerts needs: it comes last among FIRST, so on a cold machine
# it is built by then.
"${lowest[@]}" bash -c 'hack/tools.sh real promtool & make -s images IMAGES_ARGS="-registry none"; rc=$?; wait $! && exit $rc' \
  >bin/background-build.log 2>&1 &
building=$! besides=
cleanup() {
  # Only what this script started: those sessions' process groups, should make have failed
  # first.
  for pid in $building $besides; do
    kill -- "-$pid" 2>/dev/null || :
    wait "$pid" 2>/dev/null || :
  done
}
trap cleanup EXIT

make "${first[@]}"
normal "$building"
if [ ${#alongside[@]} -gt 0 ]; then
  "${lowest[@]}" make "${alongside[@]}" >bin/alongside.log 2>&1 &
  besides=$!
fi
[ ${#last[@]} -eq 0 ] || make "${last[@]}"
[ -n "$besides" ] || exit 0
normal "$besides"
rc=0
wait "$besides" || rc=$?
besides=
cat bin/alongside.log
[ "$rc" = 0 ] || echo "test: make ${alongside[*]} failed (above)" >&2
exit "$rc"
