#!/usr/bin/env bash
# Builds the kubectl plugin's release archives (bin/release/kubectl-cloudspace_<os>_<arch>.tar.gz)
# reproducibly (-trimpath, no build ID, fixed file times and owners), and writes the krew
# manifest plugins/cloudspace.yaml for them: their download addresses and sha256 sums.
#
# Usage: hack/plugin-release.sh   (the version is VERSION's)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=v$(cat VERSION)
repo=https://github.com/cloudspace-dev/cloudspace-operator
out=bin/release
rm -rf "$out" && mkdir -p "$out"
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
entries=""
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  name=kubectl-cloudspace_${os}_${arch}
  dir=$(mktemp -d)
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-buildid= -s -w" -o "$dir/kubectl-cloudspace" ./cmd/kubectl-cloudspace
  tar --sort=name --mtime=2026-01-01T00:00:00Z --owner=0 --group=0 --numeric-owner -C "$dir" -cf - . | gzip -n >"$out/$name.tar.gz"
  rm -rf "$dir"
  sum=$(sha256sum "$out/$name.tar.gz" | cut -d' ' -f1)
  entries+="  - selector:
      matchLabels: {os: $os, arch: $arch}
    uri: $repo/releases/download/$version/$name.tar.gz
    sha256: $sum
    bin: kubectl-cloudspace
"
  echo "plugin-release: $name.tar.gz $sum"
done
cat >plugins/cloudspace.yaml <<YAML
# The krew manifest of the kubectl plugin, written by hack/plugin-release.sh for the archives
# it builds (attach them to the $version release). Install: kubectl krew install --manifest=plugins/cloudspace.yaml
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: cloudspace
spec:
  version: $version
  homepage: $repo
  shortDescription: See what the Cloudspace operator serves and made, and use your workspaces
  description: |
    kubectl cloudspace works with the Cloudspace operator's resources:
      kinds     the kinds the operator serves, with counts by readiness
      tree      a resource, the children the operator made for it (from its
                inventory, so missing ones show too) and why one is not ready
      ws        list, start, stop and open your workspaces through the
                operator's workspace API, with your token
    Exit codes tell scripts what happened: 0 done, 1 failed, 2 bad usage,
    3 not ready, 4 CRDs not installed, 5 not found, 6 not yours.
  platforms:
$entries
YAML
