#!/bin/sh
# Writes Debian's static busybox for linux/ARCH to OUT: the images' busybox on an architecture
# other than the host's (whose own, from busybox-static, they copy). mmdebstrap's extract variant
# unpacks the package without running anything of it, so no emulation (binfmt) is needed.
#
# Usage: hack/busybox/extract.sh ARCH OUT
set -eu
arch=$1
out=$(realpath "$2")
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unshare --mount --propagation private mmdebstrap --quiet --variant=extract --arch="$arch" \
	--skip=check/qemu --include=busybox-static trixie "$dir/root" "$mirror"
cp "$dir/root/usr/bin/busybox" "$out"
