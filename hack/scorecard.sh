#!/usr/bin/env bash
# Runs scorecard's six stock tests on bundle/ with the scorecard-test binary as a local process
# (operator-sdk scorecard would run each in a Pod from a registry image). scorecard-test reads
# the bundle at the fixed path /bundle: a private mount namespace puts ours there for the run,
# over an empty directory (created once). Fails unless every test passes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/tools.sh scorecard-test >/dev/null
tests=(basic-check-spec olm-bundle-validation olm-crds-have-validation olm-crds-have-resources
  olm-spec-descriptors olm-status-descriptors)
mkdir -p /bundle
failed=0
for t in "${tests[@]}"; do
  out=$(unshare -m --fork sh -c 'mount --bind "$1/bundle" /bundle && "$1/bin/scorecard-test" "$2"' sh "$root" "$t")
  state=$(printf '%s' "$out" | grep -o '"state": *"[a-z]*"' | sed 's/.*"\([a-z]*\)"$/\1/' | sort -u | tr '\n' ' ' | sed 's/ $//')
  printf 'scorecard: %-26s %s\n' "$t" "$state"
  if [ "$state" != pass ]; then
    printf '%s\n' "$out" >&2
    failed=1
  fi
done
exit $failed
