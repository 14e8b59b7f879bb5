# numapref: see README.md for the two commands a newcomer needs.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

export NUMAPREF_CACHE ?= $(HOME)/.cache/numapref
export PATH := $(PATH):/usr/local/go/bin
TOOLS   = $(NUMAPREF_CACHE)/tools
CONTROLLER_GEN = $(TOOLS)/controller-gen
HELM    = $(TOOLS)/helm
# Every build tag a test file can carry (see the test tiers below); vet reads them all.
TEST_TAGS = host,integration,chart,kernellab

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the numapref binary and the kubectl-numapref plugin into bin/.
	CGO_ENABLED=0 go build -trimpath -o bin/numapref ./cmd/numapref
	CGO_ENABLED=0 go build -trimpath -o bin/kubectl-numapref ./cmd/kubectl-numapref

.PHONY: image
image: ## Build the image from the Dockerfile with docker or podman: IMG=<registry>/numapref:<tag> (required); PUSH=1 pushes it, ARCHIVE=<file> saves it, BASE=<image> picks its base.
	IMG=$(IMG) hack/image.sh $(if $(filter 1,$(PUSH)),--push) $(if $(ARCHIVE),--archive $(ARCHIVE))

.PHONY: plugin-archive
plugin-archive: ## kubectl-numapref's krew archives (binary and LICENSE) and manifest into dist/: VERSION=<semver> [PLATFORMS="linux/amd64 ..."] [URL_BASE=...].
	VERSION=$(VERSION) hack/plugin-archive.sh

.PHONY: tools
tools: ## Install pinned build tools (controller-gen, helm, kube-score, kind, golangci-lint) into the cache.
	hack/tools.sh >/dev/null

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, etcd and kubectl from the module proxy (cached).
	hack/k8s-binaries.sh >/dev/null

