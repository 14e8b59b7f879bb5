# numapref: see README.md for the two commands a newcomer needs.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

export NUMAPREF_CACHE ?= $(HOME)/.cache/numapref
TOOLS   = $(NUMAPREF_CACHE)/tools
CONTROLLER_GEN = $(TOOLS)/controller-gen
HELM    = $(TOOLS)/helm

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the numapref binary and the kubectl-numapref plugin into bin/.
	CGO_ENABLED=0 go build -trimpath -o bin/numapref ./cmd/numapref
	CGO_ENABLED=0 go build -trimpath -o bin/kubectl-numapref ./cmd/kubectl-numapref

.PHONY: tools
tools: ## Install pinned build tools into the cache.
	hack/tools.sh >/dev/null

.PHONY: generate
generate: tools ## Regenerate deepcopy, CRDs and RBAC from the Go markers.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=numapref-agent paths=./controllers/... output:rbac:artifacts:config=config/rbac
	rm -f charts/numapref/crds/*.yaml
	cp config/crd/bases/*.yaml charts/numapref/crds/
	cp config/rbac/role.yaml charts/numapref/files/role.yaml

.PHONY: verify
verify: generate ## Fail when generated files are stale or code is unformatted.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	go vet -tags host ./...
	go vet -tags integration ./...
	go vet -tags e2e ./test/e2e/
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run make generate and commit"; exit 1; }

##@ Test

.PHONY: test
test: verify chart-lint chart-score unit integration host fuzz kernel-lab e2e ## Everything: verify, chart, the unit, integration (envtest) and host test tiers, fuzzing, kernel lab, e2e on a real local node.

.PHONY: chart-lint
chart-lint: ## helm lint the chart; any warning fails.
	hack/tools.sh helm >/dev/null
	$(HELM) lint --strict charts/numapref

.PHONY: chart-score
chart-score: ## kube-score the rendered chart (a few value sets); any finding fails, exceptions are in the chart.
	hack/chart-score.sh

.PHONY: chart-test
chart-test: ## Render the chart with helm and check its security posture, RBAC, CRD and flags.
	hack/tools.sh helm >/dev/null
	HELM=$(HELM) go test -count=1 ./test/chart/...

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, etcd and kubectl from the module proxy (cached).
	hack/k8s-binaries.sh >/dev/null

# The Go tests come in three tiers (build tags): unit (none) passes as any user with
# nothing built; integration needs a kube-apiserver and etcd (envtest); host needs root
# and this machine's cgroups, processes, proc connector and tracefs. A test that lacks a
# precondition is skipped by hand and fails under CI=true (internal/testutil/testenv).

.PHONY: unit
unit: tools ## Unit tier: pure code and fixtures (cgroup and /proc trees), fakes, the chart (helm).
	go test -count=1 ./...

.PHONY: integration
integration: k8s-binaries ## Integration tier: controllers and the kubectl plugin against a real apiserver (envtest); the real-engine specs need root.
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh) go test -count=1 -tags integration ./controllers/... ./cmd/kubectl-numapref/...

.PHONY: host
host: ## Host tier (root): the engine, cgroup discovery and the kernel layer on this machine's real cgroups and processes.
	go test -count=1 -tags host ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 3s).
	hack/fuzz.sh $${FUZZTIME:-3s}

.PHONY: bench
bench: ## Benchmarks (benchstat-friendly); the engine's and the real-cgroup ones need root.
	go test -tags host -run '^$$' -bench . -benchmem ./internal/...

.PHONY: kernel-lab
kernel-lab: ## Kernel lab: build/reuse kernels, conformance prctl vs emulator in the patched VM, diff, control VM.
	hack/kernel/lab.sh $(if $(KERNEL_LAB_OUT),--out $(KERNEL_LAB_OUT)) $(if $(filter 1,$(KERNEL_LAB_STRICT)),--strict)

##@ Local node (a real single-node cluster on this machine; needs root)

.PHONY: local-up
local-up: tools ## Bring up the local node (etcd, control plane, containerd, kubelet) with the images built.
	go run ./hack/localnode up -bin-dir $$(hack/k8s-binaries.sh all)

.PHONY: local-down
local-down: ## Tear the local node down and put the host back.
	go run ./hack/localnode down

.PHONY: e2e
e2e: tools ## e2e specs: helm install on a real local node (E2E_PROVIDER=kind where Docker exists).
	E2E_BIN_DIR=$$(hack/k8s-binaries.sh all) KUBECTL=$$(hack/k8s-binaries.sh all)/kubectl HELM=$(HELM) \
	  go test -tags e2e -count=1 -timeout 20m -v ./test/e2e/ -ginkgo.v $(E2E_ARGS)

##@ Demo

.PHONY: demo
demo: tools ## The main job: a real local node, helm install, a pod, the sample NumaPreference, kubectl get numapref (KEEP=1 leaves it up).
	go run ./hack/demo -bin-dir $$(hack/k8s-binaries.sh all) -helm $(HELM) $(if $(filter 1,$(KEEP)),-keep)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
