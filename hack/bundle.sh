#!/usr/bin/env bash
# Regenerates bundle/ (and bundle.Dockerfile) from config/ with operator-sdk, reproducibly: the
# same tree always gives the same bundle, so CI can require `git diff` to stay empty.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/tools.sh operator-sdk kustomize >/dev/null
sdk=bin/operator-sdk
version=$(cat VERSION)
# Each kind's description and field descriptors, from the CRDs and the Go types: operator-sdk
# reads CSV markers only in Go projects, not in a hybrid one.
go run ./hack/csvdesc
"$sdk" generate kustomize manifests -q --apis-dir api --input-dir config/manifests --output-dir config/manifests
rm -rf bundle
# The channels, decided here alone (the test suites and catalogs read them from the bundle's
# metadata): stable, which users subscribe to, and candidate, where a release can be offered
# first; the catalogs list every version in both, each replacing the one before.
bin/kustomize build config/manifests | "$sdk" generate bundle -q --overwrite --version "$version" \
  --package cloudspace-operator --channels stable,candidate --default-channel stable --output-dir bundle
# operator-sdk stamps the time of each run (createdAt) and, built from source without its release
# ldflags, calls itself "unknown": put back the base's date, name the other.
# operator-sdk writes the CRDs back through Go types that lack newer fields (selectableFields):
# their specs are put back as config/crd builds them.
bin/kustomize build config/crd | go run ./hack/bundlecrds -manifests bundle/manifests
csv=bundle/manifests/cloudspace-operator.clusterserviceversion.yaml
created=$(grep -m1 '^    createdAt: ' config/manifests/bases/cloudspace-operator.clusterserviceversion.yaml)
sed -i "s/^    createdAt: .*/$created/" "$csv"
# The OpenShift releases the bundle is for: from 4.14, whose Kubernetes (1.27) is the CSV's
# minKubeVersion, as OpenShift's community catalog requires the two to agree.
ocp='com.redhat.openshift.versions'
sed -i "s/^  operators.operatorframework.io.bundle.package.v1: .*/&\n  $ocp: v4.14/" bundle/metadata/annotations.yaml
sed -i "s/^LABEL operators.operatorframework.io.bundle.package.v1=.*/&\nLABEL $ocp=v4.14/" bundle.Dockerfile
sdk_version=$(grep -o "operator-framework/operator-sdk v[0-9.]*" hack/tools/operator-sdk/go.mod | cut -d" " -f2)
sed -i "s/operator-sdk-unknown/operator-sdk-$sdk_version/" "$csv" bundle/metadata/annotations.yaml bundle.Dockerfile
"$sdk" bundle validate ./bundle --select-optional suite=operatorframework
