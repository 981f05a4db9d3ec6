#!/usr/bin/env bash
# Makes sure the Debian packages a make target needs are installed: as root it installs what is
# missing with apt-get; otherwise it stops at once and names the packages. Every target that
# runs a program from Debian calls it first, so `make test` on a fresh machine sets itself up.
#
# Usage: hack/packages.sh GROUP...
#   launcher  the VM launcher's tests (images/vm-launcher/test.sh): its whole runs and shells
#   node      the real cluster (make real-cluster): runtime, CNI plugins, netfilter, host snapshot
#   images    make images: root filesystems and the VM disk, and their checks (boot, ssh, curl);
#             arch-test: mmdebstrap's check that another architecture's programs run (emulated)
#   olm       the OLM suite's private network namespace
#   e2e       the end-to-end suite's third-party web backend: git for its bundle, its database
#   browser   the real-node suite's IDE screenshot
#   proto     make proto
#
# An entry is COMMAND:PACKAGE where any COMMAND on the PATH will do, whoever installed it
# (Node.js or protoc from elsewhere than Debian, say), or a bare PACKAGE where a file only that
# Debian package puts in place is needed (the static busybox the images copy, runc at the path
# containerd is told, the CNI plugins' directory, GRUB's boot image).
set -euo pipefail

group() {
  case "$1" in
    launcher) echo "qemu-img:qemu-utils genisoimage:genisoimage socat:socat busybox:busybox-static openssl:openssl dash:dash" ;;
    node) echo "runc containernetworking-plugins busybox-static iptables:iptables conntrack:conntrack nft:nftables ip:iproute2 ipset:ipset" ;;
    images) echo "mmdebstrap:mmdebstrap arch-test:arch-test mke2fs:e2fsprogs sfdisk:fdisk grub-pc-bin qemu-img:qemu-utils
      qemu-system-x86_64:qemu-system-x86 ssh:openssh-client curl:curl genisoimage:genisoimage socat:socat
      busybox-static ss:iproute2 node:nodejs npm:npm" ;;
    olm) echo "ip:iproute2" ;;
    e2e) echo "git:git mariadbd:mariadb-server-core" ;;
    browser) echo "chromium:chromium" ;;
    proto) echo "protoc:protobuf-compiler" ;;
    *) echo "packages: unknown group $1 (launcher, node, images, olm, e2e, browser, proto)" >&2; return 1 ;;
  esac
}

installed() {
  local entry=$1
  if [[ $entry == *:* ]]; then
    command -v "${entry%%:*}" >/dev/null 2>&1
  else
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$entry" 2>/dev/null)" = installed ]
  fi
}

missing=()
for g in "$@"; do
  entries=$(group "$g")
  for entry in $entries; do
    installed "$entry" && continue
    pkg=${entry##*:}
    [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
  done
done
[ ${#missing[@]} -gt 0 ] || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "packages: $* need Debian packages that are missing: ${missing[*]}" >&2
  echo "packages: install them as root (apt-get install --no-install-recommends ${missing[*]}), or run make as root" >&2
  exit 1
fi
start=$SECONDS
echo "packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet, or stale ones: update only when the install fails.
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
  || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
echo "packages: installed ${missing[*]} in $((SECONDS - start))s"
