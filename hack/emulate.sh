#!/bin/sh
# Runs a command that executes programs of another architecture (a root filesystem of Debian's
# arm64 packages being configured, its tests), without touching the host's binfmt_misc:
#
#   hack/emulate.sh ARCH CMD...     ARCH is Debian's name (arm64); the host's runs CMD as it is
#
# CMD runs as root in a user namespace of its own that maps every id to itself, with its own
# mount and PID namespaces. Linux (6.7 and later) gives such a namespace a binfmt_misc instance
# of its own: QEMU's user-mode emulator for ARCH is registered there alone, and the registration
# ends with the namespace. The emulator is Debian's qemu-user-static, downloaded with apt and
# unpacked into a cache (${XDG_CACHE_HOME:-~/.cache}/cloudspace-operator/qemu-user), never
# installed: its package would register it with the host's binfmt_misc. The network is the
# host's (packages are downloaded), so mmdebstrap cannot mount a /sys there: it says so and goes
# on, and nothing these builds run reads it.
set -eu
die() { echo "emulate.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: hack/emulate.sh ARCH CMD..."
arch=$1
shift
[ "$arch" != "$(dpkg --print-architecture)" ] || exec "$@"

# Inside the namespace (see below): the private binfmt_misc, the emulator, then CMD.
if [ "${EMULATE_INSIDE:-}" = 1 ]; then
	unset EMULATE_INSIDE
	mount -t proc proc /proc
	mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
		|| die "no binfmt_misc of a user namespace's own here (Linux 6.7 or later has one): $(uname -r)"
	# Debian's registration, pointed at the unpacked emulator (flags POF: the F opens it now,
	# so that it runs inside chroots too).
	sed "s#:/usr/libexec/#:$EMULATE_QEMU/usr/libexec/#" "$EMULATE_QEMU/usr/lib/binfmt.d/qemu-$EMULATE_CPU.conf" \
		>/proc/sys/fs/binfmt_misc/register
	exec "$@"
fi

case $arch in
arm64) cpu=aarch64 ;;
*) die "no emulation set up for $arch (arm64 is)" ;;
esac

# The emulator, unpacked once per version.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/cloudspace-operator/qemu-user
version=$(apt-cache show --no-all-versions qemu-user-static 2>/dev/null | sed -n 's/^Version: //p')
if [ -z "$version" ]; then
	apt-get update >/dev/null
	version=$(apt-cache show --no-all-versions qemu-user-static | sed -n 's/^Version: //p')
fi
qemu=$cache/$(printf '%s' "$version" | tr ':' '_')
if [ ! -x "$qemu/usr/bin/qemu-$cpu-static" ]; then
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download "qemu-user-static=$version" >/dev/null 2>&1) \
		|| { rm -rf "$tmp"; die "apt-get download qemu-user-static=$version failed"; }
	dpkg-deb -x "$tmp"/qemu-user-static_*.deb "$tmp/root" && rm -f "$tmp"/*.deb
	rm -rf "$qemu" && mkdir -p "$cache" && mv "$tmp/root" "$qemu" && rm -rf "$tmp"
fi

# A user namespace mapping every id to itself (unshare --map-users needs newuidmap): the child
# waits on a FIFO until this shell, root outside, has written its maps.
fifo=$(mktemp -u) && mkfifo "$fifo"
EMULATE_INSIDE=1 EMULATE_QEMU=$qemu EMULATE_CPU=$cpu \
	unshare --user --mount --pid --fork --propagation private \
	sh -c 'read -r _ <"$0" && exec "$@"' "$fifo" sh "$0" "$arch" "$@" &
pid=$!
self=$(readlink /proc/self/ns/user)
while [ "$(readlink "/proc/$pid/ns/user" 2>/dev/null || echo "$self")" = "$self" ]; do
	kill -0 "$pid" 2>/dev/null || { rm -f "$fifo"; wait "$pid"; die "unshare failed"; }
	sleep 0.05
done
# unshare --fork: the namespace's processes are the child of $pid, which shares its namespace.
echo '0 0 4294967295' >"/proc/$pid/uid_map"
echo '0 0 4294967295' >"/proc/$pid/gid_map"
echo go >"$fifo"
rm -f "$fifo"
wait "$pid"
