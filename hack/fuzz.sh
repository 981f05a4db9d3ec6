#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after another, each for FUZZTIME (a Go duration
# like 30s or 1m30s, or a count of inputs like 5000x; default 30s) with one worker
# (-parallel=1), and stops at the first finding, which go test writes to the package's
# testdata/fuzz/<target>/ (commit it there as a regression seed once fixed).
#
# Targets are found, not listed here: the packages whose tests declare a func Fuzz...(*testing.F)
# are asked for theirs with go test -list, so a new target runs without a change to this
# script. Only those packages are asked, since -list still runs a package's TestMain, and the
# integration, e2e and OLM suites start clusters in theirs.
#
# FUZZ_MINIMIZE_TIME (default 10s) bounds the shrinking of each new input: go test's default
# (60s per input) can spend a short run on it. A run that overruns its time by 30 minutes is
# stopped and counts as a failure, so the script always ends. The margin is that large because
# it also holds go test's build of the package with fuzzing instrumentation, which on a cold
# build cache and two busy cores took over 10 minutes for the first target (seen here).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fuzztime=${1:-30s}
minimize=${FUZZ_MINIMIZE_TIME:-10s}

# seconds prints the Go duration $1 (1h2m3s) in seconds; a count of inputs (5000x) has no
# duration and gets an hour.
seconds() {
  local d=$1 total=0
  if [[ $d =~ ^[0-9]+x$ ]]; then
    echo 3600
    return
  fi
  while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
    case ${BASH_REMATCH[2]} in
      h) total=$((total + BASH_REMATCH[1] * 3600)) ;;
      m) total=$((total + BASH_REMATCH[1] * 60)) ;;
      s) total=$((total + BASH_REMATCH[1])) ;;
    esac
    d=${BASH_REMATCH[3]}
  done
  if [ -n "$d" ] || [ "$total" = 0 ]; then
    echo "fuzz.sh: FUZZTIME $1 is not a duration like 30s or 1m30s, nor a count like 5000x" >&2
    return 1
  fi
  echo "$total"
}
limit=$(($(seconds "$fuzztime") + 1800))

mapfile -t pkgs < <(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=bin \
  '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' . | xargs -r -n1 dirname | sort -u)
if [ ${#pkgs[@]} = 0 ]; then
  echo "fuzz.sh: no fuzz targets found" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# coordinator_race reports whether the failure in $log is Go's own fuzz coordinator missing its
# deadline at the end of -fuzztime (golang/go#75804, fixed in Go 1.27): a bare "context
# deadline exceeded", no input written, no panic. Under CPU contention it fails a target that
# found nothing; the target's corpus is then replayed to be sure.
coordinator_race() {
  grep -qE '^    context deadline exceeded$' "$log" \
    && ! grep -qE 'Failing input written to|panic:|--- FAIL: .*/' "$log"
}
ran=0
for pkg in "${pkgs[@]}"; do
  # A package under test/ belongs to the test module: go runs there.
  mod=.
  if [[ $pkg == ./test/* ]]; then mod=test pkg=./${pkg#./test/}; fi
  mapfile -t targets < <(go -C "$mod" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
  for t in "${targets[@]}"; do
    printf 'fuzz: %-60s ' "$pkg $t"
    t0=$SECONDS
    if timeout --signal=INT --kill-after=30s "$limit" go -C "$mod" test "$pkg" -run "^$t\$" -fuzz "^$t\$" \
      -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" -parallel=1 >"$log" 2>&1; then
      # The last progress line ("fuzz: elapsed: 30s, execs: 123 (4/sec), new interesting: 5
      # (total: 9)"), which go test prints every 3 seconds.
      progress=$(grep -o 'execs: [0-9]*.*' "$log" | tail -1 | sed 's/ ([0-9]*\/sec)//' || true)
      printf 'ok%s\n' "${progress:+ ($progress)}"
    elif coordinator_race && go -C "$mod" test "$pkg" -run "^$t\$" >"$log" 2>&1; then
      echo "ok (Go's fuzz coordinator missed its own deadline, golang/go#75804: no input failed; the corpus replayed clean)"
    else
      echo FAIL
      echo "fuzz: $t failed after $((SECONDS - t0))s (stopped at ${limit}s):" >&2
      cat "$log" >&2
      exit 1
    fi
    ran=$((ran + 1))
  done
done
echo "fuzz: $ran targets ran for $fuzztime each with no finding"
