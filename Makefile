# lockstep: a GitOps package manager for Crossplane.
#
#   make demo     the main job: a local control plane, a registry, a Git repo and the agent
#   make test     builds the test control plane, lints, runs every test with -race, then fuzzes briefly
#   make lint     golangci-lint (pinned, installed into bin/) with the layer rules of .golangci.yml
#   make bench    the benchmarks
#   make fuzz     each parser's fuzzer for FUZZTIME inputs
#   make help     this list

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
K8S_BIN := $(BIN)/k8s
K8S_VERSION := v1.36.3
K8S_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=36 \
	-X k8s.io/component-base/version.gitTreeState=clean
TESTDATA ?= $(if $(LOCKSTEP_TESTDATA),$(LOCKSTEP_TESTDATA),$(wildcard $(CURDIR)/../shared/testdata))
GO_TEST_FLAGS ?= -race -timeout 40m

export KUBEBUILDER_ASSETS := $(K8S_BIN)

.PHONY: help build image generate docs testbin test vet fmt lint bench fuzz demo clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

# The version lockstep reports (lockstep version): the nearest tag, the
# commits since it and the revision, as git describe gives them.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build: ## build bin/lockstep, its version from git describe (VERSION=...)
	$(GO) build -buildvcs=auto -ldflags "-X main.version=$(VERSION)" -o $(BIN)/lockstep ./cmd/lockstep

# The container image, built without a container engine (cmd/image) and
# pushed to IMAGE_REPO; IMAGE_INSECURE=1 for a plain-HTTP registry. It
# prints the image by digest.
IMAGE_REPO ?=
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
image: ## build the image (static, nonroot, CA roots, SBOM) and push it: make image IMAGE_REPO=registry/repo
	@test -n "$(IMAGE_REPO)" || { echo "make image: set IMAGE_REPO=REGISTRY/REPOSITORY" >&2; exit 64; }
	$(GO) run ./cmd/image --repo $(IMAGE_REPO) --version $(VERSION) --platform $(IMAGE_PLATFORMS) $(if $(IMAGE_INSECURE),--insecure)

# controller-gen writes the Sync CRD and the DeepCopy methods from the Go
# types in cmd/internal/agent/api; TestSyncCRDMatchesTypes fails when they drift.
CONTROLLER_GEN_VERSION := v0.23.0
docs: ## regenerate the CLI reference in docs/cli from the commands' help (TestCLIReference fails when it drifts)
	$(GO) test ./cmd/lockstep -run '^TestCLIReference$$' -count=1 -update-docs

generate: ## regenerate the Sync CRD (the agent's and the chart's copy) and DeepCopy methods from cmd/internal/agent/api (controller-gen)
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) \
	  object paths=./cmd/internal/agent/api/... \
	  crd paths=./cmd/internal/agent/api/... output:crd:dir=cmd/internal/agent/crds
	cp cmd/internal/agent/crds/lockstep.io_syncs.yaml charts/lockstep/crds/

# Crossplane core for the end-to-end tests (test/e2e), one folder per
# release: bin/k8s/crossplane/<version>/crossplane, crds/ (its own CRDs,
# which `crossplane core init` installs from CRDS_PATH) and
# webhookconfigurations/ (which v2.0's init reads even with webhooks off). Each release is
# built from tools/crossplane/<version>, a module of its own that requires
# Crossplane (and, from v2.1, its apis module) at that exact version:
# Crossplane's go.mod replaces apis with ./apis, so `go install` refuses it.
# The version is set as its release build sets it (in crossplane-runtime
# from v2.1, in Crossplane's internal/version before; -X skips the other).
CROSSPLANE_VERSIONS := v2.0.2 v2.3.4 v2.4.0
CROSSPLANE_BINS := $(foreach v,$(CROSSPLANE_VERSIONS),$(K8S_BIN)/crossplane/$(v)/crossplane $(K8S_BIN)/crossplane/$(v)/crds $(K8S_BIN)/crossplane/$(v)/webhookconfigurations)

