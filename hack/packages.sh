#!/usr/bin/env bash
# Makes sure the Debian packages a make target needs are installed: as root it installs what is
# missing with apt-get; otherwise it stops at once and names the packages. Every target that
# runs a program from Debian calls it first, so `make test` on a fresh machine sets itself up.
#
# Usage: hack/packages.sh GROUP...
#   launcher  the VM launcher's tests (images/vm-launcher/test.sh): its whole runs and shells
#   node      the real cluster (make real-cluster): runtime, CNI plugins, netfilter, host snapshot
#   images    make images: root filesystems and the VM disk, and their checks (boot, ssh, curl)
#   browser   the real-node suite's IDE screenshot
#   proto     make proto
#
# An entry is a package, or COMMAND:PACKAGE where any COMMAND on the PATH will do (Node.js, say,
# which a machine may have from elsewhere than Debian).
set -euo pipefail

group() {
  case "$1" in
    launcher) echo "qemu-utils genisoimage socat busybox-static openssl dash" ;;
    node) echo "runc containernetworking-plugins iptables conntrack nftables iproute2 busybox-static" ;;
    images) echo "mmdebstrap e2fsprogs fdisk grub-pc-bin qemu-utils qemu-system-x86 openssh-client
      curl genisoimage socat busybox-static iproute2 node:nodejs npm:npm" ;;
    browser) echo "chromium" ;;
    proto) echo "protobuf-compiler" ;;
    *) echo "packages: unknown group $1 (launcher, node, images, browser, proto)" >&2; return 1 ;;
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
  for entry in $(group "$g"); do
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
