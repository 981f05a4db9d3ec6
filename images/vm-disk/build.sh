#!/bin/sh
# build.sh builds the default VM disk: a small Debian guest with cloud-init, as a compressed
# qcow2 for a container disk (images/vm-disk/Dockerfile puts it at /disk/disk.qcow2). README.md
# beside this file says what is in the guest.
#
#   sh images/vm-disk/build.sh OUT_DIR        (as root) writes OUT_DIR/disk.qcow2
#
# Nothing is mounted on the host and no loop device is used: mmdebstrap builds the root
# filesystem in a directory (inside a private mount namespace, so its /proc, /sys and /dev mounts
# never reach the host's; where no such namespace can be made, as in a docker build without
# privileges, with nothing mounted at all), mke2fs -d turns the directory into an ext4 image,
# sfdisk writes a partition table into a raw file, the filesystem is copied into the partition,
# and GRUB for BIOS (grub-mkimage) is written in front of it.
#
# Reproducible: two runs against the same mirror content, with the same host tools (mmdebstrap,
# e2fsprogs, fdisk, grub-pc-bin, qemu-utils), give the same disk.qcow2 byte for byte. Every
# timestamp is SOURCE_DATE_EPOCH or older, the filesystem's UUID and hash seed and the partition
# table's disk id are fixed, and nothing unique to a machine is left in the guest: no machine-id
# (systemd creates one at first boot), no SSH host keys (made at first boot), no random seed,
# no apt lists or caches, no logs.
#
# Environment (all optional):
#   SOURCE_DATE_EPOCH   the timestamp of the build (default: fixed below)
#   DEBIAN_MIRROR       default http://deb.debian.org/debian
#   DEBIAN_SECURITY     default http://deb.debian.org/debian-security
#   DEBIAN_SUITE        default bookworm
#   VM_DISK_SIZE_MIB    the disk's virtual size in MiB (default 4096)
#   VM_DISK_APT_CACHE   a directory that keeps the downloaded .deb files between builds
#                       (created if missing; not used when unset)
#   VM_DISK_CHROOT_MOUNTS  "no": mount nothing in the chroot even where a private mount
#                       namespace can be made (what a docker build without privileges does;
#                       the result differs slightly, README.md says how)
set -eu

# --- fixed inputs of a reproducible build -------------------------------------------------------
# 2025-01-01T00:00:00Z: every file's time is clamped to it, and mke2fs takes it as "now".
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1735689600}
export SOURCE_DATE_EPOCH
# The root filesystem's UUID (the kernel's root=, GRUB's search and fstab name it) and the seed
# of its directory hashes; and the partition table's disk identifier.
ROOT_UUID=5c1d0e3a-7b2f-4c59-9a41-0c10d5fa0001
HASH_SEED=5c1d0e3a-7b2f-4c59-9a41-0c10d5fa0002
DISK_ID=0x5c1d0e3a
# --------------------------------------------------------------------------------------------------

DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY=${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DISK_MIB=${VM_DISK_SIZE_MIB:-4096}
APT_CACHE=${VM_DISK_APT_CACHE:-}
GRUB_DIR=/usr/lib/grub/i386-pc

# The guest's packages beyond Debian's "minbase" (Priority: required, and apt). Recommends are
# not installed: every package the guest needs is named here.
#   linux-image-cloud-amd64  the kernel for virtual machines (virtio, no hardware drivers)
#   systemd-sysv udev dbus libpam-systemd  init, devices, logind (the ACPI power button)
#   systemd-resolved         DNS for systemd-networkd's DHCP leases
#   cloud-init cloud-guest-utils sudo  NoCloud seed, default user `debian` with sudo, growpart
#   openssh-server           ssh (host keys made at first boot)
#   e2fsprogs                fsck of the root filesystem at boot
#   ca-certificates iproute2 procps netbase  what a usable server has
PACKAGES="linux-image-cloud-amd64 systemd-sysv udev dbus libpam-systemd systemd-resolved \
cloud-init cloud-guest-utils sudo openssh-server e2fsprogs ca-certificates iproute2 procps netbase"

START=$(date +%s)
step() {
	printf '[%4ss] %s\n' "$(($(date +%s) - START))" "$*" >&2
}

die() {
	printf 'build.sh: error: %s\n' "$*" >&2
	exit 1
}

# essential ROOT runs inside mmdebstrap (--essential-hook), before the packages beyond the
# essential ones are installed, so that the kernel's initramfs, made as they are, checks the
# root filesystem: its fsck hook would probe the root device for its type, which a chroot has
# not, so the type is given.
essential() {
	cat >"$1/etc/fstab" <<-EOF
		# <file system>	<mount point>	<type>	<options>	<dump>	<pass>
		UUID=$ROOT_UUID	/	ext4	errors=remount-ro	0	1
	EOF
	mkdir -p "$1/etc/initramfs-tools/conf.d"
	cat >"$1/etc/initramfs-tools/conf.d/fstype" <<-'EOF'
		# The root filesystem's type, for the initramfs's fsck (the image was built in a chroot).
		FSTYPE=ext4
	EOF
}

# customize ROOT runs inside mmdebstrap (--customize-hook), after every package is installed: it
# configures the guest. ROOT is the chroot; commands run in it with chroot.
customize() {
	R=$1

	# Names. cloud-init sets the hostname from the seed's meta-data (local-hostname).
	echo debian >"$R/etc/hostname"
	cat >"$R/etc/hosts" <<-'EOF'
		127.0.0.1	localhost
		::1		localhost ip6-localhost ip6-loopback
		ff02::1		ip6-allnodes
		ff02::2		ip6-allrouters
	EOF
	# DNS from systemd-resolved, which learns the servers from systemd-networkd's DHCP leases.
	ln -sfn ../run/systemd/resolve/stub-resolv.conf "$R/etc/resolv.conf"

	# DHCP on every Ethernet interface (the virtio NIC is enp0s5 under the launcher's q35
	# machine, eth0 with net.ifnames=0). At first boot cloud-init writes its own
	# 10-cloud-init-<nic>.network (DHCP, or the seed's network-config), which sorts first; this
	# one is the fallback for a boot without cloud-init.
	mkdir -p "$R/etc/systemd/network"
	cat >"$R/etc/systemd/network/90-dhcp-all.network" <<-'EOF'
		# Every Ethernet interface gets its address from DHCP (QEMU user networking: 10.0.2.15).
		[Match]
		Name=en* eth*

		[Network]
		DHCP=yes
	EOF

	# sshd: keys only. cloud-init's ssh_pwauth edits this same line of sshd_config (a user-data
	# `ssh_pwauth: true` turns passwords on), so it is set here rather than in sshd_config.d,
	# whose settings would win over cloud-init's.
	sed -i 's/^#\?PasswordAuthentication .*/PasswordAuthentication no/' "$R/etc/ssh/sshd_config"
	grep -q '^PasswordAuthentication no$' "$R/etc/ssh/sshd_config"
	grep -q '^KbdInteractiveAuthentication no$' "$R/etc/ssh/sshd_config"
	# Host keys: ECDSA and Ed25519, which every OpenSSH client of the last ten years takes. No
	# RSA: making a 3072-bit RSA key took 15 s of a first boot in software emulation. sshd
	# offers exactly these two. The image ships none: cloud-init makes them at an instance's
	# first boot, before sshd starts; ssh.service makes any still missing (a boot without
	# cloud-init), which ssh-keygen -A cannot do without making an RSA key too.
	cat >"$R/etc/ssh/sshd_config.d/50-host-keys.conf" <<-'EOF'
		# The default VM disk's host keys (images/vm-disk/build.sh): no RSA.
		HostKey /etc/ssh/ssh_host_ecdsa_key
		HostKey /etc/ssh/ssh_host_ed25519_key
	EOF
	mkdir -p "$R/etc/systemd/system/ssh.service.d"
	cat >"$R/etc/systemd/system/ssh.service.d/50-host-keys.conf" <<-'EOF'
		# The image ships no SSH host keys: make any that are missing before sshd starts.
		[Service]
		ExecStartPre=/bin/sh -c 'for t in ecdsa ed25519; do k=/etc/ssh/ssh_host_$${t}_key; [ -s $$k ] || ssh-keygen -q -t $$t -N "" -f $$k; done'
	EOF

	# The system locale: C.UTF-8 is built into the C library, nothing to generate.
	echo 'LANG=C.UTF-8' >"$R/etc/default/locale"

	# cloud-init: only NoCloud (the seed ISO labelled cidata the launcher attaches), and no
	# probing of cloud metadata services that do not exist here.
	cat >"$R/etc/cloud/cloud.cfg.d/90-cloudspace.cfg" <<-'EOF'
		# The default VM disk of the Cloudspace Operator: the launcher attaches a NoCloud seed
		# (an ISO 9660 volume labelled cidata) built from the VirtualMachine's spec.cloudInit.
		datasource_list: [ NoCloud, None ]
		# Password logins over ssh stay off (as sshd_config already says); the default user
		# `debian` logs in with the keys of ssh_authorized_keys.
		ssh_pwauth: false
		# Host keys made at first boot: those sshd_config.d/50-host-keys.conf names.
		ssh_genkeytypes: [ ecdsa, ed25519 ]
		# C.UTF-8 needs no locale generation (the default, en_US.UTF-8, is not generated).
		locale: C.UTF-8
		# GRUB is written by the image's build, not managed by a grub-pc package.
		grub_dpkg:
		  enabled: false
	EOF

	# GRUB's configuration. The bootloader itself is not a package of the guest: build.sh
	# writes it to the disk's first megabyte. /vmlinuz and /initrd.img are the symlinks the
	# kernel package keeps to the newest kernel, so an upgraded kernel boots without GRUB's tools.
	mkdir -p "$R/boot/grub"
	cat >"$R/boot/grub/grub.cfg" <<-EOF
		# The default VM disk boots the newest kernel (/vmlinuz, /initrd.img, the kernel
		# package's symlinks). Serial console: QEMU's -serial, the pod's log.
		serial --unit=0 --speed=115200
		terminal_input serial console
		terminal_output serial console
		set default=0
		# The menu shows when Esc is pressed within the second.
		set timeout_style=hidden
		set timeout=1
		menuentry 'Debian GNU/Linux' {
			search --no-floppy --fs-uuid --set=root $ROOT_UUID
			linux /vmlinuz root=UUID=$ROOT_UUID ro console=tty0 console=ttyS0,115200n8
			initrd /initrd.img
		}
		menuentry 'Debian GNU/Linux (previous kernel)' {
			search --no-floppy --fs-uuid --set=root $ROOT_UUID
			linux /vmlinuz.old root=UUID=$ROOT_UUID ro console=tty0 console=ttyS0,115200n8
			initrd /initrd.img.old
		}
	EOF

	chroot "$R" systemctl enable systemd-networkd.service systemd-resolved.service ssh.service

	# Machine-specific state, made at first boot.
	rm -f "$R"/etc/ssh/ssh_host_*
	rm -f "$R/var/lib/systemd/random-seed" "$R/var/lib/dbus/machine-id"
	: >"$R/etc/machine-id"
	# Caches and logs (mmdebstrap removes apt's lists and archives and its own logs after this).
	rm -rf "$R"/var/cache/debconf/*-old "$R"/var/lib/dpkg/*-old "$R"/var/cache/man/*
	find "$R/var/log" -type f -exec truncate -s 0 {} +
}

case ${1:-} in
--essential | --customize)
	"${1#--}" "$2"
	exit 0
	;;
esac

[ $# -eq 1 ] || die "usage: sh build.sh OUT_DIR"
OUT_DIR=$1
[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap's root mode, file ownership in the image)"
for tool in mmdebstrap unshare mke2fs debugfs dumpe2fs e2fsck sfdisk grub-mkimage qemu-img; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (packages: mmdebstrap e2fsprogs fdisk grub-pc-bin qemu-utils)"
done
[ -f "$GRUB_DIR/boot.img" ] || die "$GRUB_DIR/boot.img is missing (package grub-pc-bin)"
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)

TMP=$(mktemp -d "${TMPDIR:-/var/tmp}/vm-disk.XXXXXX")
# mmdebstrap's mounts live in a private mount namespace that ends with it: nothing is mounted
# under TMP once it returns, so removing TMP never reaches through a mount.
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ROOT=$TMP/root

step "mmdebstrap: Debian $DEBIAN_SUITE into $ROOT"
set -- --mode=root --format=directory --variant=minbase --architectures=amd64 \
	--include="$(echo "$PACKAGES" | tr -s ' ' ',')" \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--dpkgopt='path-exclude=/usr/share/lintian/*'
if [ -n "$APT_CACHE" ]; then
	mkdir -p "$APT_CACHE"
	APT_CACHE=$(cd "$APT_CACHE" && pwd)
	set -- "$@" --skip=essential/unlink \
		--setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
		--setup-hook="sync-in '$APT_CACHE' /var/cache/apt/archives/" \
		--customize-hook="sync-out /var/cache/apt/archives '$APT_CACHE'"
fi
set -- "$@" --essential-hook="sh '$SELF' --essential \"\$1\"" \
	--customize-hook="sh '$SELF' --customize \"\$1\"" \
	"$DEBIAN_SUITE" "$ROOT" \
	"deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
	"deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
	"deb $DEBIAN_SECURITY $DEBIAN_SUITE-security main"
# mmdebstrap mounts /proc, /sys and /dev into the chroot for the packages' scripts: in a private
# mount namespace, which the host never sees and which ends with it. Where none can be made (a
# container build without privileges), it mounts nothing: the packages installed here need none.
if [ "${VM_DISK_CHROOT_MOUNTS:-yes}" = yes ] && unshare --mount --propagation private true 2>/dev/null; then
	unshare --mount --propagation private -- mmdebstrap --quiet "$@"
else
	step "no private mount namespace: nothing mounted in the chroot"
	mmdebstrap --quiet --skip=chroot/mount "$@"
fi
if [ -n "$APT_CACHE" ]; then
	rm -f "$APT_CACHE/lock"
	rm -rf "$APT_CACHE/partial"
fi
# mmdebstrap copies the host's resolv.conf and hostname in for apt; the guest's own are links
# and names set in customize, checked here.
[ -L "$ROOT/etc/resolv.conf" ] || die "customize did not run"
KERNEL=$(readlink "$ROOT/vmlinuz") || die "no /vmlinuz symlink in the guest"
step "kernel: $KERNEL; root filesystem: $(du -sm "$ROOT" | cut -f1) MiB"

step "clamping file times to $SOURCE_DATE_EPOCH"
# Files made by maintainer scripts carry the build's time; those from packages keep theirs.
find "$ROOT" -newermt "@$SOURCE_DATE_EPOCH" -print0 |
	xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"

FS_MIB=$((DISK_MIB - 1))
step "ext4 filesystem ($FS_MIB MiB) from the directory"
export E2FSPROGS_FAKE_TIME="$SOURCE_DATE_EPOCH"
# No metadata_csum_seed and no orphan_file: GRUB 2.06 and older e2fsck read the rest.
mke2fs -q -F -t ext4 -b 4096 -L root -U "$ROOT_UUID" -m 1 \
	-O '^metadata_csum_seed,^orphan_file' \
	-E "hash_seed=$HASH_SEED,lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0,nodiscard" \
	-d "$ROOT" "$TMP/root.ext4" "${FS_MIB}M"

# mke2fs -d copies each file's atime and ctime, which are the host's and this build's: set
# both (and the creation time) of every inode in use to SOURCE_DATE_EPOCH with debugfs.
step "normalizing inode times"
dumpe2fs "$TMP/root.ext4" 2>/dev/null | awk -v t="$SOURCE_DATE_EPOCH" '
	/^Inodes per group:/ { ipg = $4 }
	/^Group [0-9]+:/ { g = $2 + 0 }
	/^  Free inodes: / {
		sub(/^  Free inodes: */, "")
		first = g * ipg + 1
		last = (g + 1) * ipg
		split("", free)
		n = split($0, ranges, /, */)
		for (i = 1; i <= n; i++) {
			if (ranges[i] == "") continue
			if (split(ranges[i], ab, "-") == 1) ab[2] = ab[1]
			free[ab[1] + 0] = ab[2] + 0
		}
		for (ino = first; ino <= last; ino++) {
			if (ino in free) { ino = free[ino]; continue }
			printf "sif <%d> atime @%s\nsif <%d> ctime @%s\nsif <%d> crtime @%s\n", ino, t, ino, t, ino, t
		}
	}' >"$TMP/times.debugfs"