.PHONY: generate
generate: ## Regenerate deepcopy, apply configurations, CRDs and RBAC from the Go markers.
	hack/tools.sh controller-gen >/dev/null
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -rf api/v1alpha1/applyconfiguration
	$(CONTROLLER_GEN) applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@# Each role from its process's markers: the agent's (with its rights to ask for its node
	@# certificate) from controllers/agent, the summarizer's from controllers/summarizer and
	@# the signer it runs, controllers/agentcert.
	$(CONTROLLER_GEN) rbac:roleName=numapref-agent paths=./controllers/agent/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=numapref-summarizer paths=./controllers/summarizer/... output:rbac:artifacts:config=config/rbac/summarizer
	$(CONTROLLER_GEN) rbac:roleName=numapref-signer paths=./controllers/agentcert/... output:rbac:artifacts:config=config/rbac/signer
	rm -f charts/numapref/crds/*.yaml
	cp config/crd/bases/*.yaml charts/numapref/crds/
	cp config/rbac/role.yaml charts/numapref/files/role.yaml
	cp config/rbac/summarizer/role.yaml charts/numapref/files/summarizer-role.yaml
	cp config/rbac/signer/role.yaml charts/numapref/files/signer-role.yaml
	cp config/rbac/node_restriction_policy.yaml charts/numapref/files/node_restriction_policy.yaml
	@# The reference pages, from the binary's flag sets, the reason table and the chart's values.
	go run ./cmd/numapref flags-markdown > docs/reference/flags.md
	go run ./hack/gendocs reasons > docs/reference/reasons.md
	go run ./hack/gendocs values charts/numapref/values.yaml > docs/reference/values.md
	go run ./hack/gendocs api config/crd/bases/numa.numapref.io_numapreferences.yaml config/crd/bases/numa.numapref.io_numanodereports.yaml > docs/reference/api.md

.PHONY: verify
verify: generate ## Fail when generated files are stale, code is unformatted, or vet or the linters (make lint) complain.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	go vet -tags $(TEST_TAGS) ./...
	go vet -tags e2e ./test/e2e/
	@git diff --exit-code -- api config charts docs/reference || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@# No build output in the tree: every tracked file is source, under 512 KiB.
	@big="$$(git ls-files -z | xargs -0 stat -c '%s %n' -- 2>/dev/null | awk '$$1 > 524288 { print $$2 " (" $$1 " bytes)" }')"; \
		test -z "$$big" || { echo "tracked files over 512 KiB (build output?): $$big"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts docs/reference)" || { git status --porcelain -- api config charts docs/reference; echo "generated files are not committed: run make generate and commit"; exit 1; }
	@# The linters last: the checks above take seconds, golangci-lint a minute or more.
	$(MAKE) --no-print-directory lint

.PHONY: lint
lint: preflight-lint ## golangci-lint (.golangci.yml: every tier's build tags) and shellcheck (hack/, .ci/); any finding fails.
	hack/lint.sh

##@ Test tiers (each checks its preconditions first: hack/preflight.sh)

.PHONY: test
test: preflight-test verify chart-lint chart-score unit host integration chart-test monitoring-test fuzz kernel-lab e2e e2e-nri e2e-kind ## Everything, tier by tier.

.PHONY: unit
unit: preflight-unit ## No root, no binaries: fixtures and pure code (any user).
	go test -count=1 ./...

.PHONY: host
host: preflight-host ## Root: real cgroups, real processes, the proc connector, tracefs.
	CGO_ENABLED=0 go test -count=1 -tags host ./cmd/... ./internal/... ./test/localnode/...

.PHONY: integration
integration: preflight-integration ## envtest: the controllers and the plugin on a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh) go test -count=1 -tags integration ./controllers/... ./cmd/... ./internal/serving/... ./internal/nodeagent/nri/...

.PHONY: chart-lint
chart-lint: ## helm lint the chart; any warning fails.
	hack/tools.sh helm >/dev/null
	$(HELM) lint --strict charts/numapref

.PHONY: chart-score
chart-score: ## kube-score the rendered chart (a few value sets); any finding fails, exceptions are in the chart.
	hack/chart-score.sh

.PHONY: chart-test
chart-test: preflight-chart ## Render the chart with helm and check its security posture, RBAC, CRD, flags and certificates (upgrades on envtest).
	hack/tools.sh helm >/dev/null
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh) HELM=$(HELM) go test -count=1 -tags chart ./test/chart/...

.PHONY: monitoring-test
monitoring-test: preflight-monitoring ## promtool: the alerts' unit tests, the helm-rendered PrometheusRule and every dashboard query.
	hack/tools.sh helm >/dev/null
	promtool test rules test/monitoring/rules_test.yaml
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(HELM) template numapref charts/numapref --api-versions monitoring.coreos.com/v1/PrometheusRule \
	    --set metrics.prometheusRule.enabled=true --show-only templates/prometheusrule.yaml \
	    | go run ./test/monitoring/promfiles rules >"$$tmp/rules.yaml" && \
	  promtool check rules "$$tmp/rules.yaml" && \
	  go run ./test/monitoring/promfiles dashboard <charts/numapref/files/dashboard.json >"$$tmp/dashboard.yaml" && \
	  promtool check rules "$$tmp/dashboard.yaml"

.PHONY: fuzz
fuzz: preflight-fuzz ## Run every fuzz target for FUZZTIME each (default 3s).
	hack/fuzz.sh $${FUZZTIME:-3s}

.PHONY: bench
bench: ## Benchmarks (benchstat-friendly; the engine's need root).
	go test -run '^$$' -bench . -benchmem -tags host ./internal/...

.PHONY: kernel-lab
kernel-lab: preflight-kernel-lab ## Kernel lab: the patched and control kernels under qemu, conformance, the diff, the agent.
	hack/kernel/lab.sh $(if $(KERNEL_LAB_OUT),--out $(KERNEL_LAB_OUT)) $(if $(filter 0,$(KERNEL_LAB_STRICT)),--no-strict)

# Outside `make test`: one more boot of the patched kernel, 5-6 min under TCG on top of the
# kernels' build, and a cold image build (mmdebstrap) of about 2 min.
.PHONY: kernel-lab-server
kernel-lab-server: preflight-kernel-lab-server ## Kernel lab: PostgreSQL 15 in a CRI pod on the real prctl, pgbench -C without and with the agent.
	hack/kernel/lab.sh --server $(if $(KERNEL_LAB_OUT),--out $(KERNEL_LAB_OUT))

# E2E_PROVIDER=kind: a three-node kind cluster (test/kindnode) with the kind binary pinned in
# hack/tools.sh. Where no Docker engine answers, the suite starts its own dockerd and uses
# the node image of hack/kind/node-image.sh (set E2E_KIND_NODE_IMAGE to choose another).
# E2E_NRI=1 (make e2e-nri): the local node on containerd 2.x with NRI and runc, built from
# the module proxy (hack/runtime-binaries.sh, cached), the agent as its NRI plugin, and only
# the specs labelled nri but not measure (E2E_LABELS=measure: the start-to-placed
# measurement, by hand); without it the node runs Debian's containerd 1.6 (no NRI), and
# every spec but those labelled nri. The kind nodes run that containerd 2.x with NRI
# (hack/kind/node-image.sh): every spec but measure and those only the local node can run
# (localnode: the apiserver outage, which pauses a process of the node).
ifeq ($(E2E_PROVIDER),kind)
E2E_LABELS = !measure && !localnode
E2E_ENV = E2E_PROVIDER=kind KIND=$(TOOLS)/kind \
  E2E_KIND_NODE_IMAGE=$${E2E_KIND_NODE_IMAGE-$$(hack/kind/node-image.sh --unless-engine)}
E2E_TIMEOUT = 45m
else
E2E_LABELS = $(if $(filter 1,$(E2E_NRI)),nri && !measure,!nri)
E2E_ENV = E2E_BIN_DIR=$$(hack/k8s-binaries.sh all) $(if $(filter 1,$(E2E_NRI)),E2E_RUNTIME_DIR=$$(hack/runtime-binaries.sh))
E2E_TIMEOUT = 30m
endif

.PHONY: e2e
e2e: preflight-e2e$(if $(filter kind,$(E2E_PROVIDER)),-kind) ## e2e specs: helm install on a real local node (E2E_PROVIDER=kind: on kind, see e2e-kind).
	hack/tools.sh helm $(if $(filter kind,$(E2E_PROVIDER)),kind) >/dev/null
	$(E2E_ENV) KUBECTL=$$(hack/k8s-binaries.sh all)/kubectl HELM=$(HELM) \
	  go test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/ -ginkgo.v -ginkgo.label-filter='$(E2E_LABELS)' $(E2E_ARGS)

.PHONY: e2e-nri
e2e-nri: ## The NRI specs: the agent as the NRI plugin of containerd 2.x (built from the module proxy, cached) on the local node.
	$(MAKE) e2e E2E_NRI=1

.PHONY: e2e-kind
e2e-kind: ## The e2e specs, the nri ones but the outage, and the multi-node ones on a three-node kind cluster on containerd 2.x (its own dockerd and an offline node image where needed).
	$(MAKE) e2e E2E_PROVIDER=kind

.PHONY: preflight-%
preflight-%:
	@hack/preflight.sh $*

##@ Scale

.PHONY: scale
scale: ## The scale harness on a throwaway etcd + kube-apiserver (SCALE_ARGS="-nodes 300 -mode reports", see BENCHMARKS.md).
	hack/scale.sh $(SCALE_ARGS)

##@ Local node (a real single-node cluster on this machine; needs root)

.PHONY: local-up
local-up: preflight-demo ## Bring up the local node (etcd, control plane, containerd, kubelet) with the images built; NRI=1: on containerd 2.x with NRI (hack/runtime-binaries.sh).
	go run ./hack/localnode up -bin-dir $$(hack/k8s-binaries.sh all) $(if $(filter 1,$(NRI)),-runtime-dir $$(hack/runtime-binaries.sh))

.PHONY: local-down
local-down: ## Tear the local node down and put the host back.
	go run ./hack/localnode down

##@ Demo

.PHONY: demo
demo: preflight-demo ## The main job: a real local node on containerd 2.x with NRI, helm install, a pod, the sample NumaPreference, kubectl get numapref, a pod placed at its start with its memory policy (KEEP=1 leaves it up; RUNTIME=debian: Debian's containerd 1.6, no NRI).
	hack/tools.sh helm >/dev/null
	go run ./hack/demo -bin-dir $$(hack/k8s-binaries.sh all) -helm $(HELM) $(if $(filter 1,$(KEEP)),-keep) $(if $(filter debian,$(RUNTIME)),,-runtime-dir $$(hack/runtime-binaries.sh))

.PHONY: help
help: ## This list.
	@awk 'BEGIN {FS = ":.*##"} /^##@/ { printf "\n%s\n", substr($$0, 5) } /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
