# Cloudspace Operator. `make help` lists the targets.

VERSION ?= 0.1.0
IMG ?= cloudspace-operator:v$(VERSION)
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN := $(CURDIR)/bin
# Everything make builds, vets and tests is compiled as the operator's image is (test/infra/
# images: no cgo, -trimpath), so that the image reuses what vet and the suites compiled: on a
# cold machine, compiling it all again for the image took 238 s.
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath
# The Go compiler collects garbage less often with GOGC=400: a cold build of helm took 152 s
# rather than 180 s (user CPU 244 s rather than 298 s) for 6% more peak memory. Only compiles
# get it (hack/tools.sh, vet, which compiles what the suites then reuse): the test binaries and
# the operator under test keep Go's default.
export BUILD_GOGC ?= 400
TOOLS := $(CURDIR)/hack/tools.sh
# PACKAGES installs the Debian packages a target needs when they are missing (as root), or names them.
PACKAGES := $(CURDIR)/hack/packages.sh
DEV_CLUSTER_DIR ?= $(CURDIR)/.dev-cluster
export DEV_CLUSTER_DIR

KUBECTL := $(BIN)/kubectl
# DEV_WEBHOOK_ADDR is where make run serves the admission webhooks on the embedded cluster.
DEV_WEBHOOK_ADDR ?= 127.0.0.1:9444
# OPERATOR_NAMESPACE holds the operator's Secrets (API tokens, the IDE access key) under make run.
OPERATOR_NAMESPACE ?= cloudspace-operator-system
KUSTOMIZE := $(BIN)/kustomize
CONTROLLER_GEN := $(BIN)/controller-gen

# The suites and the infrastructure they and hack/ use (images, bundles, the real cluster) are the
# test module, test/go.mod: the operator's go.mod holds only what it ships with. Its programs
# are built into bin/ and run from the top directory, where relative paths in *_ARGS point.
TEST_MOD := $(CURDIR)/test
# Packages of pure unit tests: the operator's module but the examples (envtest), and the test
# module's infrastructure and framework.
UNIT_PKGS = $$(go list ./... | grep -v -e /examples/)
TEST_UNIT_PKGS = ./infra/... ./cmd/... ./framework/...
GO_TEST_FLAGS ?= -count=1

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Build every tool binary from source into bin/ (only what is missing or at the wrong version).
	$(TOOLS) all

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types, and their typed clients in pkg/client.
	$(TOOLS) controller-gen
	$(CONTROLLER_GEN) object paths="./api/..."
	hack/codegen.sh

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the kubebuilder markers.
	$(TOOLS) controller-gen
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: proto
proto: ## Regenerate the gRPC code in pkg/ from proto/ (protoc from Debian's protobuf-compiler).
	$(PACKAGES) proto
	hack/proto.sh

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet on both modules.
	GOGC=$(BUILD_GOGC) go vet ./...
	GOGC=$(BUILD_GOGC) go -C $(TEST_MOD) vet ./...

.PHONY: verify
verify: ## go vet, gofmt, and generated code, CRDs, RBAC and the bundle as their generators make them (bundle validated without a warning).
	hack/verify.sh

