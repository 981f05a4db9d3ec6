#!/usr/bin/env bash
# make verify: what a reviewer checks before anything runs. go vet; the two modules' shared
# dependencies at one version; gofmt; and that the generated
# files (deepcopy, clients, CRDs, RBAC, the bundle) are what their generators make of the tree,
# and that operator-sdk validates the bundle without a warning. It compares against the tree as
# it was, not against the last commit, so uncommitted work that was regenerated passes; what the
# generators changed is left in place (commit it) and named.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS
step() { echo "verify: $* ($((SECONDS - start))s)"; }

make -s vet
step "go vet (both modules)"

# The test module builds the operator's packages with whatever versions its own go.mod asks for:
# every module both build with must be at the version the operator ships with, or the suites
# test another build than users run.
# LC_ALL=C: join needs the order sort gives in the C locale; -test: the suites' own imports too.
export LC_ALL=C
deps() { go -C "$1" list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "${@:2}" | sort -u; }
operator=$(deps . . ./cmd/...)
suites=$(deps test ./...)
skew=$(join <(echo "$operator") <(echo "$suites") | awk '$2 != $3 && $1 !~ /cloudspace-operator$/')
if [ -n "$skew" ]; then
  echo "verify: the test module builds with other versions than the operator ships with (module, operator's, test's):" >&2
  echo "$skew" >&2
  echo "verify: align test/go.mod with go.mod" >&2
  exit 1
fi
step "the test module builds with the operator's own module versions"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "verify: gofmt would change these files (make fmt):" >&2
  echo "$unformatted" >&2
  exit 1
fi
step "gofmt"

generated=(api pkg config bundle bundle.Dockerfile)
before=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$before" "$log"' EXIT
cp -a "${generated[@]}" "$before/"
make -s generate manifests >/dev/null
if ! make -s bundle >"$log" 2>&1 || grep -qi 'level=\(warning\|error\)' "$log"; then
  cat "$log" >&2
  echo "verify: make bundle failed, or operator-sdk bundle validate warned (above)" >&2
  exit 1
fi
changed=0
for g in "${generated[@]}"; do
  if ! diff -r -u "$before/$g" "$g" >&2; then changed=1; fi
done
if [ $changed = 1 ]; then
  echo "verify: make generate manifests bundle changed the files above: commit what they make" >&2
  exit 1
fi
step "generated code, CRDs, RBAC and the bundle are as the generators make them"
