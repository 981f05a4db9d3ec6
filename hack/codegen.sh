#!/usr/bin/env bash
# Generates the typed Go clients of infra.cloudspace.dev/v1alpha1 into pkg/client from the API
# types (the +genclient markers): apply configurations, a clientset (with Apply), listers and
# informers, with k8s.io/code-generator's generators built from source (hack/tools.sh), in the
# order and with the flags its kube_codegen.sh uses. What was generated before is removed first,
# so that a type removed from the API leaves no stale code. `make generate` runs it; CI checks
# that it changes nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/tools.sh client-gen lister-gen informer-gen applyconfiguration-gen >/dev/null
module=github.com/cloudspace-dev/cloudspace-operator
api=$module/api/v1alpha1
out=pkg/client
header=hack/boilerplate.go.txt
# Types of other Kubernetes APIs the spec uses, and their apply configurations in client-go
# (those of meta/v1 are the generator's defaults).
externals=$(paste -sd, <<LIST
k8s.io/api/core/v1.EnvVar:k8s.io/client-go/applyconfigurations/core/v1
k8s.io/api/core/v1.Toleration:k8s.io/client-go/applyconfigurations/core/v1
k8s.io/api/core/v1.ResourceRequirements:k8s.io/client-go/applyconfigurations/core/v1
k8s.io/api/apps/v1.DaemonSetUpdateStrategy:k8s.io/client-go/applyconfigurations/apps/v1
LIST
)
rm -rf "$out"
bin/applyconfiguration-gen --go-header-file "$header" --output-dir "$out/applyconfiguration" \
  --output-pkg "$module/$out/applyconfiguration" --external-applyconfigurations "$externals" "$api"
bin/client-gen --go-header-file "$header" --output-dir "$out/clientset" --output-pkg "$module/$out/clientset" \
  --clientset-name versioned --apply-configuration-package "$module/$out/applyconfiguration" \
  --input-base "$module" --input api/v1alpha1
bin/lister-gen --go-header-file "$header" --output-dir "$out/listers" --output-pkg "$module/$out/listers" "$api"
bin/informer-gen --go-header-file "$header" --output-dir "$out/informers" --output-pkg "$module/$out/informers" \
  --versioned-clientset-package "$module/$out/clientset/versioned" --listers-package "$module/$out/listers" "$api"
