#!/usr/bin/env bash
# Builds Prometheus's web UI (mantine-ui, as upstream's `make assets` does) from the source of
# the Prometheus module hack/tools/prometheus pins, with pnpm from the npm registry, into
# bin/prometheus-ui/static: the prometheus image serves it (test/infra/images). Kept in the
# tools' per-user cache, keyed by this script and the wrapper module; bin/prometheus-ui links it.
#
# Usage: hack/prometheus-ui.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${CLOUDSPACE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudspace-operator/tools}"
pnpm_version=12.21.0
key=$(cat "$0" "$root/hack/tools/prometheus/go.mod" | sha256sum | cut -c1-12)
target="$cache/prometheus-ui-$key"
link="$root/bin/prometheus-ui"
if [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && [ -f "$target/static/mantine-ui/index.html" ]; then
  exit 0
fi
mkdir -p "$cache" "$root/bin"
exec {lock}>"$target.lock"
flock "$lock"
if [ ! -f "$target/static/mantine-ui/index.html" ]; then
  start=$SECONDS
  src=$(cd "$root/hack/tools/prometheus" && go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)/web/ui
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$src/." "$work/ui"
  chmod -R u+w "$work/ui"
  npm install --silent --no-audit --no-fund --prefix "$work/pnpm" "pnpm@$pnpm_version"
  # The npm registry here serves @mantine/code-highlight up to 9.6.2, not the lock's 9.7.2 (the
  # UI's code blocks): the UI is built with 9.6.2, the lock resolved again for it alone.
  sed -i 's#"@mantine/code-highlight": "^9.7.2"#"@mantine/code-highlight": "9.6.2"#' "$work/ui/mantine-ui/package.json"
  grep -q '"@mantine/code-highlight": "9.6.2"' "$work/ui/mantine-ui/package.json"
  (
    cd "$work/ui"
    export PATH="$work/pnpm/node_modules/.bin:$PATH"
    pnpm install --silent --no-frozen-lockfile --config.minimum-release-age=0
    bash build_ui.sh --mantine-ui
  ) >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
  rm -rf "$target.tmp"
  mkdir -p "$target.tmp"
  mv "$work/ui/static" "$target.tmp/static"
  mv "$target.tmp" "$target"
  echo "prometheus-ui: built in $((SECONDS - start))s"
fi
ln -sfn "$target" "$link"
