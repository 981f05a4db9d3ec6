#!/usr/bin/env bash
# make test: the make targets before "--" one after the other, then those after it, while the
# real cluster's own tools (hack/tools.sh real) build in the background at the lowest CPU
# priority. On a cold machine they take about 12 minutes of both cores; the suites before the
# real one leave a core idle for much of their time (they wait on API servers, controllers and
# timeouts), and at nice 19 the build gets only that, never the suites' share. When the last
# targets start, a build still running gets normal priority, and their own hack/tools.sh waits
# for each tool it is building (tools.sh's per-tool lock), then links it; what it failed to
# build, they build again and show the error. On a warm machine every tool is in the cache and
# the background build ends at once.
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
log=bin/tools-background.log
# setsid gives the build a session, and with it an autogroup of its own (Linux's
# CONFIG_SCHED_AUTOGROUP, on by default), between which CPU is shared evenly whatever the nice
# values of their processes: at nice 19 alone the build took a third of the CPU from the
# suites. So the autogroup's own nice is set too (/proc/PID/autogroup; absent without it).
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 hack/tools.sh real' >"$log" 2>&1 &
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
