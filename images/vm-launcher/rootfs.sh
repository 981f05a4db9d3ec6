#!/bin/sh
# Builds the launcher image's root filesystem without Docker, as the Dockerfile beside this file
# describes (`make images` wraps it into the image): Debian bookworm's minimal base with QEMU,
# OVMF, qemu-img, genisoimage, socat and a static busybox, the qemu user (uid and gid 107), the
# launcher, and the launcher's own tests run inside it under its shells.
#
# Usage: sh images/vm-launcher/rootfs.sh OUT.tar   (as root)
#        ARCH=arm64 hack/emulate.sh arm64 sh images/vm-launcher/rootfs.sh OUT.tar
#
# ARCH is the Debian architecture of the root filesystem, the host's by default; another's
# packages are configured and its tests run under hack/emulate.sh's QEMU. On every architecture
# the guest is x86-64 (qemu-system-x86, OVMF): elsewhere than on an x86-64 node it runs under
# software emulation (tcg), as the launcher says.
#
# Reproducible: SOURCE_DATE_EPOCH clamps every time and mmdebstrap writes a sorted tar with
# numeric owners, so the same Debian packages give the same bytes. mmdebstrap's mounts (/proc,
# /dev in the chroot) happen in a private mount namespace and end with it.
set -eu

# --settle ROOT waits (at most 30 s) until no process runs in ROOT any more: what the tests
# started in the background and stopped ends on its own (a listener's children sleep out their
# 5 s), and mmdebstrap cannot unmount ROOT's /dev while they hold it; under emulation that
# takes longer.
if [ "${1:-}" = --settle ]; then
	for _ in $(seq 300); do
		busy=
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/root" 2>/dev/null)" != "$2" ] || busy=${p#/proc/}
		done
		[ -n "$busy" ] || exit 0
		sleep 0.1
	done
	echo "rootfs.sh: process $busy still runs in $2" >&2
	exit 1
fi
out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
export SOURCE_DATE_EPOCH=1735689600
start=$(date +%s)
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
arch=${ARCH:-$(dpkg --print-architecture)}

echo "vm-launcher rootfs: mmdebstrap bookworm ($arch) from $mirror"
unshare --mount --propagation private mmdebstrap --quiet --variant=minbase --arch="$arch" \
	--aptopt='APT::Install-Recommends "false"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--include=qemu-system-x86,ovmf,qemu-utils,genisoimage,socat,busybox-static \
	--customize-hook='if chroot "$1" ldd /bin/busybox >/dev/null 2>&1; then echo "/bin/busybox is dynamically linked" >&2; exit 1; fi' \
	--customize-hook='chroot "$1" groupadd --system --gid 107 qemu' \
	--customize-hook='chroot "$1" useradd --system --uid 107 --gid 107 --home-dir /var/run/vm --no-create-home --shell /usr/sbin/nologin qemu' \
	--customize-hook='mkdir -p "$1/boot-disk" "$1/data" "$1/cloud-init" "$1/var/run/vm" && chown 107:107 "$1/boot-disk" "$1/data" "$1/var/run/vm"' \
	--customize-hook="mkdir -p \"\$1/tmp/vm-launcher-test\" && cp '$here/vm-launcher' '$here/test.sh' \"\$1/tmp/vm-launcher-test/\"" \
	--customize-hook='chroot "$1" sh /tmp/vm-launcher-test/test.sh >/dev/null && rm -rf "$1/tmp/vm-launcher-test"' \
	--customize-hook="sh '$here/rootfs.sh' --settle \"\$1\"" \
	--customize-hook="install -m 0755 '$here/vm-launcher' \"\$1/usr/local/bin/vm-launcher\"" \
	--customize-hook='rm -rf "$1"/var/cache/debconf/*-old "$1"/var/log/* "$1"/var/cache/ldconfig/aux-cache "$1"/etc/machine-id' \
	--customize-hook='touch "$1/etc/machine-id"' \
	bookworm "$out" "$mirror"
echo "vm-launcher rootfs: $(du -m "$out" | cut -f1) MiB in $(($(date +%s) - start))s"