[ -s "$TMP/times.debugfs" ] || die "no inodes found in the new filesystem"
debugfs -w -f "$TMP/times.debugfs" "$TMP/root.ext4" >"$TMP/debugfs.log" 2>&1 ||
	die "debugfs failed: $(tail -n 5 "$TMP/debugfs.log")"
if grep -v '^debugfs' "$TMP/debugfs.log" | grep -q .; then
	die "debugfs: $(grep -v '^debugfs' "$TMP/debugfs.log" | head -n 5)"
fi
e2fsck -fn "$TMP/root.ext4" >"$TMP/e2fsck.log" 2>&1 || die "e2fsck: $(cat "$TMP/e2fsck.log")"
step "inodes: $(($(wc -l <"$TMP/times.debugfs") / 3)) in use"

step "partition table and filesystem into a ${DISK_MIB} MiB raw disk"
RAW=$TMP/disk.raw
rm -f "$RAW"
truncate -s "${DISK_MIB}M" "$RAW"
# One bootable Linux partition from 1 MiB to the end; the gap before it holds GRUB's core.img.
sfdisk --quiet --no-reread --no-tell-kernel --wipe never "$RAW" <<-EOF
	label: dos
	label-id: $DISK_ID
	unit: sectors

	start=2048, type=83, bootable