# The control plane for tests: kube-apiserver from k8s.io/kubernetes and etcd
# from go.etcd.io/etcd/server/v3/etcdmain, built in tools/k8s, a module of its
# own so the kubernetes dependency graph stays out of lockstep's go.mod.
# Each binary is built only when it is missing.
testbin: $(K8S_BIN)/kube-apiserver $(K8S_BIN)/etcd $(K8S_BIN)/kube-controller-manager $(K8S_BIN)/kube-scheduler $(K8S_BIN)/kwok $(K8S_BIN)/kwok-stages.yaml $(CROSSPLANE_BINS) ## build the test control plane and Crossplane into bin/k8s

$(K8S_BIN)/kube-apiserver:
	@mkdir -p $(K8S_BIN)
	cd tools/k8s && $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(K8S_BIN)/etcd:
	@mkdir -p $(K8S_BIN)
	cd tools/k8s && $(GO) build -trimpath -ldflags "-s -w" -o $@ ./etcd

# kube-controller-manager and kube-scheduler give Deployments ReplicaSets and
# scheduled pods; kwok plays the kubelet on a simulated node, so Available is
# real. kwok needs its stage configs, which ship in its module.
$(K8S_BIN)/kube-controller-manager $(K8S_BIN)/kube-scheduler:
	@mkdir -p $(K8S_BIN)
	cd tools/k8s && $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$(notdir $@)

KWOK_VERSION := v0.8.0
$(K8S_BIN)/kwok:
	@mkdir -p $(K8S_BIN)
	GOBIN=$(K8S_BIN) $(GO) install -trimpath -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)

$(K8S_BIN)/kwok-stages.yaml:
	@mkdir -p $(K8S_BIN)
	dir=$$($(GO) mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); \
	for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do \
	  echo "---"; cat "$$dir/kustomize/stage/$$f"; done > $@.tmp && mv $@.tmp $@


$(K8S_BIN)/crossplane/%/crossplane:
	@mkdir -p $(dir $@)
	cd tools/crossplane/$* && $(GO) build -trimpath \
	  -ldflags "-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$* -X github.com/crossplane/crossplane/v2/internal/version.version=$*" \
	  -o $@ github.com/crossplane/crossplane/v2/cmd/crossplane

$(K8S_BIN)/crossplane/%/crds $(K8S_BIN)/crossplane/%/webhookconfigurations:
	@mkdir -p $(dir $@)
	dir=$$(cd tools/crossplane/$* && $(GO) mod download -json github.com/crossplane/crossplane/v2@$* | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); \
	rm -rf $@.tmp && cp -r "$$dir/cluster/$(notdir $@)" $@.tmp && chmod -R u+w $@.tmp && mv $@.tmp $@

vet: ## go vet
	$(GO) vet ./...

fmt: ## fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# golangci-lint, pinned: the newest v2 whose go.mod asks for go 1.26 or lower.
# It is installed into bin/ when missing, one directory per version, so a
# bump installs the new one. .golangci.yml holds the linters and the layer
# rules (depguard); CONTRIBUTING.md explains them.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint/$(GOLANGCI_LINT_VERSION)/golangci-lint

$(GOLANGCI_LINT):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT) ## go mod tidy -diff, then golangci-lint: gofmt and gci, staticcheck, errorlint, revive, gocognit, ... (the layer rules are test/layers)
	$(GO) mod tidy -diff
	$(GOLANGCI_LINT) run ./...

test: testbin fmt vet lint ## build the control plane, lint, go test -race ./..., then each parser's fuzzer for TEST_FUZZTIME inputs
	LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) test $(GO_TEST_FLAGS) ./...
	$(if $(TEST_FUZZTIME),$(call run-fuzzers,$(TEST_FUZZTIME)))

