#!/usr/bin/env bash
# Writes the licences a Go binary of this repository carries into DIR, as an image's /licenses
# (OpenShift's certification asks for the directory): the project's LICENSE, Go's own, and the
# licence and notice files of each module linked into PACKAGE (default: the manager, "."), under
# the module's path. A linked module with no such file is an error: its terms must be known.
#
# Usage: hack/licenses.sh DIR [PACKAGE]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
pkg=${2:-.}
mkdir -p "$out/golang.org/go"
cp "$root/LICENSE" "$out/LICENSE"
cp "$(go env GOROOT)/LICENSE" "$out/golang.org/go/LICENSE"
(cd "$root" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Dir}}{{end}}{{end}}' "$pkg") | sort -u |
  while read -r path dir; do
    mkdir -p "$out/$path"
    find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' -o -iname 'notice*' \) -exec cp {} "$out/$path/" \;
    if [ -z "$(ls -A "$out/$path")" ]; then
      echo "licenses: module $path has no licence file in $dir" >&2
      exit 1
    fi
  done
chmod -R u=rwX,go=rX "$out"