EOF
dd if="$TMP/root.ext4" of="$RAW" bs=1M seek=1 conv=notrunc,sparse status=none
rm -f "$TMP/root.ext4"

step "GRUB for BIOS (grub-mkimage i386-pc)"
# core.img finds the root filesystem by its UUID and reads /boot/grub/grub.cfg there; every
# module that configuration needs is built in, so the guest has no GRUB files but grub.cfg.
cat >"$TMP/early.cfg" <<-EOF
	search --no-floppy --fs-uuid --set=root $ROOT_UUID
	set prefix=(\$root)/boot/grub
EOF
grub-mkimage -O i386-pc -d "$GRUB_DIR" -o "$TMP/core.img" -c "$TMP/early.cfg" \
	-p '(hd0,msdos1)/boot/grub' \
	biosdisk part_msdos ext2 search search_fs_uuid normal configfile linux serial terminal echo test
CORE_SECTORS=$((($(stat -c %s "$TMP/core.img") + 511) / 512))
[ "$CORE_SECTORS" -le 2047 ] || die "core.img ($CORE_SECTORS sectors) does not fit before the partition"
# boot.img's code, not the partition table after it, into the MBR; core.img from sector 1 on,
# where boot.img looks for it (grub-mkimage filled in core.img's own sector count).
dd if="$GRUB_DIR/boot.img" of="$RAW" bs=440 count=1 conv=notrunc status=none
dd if="$TMP/core.img" of="$RAW" bs=512 seek=1 conv=notrunc status=none
step "core.img: $CORE_SECTORS sectors"

step "compressed qcow2"
qemu-img convert -c -f raw -O qcow2 -o compression_type=zlib "$RAW" "$TMP/disk.qcow2"
rm -f "$RAW"
qemu-img check -q "$TMP/disk.qcow2"
mv -f "$TMP/disk.qcow2" "$OUT_DIR/disk.qcow2"
rm -rf "$TMP"

step "done: $OUT_DIR/disk.qcow2, $(stat -c %s "$OUT_DIR/disk.qcow2") bytes, virtual $DISK_MIB MiB"
step "sha256 $(sha256sum "$OUT_DIR/disk.qcow2" | cut -d' ' -f1)"
