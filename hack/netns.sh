#!/usr/bin/env bash
# Runs a command in private network, PID and mount namespaces (as root): its servers are
# reachable from nothing outside, whatever address they bind (OLM's catalog operator and
# `opm serve` listen on every interface), and when the command ends the kernel ends every
# process it left behind, since the namespace's first process (the shell below) is gone.
#
# Usage: hack/netns.sh COMMAND [ARG...]
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "netns: needs root (unshare of the network and PID namespaces)" >&2
  exit 1
fi
exec unshare --net --pid --fork --mount-proc sh -c '
  ip link set lo up
  "$@" &
  child=$!
  trap "kill -TERM $child 2>/dev/null" INT TERM
  wait $child' netns "$@"
