#!/usr/bin/env bash
# make test: the make targets before "--" one after the other, then those after it, while what
# the last ones need builds in the background at the lowest CPU priority: the real cluster's
# own tools (hack/tools.sh real), then the images (make images, built only). On a cold machine
# they take about 12 and 15 minutes; the suites before the real one leave a core idle for much
# of their time (they wait on API servers, controllers and timeouts), and at nice 19 the
# background gets only that, never the suites' share. When the last targets start, a build
# still running gets normal priority, and theirs wait for it: hack/tools.sh for each tool it is
# building (its per-tool lock), make images for the whole build (the images cache's lock), then
# they take what it built. What it failed to build or check, they build or check again and show
# the error. On a warm machine everything is in the caches and the background ends at once.
#
# Usage: hack/test.sh TARGET... -- TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

first=() last=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do first+=("$1"); shift; done
[ $# -gt 0 ] && shift
last=("$@")

mkdir -p bin
log=bin/background-build.log
# Every Debian package the targets need, at once: an apt-get of the background build and one of
# a target's would fight over dpkg's lock.
hack/packages.sh launcher node images olm e2e browser
# setsid gives the build a session, and with it an autogroup of its own (Linux's
# CONFIG_SCHED_AUTOGROUP, on by default), between which CPU is shared evenly whatever the nice
# values of their processes: at nice 19 alone the build took a third of the CPU from the
# suites. So the autogroup's own nice is set too (/proc/PID/autogroup; absent without it).
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null
  nice -n 19 hack/tools.sh real && exec nice -n 19 make -s images IMAGES_ARGS="-registry none"' >"$log" 2>&1 &
building=$!
cleanup() {
  # Only what this script started: the background build's process group, should make have
  # failed first.
  kill -- "-$building" 2>/dev/null || :
  wait "$building" 2>/dev/null || :
}
trap cleanup EXIT

make "${first[@]}"
# Raising a priority back needs CAP_SYS_NICE (root, as make test-real runs). Without it the
# build goes on at nice 19 and make test-real's tools.sh waits for it.
{ echo 0 >"/proc/$building/autogroup" && renice -n 0 -g "$building"; } >/dev/null 2>&1 || :
[ ${#last[@]} -eq 0 ] || make "${last[@]}"