# The parsers' fuzzers: declarations (FuzzLoadFS), lockstep.lock and
# package.yaml (FuzzParse). go test -fuzz takes one package and one fuzzer
# at a time. make test runs each for TEST_FUZZTIME inputs (default 5000x,
# a few seconds each here; empty skips them) after the unit tests, which run
# their seed corpus and testdata/fuzz; make fuzz runs each for FUZZTIME
# (default 100000x) for longer sessions. The budgets are counts, not
# durations: with a duration, Go 1.26's fuzzing coordinator can fail a
# target with a bare "context deadline exceeded" when the time runs out
# while a starved worker is mid-input (https://go.dev/issue/75804, fixed
# in Go 1.27). FUZZTIMEOUT bounds a run in wall time instead (go test
# sets no timeout when fuzzing). Minimizing each new input may take 60 s
# by default, which on a busy machine eats the budget: FUZZMINIMIZETIME
# bounds it. A crash is written to the package's testdata/fuzz and fails
# the target.
FUZZTIME ?= 100000x
TEST_FUZZTIME ?= 5000x
FUZZMINIMIZETIME ?= 5s
FUZZTIMEOUT ?= 10m
FUZZERS := ./internal/declarations:FuzzLoadFS ./lockfile:FuzzParse ./internal/xpkg:FuzzParse
define run-fuzzers
@set -e; for f in $(FUZZERS); do \
  echo "fuzz $${f%%:*} $${f##*:} for $(1) inputs"; \
  LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) test -run '^$$' -fuzz "^$${f##*:}$$" -fuzztime $(1) -fuzzminimizetime $(FUZZMINIMIZETIME) -timeout $(FUZZTIMEOUT) "$${f%%:*}"; \
done
endef
fuzz: ## fuzz the declarations, lockstep.lock and package.yaml parsers, each for FUZZTIME inputs (default 100000x)
	$(call run-fuzzers,$(FUZZTIME))

# The Go micro-benchmarks, then cmd/bench: lockstep against the floor (plain
# server-side apply) and Flux (fluxcd/pkg/ssa) on the local control plane,
# for the provider-aws monolith, the AWS family and 20 small packages. It
# prints a Markdown table and writes $(BENCH_OUT)/bench/results.json (a new
# temp dir when BENCH_OUT is empty). Without testdata (TESTDATA= ) the
# monolith is synthetic and the family is skipped. BENCH_FLAGS passes more
# flags, e.g. BENCH_FLAGS='-reps 3 -profile'. bin/k8s is Kubernetes 1.36
# and lockstep's in-process validation 1.37: with the default flags
# (BENCH_PREFLIGHT_SKEW=0) lockstep validates each CRD in-process unless it
# uses what 1.36 judges otherwise; BENCH_PREFLIGHT_SKEW=1 validates every
# CRD in-process without that check. After the default run, one variant
# runs lockstep and the floor again with --preflight-skew
# $(BENCH_SKEW_VARIANT) on the family and the small packages (cold install
# and upgrade; results under $(BENCH_OUT)/skew); BENCH_SKEW_VARIANT= skips it.
BENCH_OUT ?=
BENCH_FLAGS ?=
BENCH_PREFLIGHT_SKEW ?= 0
BENCH_SKEW_VARIANT ?= 1
bench-skew-variant = LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) run ./cmd/bench -preflight-skew $(BENCH_SKEW_VARIANT) -workloads family,small -tools lockstep,floor -scenarios "cold install,upgrade" $(if $(BENCH_OUT),-out $(BENCH_OUT)/skew) $(BENCH_FLAGS)
bench: testbin ## the Go micro-benchmarks, then the end-to-end benchmark cmd/bench with default flags and one --preflight-skew variant (BENCH_OUT=DIR keeps the results)
	LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) test -run '^$$' -bench . -benchtime 1x -benchmem ./...
	LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) run ./cmd/bench -preflight-skew $(BENCH_PREFLIGHT_SKEW) $(if $(BENCH_OUT),-out $(BENCH_OUT)) $(BENCH_FLAGS)
	$(if $(BENCH_SKEW_VARIANT),$(bench-skew-variant))

clean: ## remove bin/
	rm -rf $(BIN)

demo: build testbin ## the main job (see README): control plane, registry, Git repo, agent, install and upgrade
	LOCKSTEP_TESTDATA=$(TESTDATA) $(GO) run ./cmd/demo
