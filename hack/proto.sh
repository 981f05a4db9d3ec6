#!/usr/bin/env bash
# Generates the gRPC code under pkg/ from proto/. protoc comes from Debian's protobuf-compiler
# package; the Go plugins are built from the module proxy by hack/tools.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v protoc >/dev/null || { echo "proto: protoc is missing: apt-get install protobuf-compiler" >&2; exit 1; }
hack/tools.sh protoc-gen-go protoc-gen-go-grpc
export PATH="$root/bin:$PATH"
mod=github.com/cloudspace-dev/cloudspace-operator
# The legacy service's file keeps its own go_package ("./;pb"); M maps it into this module unchanged.
mkdir -p pkg/pb pkg/workspacev1
protoc -I proto \
  --go_out=. --go_opt=module=$mod --go_opt=Mpb/service.proto=$mod/pkg/pb \
  --go-grpc_out=. --go-grpc_opt=module=$mod --go-grpc_opt=Mpb/service.proto=$mod/pkg/pb \
  pb/service.proto cloudspace/v1/workspace.proto
echo "proto: generated pkg/pb and pkg/workspacev1"
