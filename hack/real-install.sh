#!/usr/bin/env bash
# Installs the operator on the real cluster as users install it with operator-sdk (make
# real-install), upgrades it, or removes it (make real-uninstall). The images come from the
# cluster's registry (make images pushed them); the same commands work on any cluster whose
# registry holds them (see the README, "Installing with OLM", and docs/operations.md, "Installing with OLM: the details").
#
# Usage: hack/real-install.sh install|upgrade|uninstall
#   NAMESPACE  where the operator runs (default cloudspace-operator-system)
#   TIMEOUT    how long operator-sdk waits for the CSV (default 5m)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
env="${REAL_CLUSTER_DIR:-$root/.real-cluster}/env"
if [ ! -f "$env" ]; then
  echo "real-install: no real cluster ($env is missing): run make real-cluster and make images first" >&2
  exit 1
fi
# KUBECONFIG, REGISTRY and SSL_CERT_FILE (operator-sdk pulls the bundle and index images over
# TLS from the registry, whose CA the bundle holds).
. "$env"
sdk="$root/bin/operator-sdk"
namespace=${NAMESPACE:-cloudspace-operator-system}
timeout=${TIMEOUT:-5m}
version=$(cat "$root/VERSION")
start=$SECONDS

case "${1:-}" in
install)
  "$root/bin/kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$root/bin/kubectl" apply --server-side -f - >/dev/null
  # --index-image: the opm image operator-sdk serves its one-bundle catalog with;
  # --decompression-image: what unpacks that catalog in the registry pod (busybox).
  "$sdk" run bundle "$REGISTRY/cloudspace-operator-bundle:v$version" \
    --namespace "$namespace" --install-mode AllNamespaces --timeout "$timeout" \
    --index-image "$REGISTRY/opm:v1.55.0" --decompression-image "$REGISTRY/busybox:1.35"
  ;;
upgrade)
  "$sdk" run bundle-upgrade "$REGISTRY/cloudspace-operator-bundle:v${UPGRADE_VERSION:-0.2.0}" \
    --namespace "$namespace" --timeout "$timeout"
  ;;
uninstall)
  "$sdk" cleanup cloudspace-operator --namespace "$namespace" --timeout "$timeout"
  ;;
*)
  echo "usage: $0 install|upgrade|uninstall" >&2
  exit 2
  ;;
esac
echo "real-install: $1 done in $((SECONDS - start))s"