.PHONY: lint-charts
lint-charts: ## Lint every chart with Helm's own linter as helm lint --strict does (a warning fails), once with each of its ci/*-values.yaml files.
	go build -o $(BIN)/chartlint ./hack/chartlint
	$(BIN)/chartlint helm-charts/*/

.PHONY: golden
golden: ## Regenerate the chart golden files under controllers/testdata/ after an intended change.
	go test ./controllers/ -run TestGolden -update

.PHONY: test
test: ## Run the checks (vet, gofmt, generated files), chart lint, unit, alerting rules, short fuzz, launcher, scorecard, envtest, end-to-end, OLM install, short chaos, abuse and real-node tests.
	hack/test.sh verify lint-charts test-unit test-launcher test-scorecard test-integration test-e2e test-olm test-chaos test-abuse test-alerts -- test-real -- test-fuzz

.PHONY: test-unit
test-unit: ## Run the unit tests (pure functions, golden files).
	go test $(GO_TEST_FLAGS) $(UNIT_PKGS)
	go -C $(TEST_MOD) test $(GO_TEST_FLAGS) $(TEST_UNIT_PKGS)

.PHONY: test-alerts
test-alerts: ## Check the alerting rules (config/prometheus) with promtool and run their unit tests; each alert has a runbook (docs/runbooks.md).
	$(TOOLS) promtool
	go -C $(TEST_MOD) test $(GO_TEST_FLAGS) ./alerts/

.PHONY: test-launcher
test-launcher: ## Test the VirtualMachine launcher script under every shell, and whole runs with qemu-img, genisoimage and socat.
	$(PACKAGES) launcher
	sh images/vm-launcher/test.sh

.PHONY: test-scorecard
test-scorecard: ## Run scorecard's six stock tests on bundle/ with the scorecard-test binary (as root: a private mount namespace).
	hack/scorecard.sh

.PHONY: test-integration
test-integration: ## Run the integration tests and the examples' tests against a real kube-apiserver and etcd (envtest).
	$(TOOLS) etcd kube-apiserver
	KUBEBUILDER_ASSETS=$(BIN) go -C $(TEST_MOD) test $(GO_TEST_FLAGS) -timeout 15m ./integration/...
	KUBEBUILDER_ASSETS=$(BIN) go test $(GO_TEST_FLAGS) -timeout 15m ./examples/...

.PHONY: test-e2e
test-e2e: build ## Run the end-to-end tests on a private embedded (KWOK) cluster with the operator running, and the tutorial's web backend against it.
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	$(PACKAGES) e2e
	E2E_BIN_DIR=$(BIN) E2E_OPERATOR=$(BIN)/manager E2E_SCORECARD_TESTS=$(BIN)/scorecard-tests E2E_PLUGIN=$(BIN)/kubectl-cloudspace go -C $(TEST_MOD) test $(GO_TEST_FLAGS) -timeout 20m ./e2e/...

.PHONY: test-olm
test-olm: build ## Install the bundle through OLM (catalog, Subscription, upgrade) on a private embedded cluster, in a private network namespace (as root).
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl olm catalog opm
	$(PACKAGES) olm
	go -C $(TEST_MOD) test -c -o $(BIN)/olm.test ./olm
	OLM_CRDS=$$(cd hack/tools/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager)/deploy/chart/crds \
		E2E_BIN_DIR=$(BIN) E2E_OPERATOR=$(BIN)/manager NETNS=1 \
		hack/netns.sh $(BIN)/olm.test -test.count=1 -test.timeout=15m $(if $(V),-test.v)

BENCH_N ?= 500
BENCH_ARGS ?=
# The scale phase's numbers of Demos (empty: none).
BENCH_SCALE ?= 1000,5000,10000

.PHONY: bench
bench: build ## Benchmark on a private embedded cluster (BENCH_N GenericDaemons; figures and JSON in bin/bench.json).
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	go -C $(TEST_MOD) build -o $(BIN)/bench ./bench
	$(BIN)/bench -n $(BENCH_N) -scale=$(BENCH_SCALE) -json $(BIN)/bench.json $(BENCH_ARGS)

CHAOS_ARGS ?=

.PHONY: chaos
chaos: build ## Kill the operator and the control plane while it works, on a private embedded cluster (bounded; prints what it found; CHAOS_ARGS passes flags).
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	go -C $(TEST_MOD) build -o $(BIN)/chaos ./chaos
	$(BIN)/chaos -json $(BIN)/chaos.json $(CHAOS_ARGS)

.PHONY: test-chaos
test-chaos: build ## The short form of make chaos: fewer resources, 3 kills, one outage, the leader killed.
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	go -C $(TEST_MOD) build -o $(BIN)/chaos ./chaos
	$(BIN)/chaos -demos 40 -daemons 10 -workspaces 3 -kills 3 -outage 3s -quiet 6s -slack 2s -timeout 5m

FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each (default 30s); a finding is written to the package's testdata/fuzz/.
	hack/fuzz.sh $(FUZZTIME)

.PHONY: test-fuzz
test-fuzz: ## The short form of make fuzz: every fuzz target for 5s.
	hack/fuzz.sh 5s

.PHONY: abuse
abuse: build ## Attack the operator as hostile tenants would on a private embedded cluster (bounded; a table: attack, peak RSS, answer; fails if one gets through).
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	go -C $(TEST_MOD) build -o $(BIN)/abuse ./abuse
	$(BIN)/abuse $(ABUSE_ARGS)

.PHONY: test-abuse
test-abuse: abuse ## make abuse with its default attacks, as part of make test.

##@ Build

.PHONY: build
build: ## Build the operator (bin/manager), its scorecard tests and its kubectl plugin (bin/kubectl-cloudspace).
	go build -o $(BIN)/manager .
	go build -o $(BIN)/scorecard-tests ./cmd/scorecard-tests
	go build -o $(BIN)/kubectl-cloudspace ./cmd/kubectl-cloudspace

.PHONY: plugin-release
plugin-release: ## Build the kubectl plugin's release archives (bin/release) and write its krew manifest (plugins/).
	hack/plugin-release.sh

# With DEV_CLUSTER=1, or when no cluster is named by KUBECONFIG (or ~/.kube/config), `make run`
# starts the embedded cluster and points the operator at it.
ifeq ($(DEV_CLUSTER),)
ifeq ($(wildcard $(or $(KUBECONFIG),$(HOME)/.kube/config)),)
DEV_CLUSTER := 1
endif
endif

.PHONY: run
run: manifests generate build ## Run the operator in the foreground (on the embedded cluster when no cluster is configured).
ifeq ($(DEV_CLUSTER),1)
	$(MAKE) dev-cluster
	@echo "run: operator against the embedded cluster; KUBECONFIG=$(DEV_CLUSTER_DIR)/kubeconfig"
	KUBECONFIG=$(DEV_CLUSTER_DIR)/kubeconfig $(MAKE) install
	go -C $(TEST_MOD) build -o $(BIN)/devwebhook ./cmd/devwebhook
	KUBECONFIG=$(DEV_CLUSTER_DIR)/kubeconfig $(BIN)/devwebhook -dir $(DEV_CLUSTER_DIR)/webhook -addr $(DEV_WEBHOOK_ADDR)
	KUBECONFIG=$(DEV_CLUSTER_DIR)/kubeconfig exec $(BIN)/manager \
		--health-probe-bind-address=127.0.0.1:8081 --leader-elect=false \
		--webhook-bind-address=$(DEV_WEBHOOK_ADDR) --webhook-cert-dir=$(DEV_CLUSTER_DIR)/webhook $(RUN_ARGS)
else
	$(MAKE) install
	exec $(BIN)/manager --health-probe-bind-address=127.0.0.1:8081 $(RUN_ARGS)
endif

##@ Embedded cluster

.PHONY: dev-cluster
dev-cluster: ## Start the embedded KWOK cluster (3 fake nodes) on 127.0.0.1; idempotent.
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl
	hack/dev-cluster.sh up

.PHONY: dev-cluster-down
dev-cluster-down: ## Stop and remove the embedded cluster.
	@if [ -x $(BIN)/kwokctl ]; then hack/dev-cluster.sh down; else rm -rf $(DEV_CLUSTER_DIR); fi

##@ Real cluster

.PHONY: images
images: ## Build every image the product ships without Docker (same digests every run); pushed to the real cluster's registry, by digest, when it runs.
	$(PACKAGES) images
	$(TOOLS) opm grpc_health_probe cpb scorecard-test
	go -C $(TEST_MOD) build -o $(BIN)/build-images ./cmd/images
	$(BIN)/build-images $(IMAGES_ARGS)

.PHONY: real-cluster
real-cluster: ## Start a real cluster on this machine, in private namespaces (as root): a control-plane node and REAL_NODES workers (2) with containerd, kubelet, kube-proxy and kube-router enforcing NetworkPolicy, a registry, CoreDNS, a volume provisioner and OLM; idempotent.
	$(PACKAGES) node
	$(TOOLS) etcd kube-apiserver kube-controller-manager kube-scheduler kubectl olm catalog opm scorecard-test operator-sdk real
	go -C $(TEST_MOD) build -o $(BIN)/realcluster ./cmd/realcluster
	$(BIN)/realcluster up

.PHONY: real-cluster-down
real-cluster-down: ## Stop the real cluster and remove every process, cgroup, mount and file it made.
	go -C $(TEST_MOD) build -o $(BIN)/realcluster ./cmd/realcluster
	$(BIN)/realcluster down

.PHONY: real-install
real-install: ## Install the operator on the real cluster as users do: operator-sdk run bundle of its bundle image (after make real-cluster and make images).
	$(TOOLS) operator-sdk kubectl
	hack/real-install.sh install

.PHONY: real-uninstall
real-uninstall: ## Remove the operator from the real cluster: operator-sdk cleanup.
	$(TOOLS) operator-sdk
	hack/real-install.sh uninstall

.PHONY: test-real
test-real: ## Install and use the operator on a real node (operator-sdk run bundle, OperatorHub's catalog, scorecard, a GenericDaemon's pods); starts the real cluster when none runs and then removes it.
	$(PACKAGES) node images browser
	hack/test-real.sh

.PHONY: screenshots
screenshots: ## Regenerate the README's screenshots of Prometheus (docs/images): the real suite's Prometheus, built from source, scraping the operator; a workspace's start and a crash-looping IDE's alert firing.
	$(PACKAGES) node images browser
	REAL_RUN='TestOperatorSDKInstall/^(Prometheus.*|lanes)$$/^tenants_and_failures$$/(opens_in_a_browser|crash)' hack/test-real.sh
	mkdir -p docs/images
	cp bin/test-artifacts/prometheus-alert.png bin/test-artifacts/prometheus-start-time.png docs/images/

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs, and the operator's namespace (its keys live there), into the cluster named by KUBECONFIG.
	$(TOOLS) kustomize kubectl
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side --force-conflicts -f -
	$(KUBECTL) create namespace $(OPERATOR_NAMESPACE) --dry-run=client -o yaml | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs (and so every CR) from the cluster.
	$(TOOLS) kustomize kubectl
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests ## Deploy the operator (image IMG) to the cluster.
	$(TOOLS) kustomize kubectl
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: ## Remove the operator from the cluster.
	$(TOOLS) kustomize kubectl
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: bundle
bundle: manifests ## Regenerate bundle/ from config/ (version from VERSION) and validate it.
	hack/bundle.sh

.PHONY: bundle-check
bundle-check: ## Run every validator OperatorHub's catalogs run (operator-framework/api v0.45.0) on the bundles make images pushed to the real cluster; any warning fails (make test-real runs it too).
	$(TOOLS) bundlecheck
	go -C $(TEST_MOD) test -count=1 -run TestPushedBundlesPassOperatorHubValidators ./real/
