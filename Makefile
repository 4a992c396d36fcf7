# dwd — sharded dependency watchdog. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# The control plane the integration tests, the demo and the benchmarks run, built from source with the
# versions pinned in test/tools/go.mod.
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2; exit}' test/tools/go.mod)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" {print $$2; exit}' test/tools/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
CONTROLPLANE_STAMP := $(BIN)/.controlplane-$(KUBE_VERSION)-$(ETCD_VERSION)
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)
export KUBEBUILDER_ASSETS := $(BIN)

# promtool and prometheus from Debian's prometheus package, unpacked into bin/ when none is on the
# PATH: only the binaries, so that no Prometheus service is installed or started. Defined before the
# rules that name them as prerequisites, which make expands as it reads them.
PROMTOOL ?= $(or $(shell command -v promtool 2>/dev/null),$(BIN)/promtool)
PROMETHEUS ?= $(or $(shell command -v prometheus 2>/dev/null),$(BIN)/prometheus)

# make test-dashboards draws the dashboards in Debian's Chromium (installed with apt-get when missing),
# driven by npm's playwright-core at a pinned version in bin/dashview (installed with its scripts off:
# no tool downloads a browser of its own). Not part of make test.
CHROMIUM ?= $(or $(shell command -v chromium 2>/dev/null),/usr/bin/chromium)
PLAYWRIGHT_CORE_VERSION := 1.64.1
DASHVIEW_MODULES := $(BIN)/dashview/node_modules
PLAYWRIGHT_CORE_STAMP := $(BIN)/dashview/.playwright-core-$(PLAYWRIGHT_CORE_VERSION)

# Every fuzz target, as package:Target; make fuzz runs each for FUZZTIME. make test runs their seed
# corpora as tests (go test does) and checks that the list is complete, but does not fuzz: fuzzing
# compiles the whole dependency graph once more, with coverage instrumentation (about 6 minutes of a
# newcomer's first make test on 2 cores).
FUZZTIME ?= 3s
FUZZ_TARGETS := ./config:FuzzDecodeProberConfig ./config:FuzzDecodeWeederConfig \
	./prober:FuzzDecodeShoot ./prober:FuzzKubeconfigGate ./prober:FuzzKubeconfigErrorsWithholdSecrets \
	./prober:FuzzDecideScaling ./prober:FuzzCandidateNodes \
	./weeder:FuzzWeedWatched ./weeder:FuzzPodSelector

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build dwd and dwd-sim into bin/ (and bin/kubectl-dwd, a link to dwd: kubectl's plugin `kubectl dwd`).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/dwd ./cmd/dwd
	ln -sf dwd $(BIN)/kubectl-dwd
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/dwd-sim ./cmd/dwd-sim

IMAGE ?= ghcr.io/sharded-dwd/dwd
TAG ?= $(VERSION)
# docker, else podman: the first one installed.
CONTAINER_ENGINE ?= $(if $(shell command -v docker 2>/dev/null),docker,$(if $(shell command -v podman 2>/dev/null),podman))
# The Go minor release of go.mod (1.26 of "go 1.26.0"): the image builds with its latest patch release.
GO_MINOR := $(shell awk '$$1 == "go" {split($$2, v, "."); print v[1] "." v[2]; exit}' go.mod)

.PHONY: image
IMAGE_BUILD_ARGS = --build-arg GO_VERSION=$(GO_MINOR) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT)
# The platforms of image-multiarch.
PLATFORMS ?= linux/amd64,linux/arm64

image: ## Build the container image IMAGE:TAG (default ghcr.io/sharded-dwd/dwd:VERSION) for this machine's platform with docker or podman (CONTAINER_ENGINE).
	@if [ -z "$(CONTAINER_ENGINE)" ]; then \
		echo "make image needs a container engine: neither docker nor podman is installed (or set CONTAINER_ENGINE)" >&2; exit 1; fi
	$(CONTAINER_ENGINE) build $(IMAGE_BUILD_ARGS) -t $(IMAGE):$(TAG) .

.PHONY: image-multiarch
image-multiarch: ## Build and push IMAGE:TAG for PLATFORMS (linux/amd64,linux/arm64) with docker buildx; the Go compiler cross-compiles, nothing is emulated.
	docker buildx build --platform $(PLATFORMS) $(IMAGE_BUILD_ARGS) -t $(IMAGE):$(TAG) --push .

.PHONY: tools
tools: $(CONTROLPLANE_STAMP) ## Build kube-apiserver and etcd from source into bin/ (skipped when the pinned versions are there).

# One build of both, so that the go command downloads and compiles them side by side; without DWARF
# (about 6 % less compile time: the binaries are run, never debugged). etcd's main package is
# go.etcd.io/etcd/server/v3, so its binary comes out named server.
$(CONTROLPLANE_STAMP):
	@mkdir -p $(BIN)/.controlplane
	@echo "Building etcd $(ETCD_VERSION) and kube-apiserver $(KUBE_VERSION) (about 8 minutes on 2 cores)"
	cd test/tools && $(GO) build -trimpath -gcflags=all=-dwarf=false -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/.controlplane/ \
		go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver
	mv $(BIN)/.controlplane/server $(BIN)/etcd
	mv $(BIN)/.controlplane/kube-apiserver $(BIN)/kube-apiserver
	rm -rf $(BIN)/.controlplane $(BIN)/.controlplane-*
	touch $@

##@ Test

.PHONY: test
test: verify ## Everything CI runs: formatting, vet, unit and integration tests (-race; the fuzz targets' seed corpora too), the mutation check, alert rule tests, dashboards against a real Prometheus.
	@# The control plane's build and the race build of the test binaries each keep about one and a
	@# half of two cores busy: side by side they take minutes less than one after the other.
	$(MAKE) --no-print-directory -j2 tools test-build
	@# The mutants whose tests need no control plane (92 of 98: each mostly a link of its package's
	@# test binary) are checked beside the tests, at the lowest CPU priority, so that they take little
	@# but what the tests leave idle. Those that start the control plane, whose tests keep time, are
	@# checked as soon as the slow packages' tests passed, beside the others' tests and the rest of
	@# the mutants.
	$(MAKE) --no-print-directory -j2 test-run-then-mutants-after mutants-beside
	$(MAKE) --no-print-directory test-rules

.PHONY: verify
verify: fuzz-targets ## Fail if gofmt would change a file, a fuzz target is missing from FUZZ_TARGETS, or the lint finds a broken import floor, a time.Sleep, a real clock not injected or a function over 60 lines (docs/development.md; test-build vets).
	@files=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi
	$(GO) test -count=1 -run '^(TestTheTreeKeepsItsLayeringAndRules|TestTheLintFindsAPlantedViolationOfEachRule|TestNothingCitesDocumentsOutsideTheRepository)$$' ./internal/treecheck

.PHONY: fuzz-targets
fuzz-targets: ## Fail if a fuzz target is missing from FUZZ_TARGETS (make fuzz would never run it).
	@for target in $$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | \
		sed -E 's#^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)#\1:\2#'); do \
		case " $(FUZZ_TARGETS) " in *" $$target "*) ;; *) echo "$$target is not in FUZZ_TARGETS" >&2; exit 1;; esac; \
	done

# The test packages that take longest, longest first: go test starts packages in the order given, so
# that two of them run at a time from the start and the short ones fill in at the end.
SLOW_TEST_PKGS := ./test/e2e ./test/chaos ./sharding ./prober ./cmd/dwd ./deploy ./weeder
MODULE := github.com/sharded-dwd/dependency-watchdog

.PHONY: test-build
test-build: ## Vet every package, tests included, with all of go vet's checks, compiling what they import with the race detector (no control plane).
	@# The race build of every package the tests import, once, for everything make test runs: the
	@# tests (go test compiles only the packages' test variants on top, and links), the dwd processes
	@# of the integration tests (test.BuildDwd links with -race) and the mutants (-race too). A build
	@# without -race would compile the whole dependency graph once more.
	$(GO) vet -race ./...

.PHONY: test-go
test-go: tools test-build ## Unit and integration tests with the race detector, against the real control plane.
	$(MAKE) --no-print-directory test-run

# The test runs' flags: the race detector; vet ran in test-build; test binaries linked without DWARF
# (-w), which they never need (a panic's stack and a race report come from the runtime's tables):
# about 2 of 7 CPU-seconds less for each of the fifty links.
TEST_FLAGS := -race -vet=off -count=1 -ldflags=-w

# test-run runs the tests of test-go on what tools and test-build made, the dashboards' too (the
# same test as test-dashboards, in its package's turn).
.PHONY: test-run
test-run: $(PROMETHEUS)
	@# Two packages at a time: their tests mostly wait on real time (leases, probe intervals,
	@# processes), and together they use about one and a half of two cores. test-build vetted them.
	@# -timeout: the chaos suite's rounds take about 7 minutes alone and up to 11 beside the others,
	@# over go test's default of 10 per package.
	DWD_PROMETHEUS=$(PROMETHEUS) $(GO) test $(TEST_FLAGS) -p 2 -timeout=30m $(SLOW_TEST_PKGS) ./...

.PHONY: test-rules
test-rules: $(PROMTOOL) ## Check the alert rules and run their promtool unit tests (promtool from Debian's prometheus package when missing).
	$(PROMTOOL) check rules deploy/prometheus/rules.yaml
	$(PROMTOOL) test rules deploy/prometheus/rules_test.yaml

.PHONY: test-dashboards
test-dashboards: tools $(PROMETHEUS) $(CHROMIUM) $(PLAYWRIGHT_CORE_STAMP) ## Prometheus on loopback scrapes three dwd replicas: every dashboard and alert expression returns data, a kill fires an alert, Chromium draws each dashboard into bin/dashboards/*.png.
	DWD_PROMETHEUS=$(PROMETHEUS) DWD_CHROMIUM=$(CHROMIUM) DWD_DASHVIEW_NODE_MODULES=$(DASHVIEW_MODULES) \
		DWD_DASHBOARD_PNGS=$(BIN)/dashboards $(GO) test $(TEST_FLAGS) -p 1 \
		-run='^(TestDashboards|TestRenderReportsWhatThePanelsShow)$$' -v ./test/dashview ./test/e2e

$(CHROMIUM):
	@if ! command -v apt-get >/dev/null; then \
		echo "$@ is missing: no apt-get here; install Chromium or set CHROMIUM" >&2; exit 1; fi
	@if [ "$$(id -u)" != 0 ]; then \
		echo "$@ is missing: run as root to install Debian's chromium package, or set CHROMIUM" >&2; exit 1; fi
	apt-get install -y -qq --no-install-recommends chromium || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }

$(PLAYWRIGHT_CORE_STAMP):
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js and npm" >&2; exit 1; }
	rm -rf $(BIN)/dashview && mkdir -p $(BIN)/dashview
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix $(BIN)/dashview --no-audit --no-fund --ignore-scripts \
		playwright-core@$(PLAYWRIGHT_CORE_VERSION)
	touch $@

DURATION ?= 30m

.PHONY: soak
soak: tools ## Chaos soak: scenarios at random against three dwd replicas for DURATION (default 30m, e.g. make soak DURATION=1h); the summary also goes to bin/soak-report.txt.
	$(GO) test -count=1 -timeout=0 ./test/chaos -run TestSoak -soak=$(DURATION) -soak-report=$(BIN)/soak-report.txt -v

$(BIN)/promtool $(BIN)/prometheus &:
	@if ! command -v apt-get >/dev/null; then \
		echo "$@ is missing: no apt-get here; install Prometheus (its release archive) or set PROMTOOL and PROMETHEUS" >&2; exit 1; fi
	@if [ "$$(id -u)" != 0 ]; then \
		echo "$@ is missing: run as root to fetch Debian's prometheus package, install Prometheus or set PROMTOOL and PROMETHEUS" >&2; exit 1; fi
	@echo "Fetching promtool and prometheus from Debian's prometheus package into $(BIN)"
	@mkdir -p $(BIN)/.prometheus-deb
	cd $(BIN)/.prometheus-deb && { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; }
	dpkg-deb -x $(BIN)/.prometheus-deb/prometheus_*.deb $(BIN)/.prometheus-deb/root
	cp $(BIN)/.prometheus-deb/root/usr/bin/promtool $(BIN)/.prometheus-deb/root/usr/bin/prometheus $(BIN)/
	rm -rf $(BIN)/.prometheus-deb

.PHONY: unit
unit: ## Unit tests only (-short: no control plane), with the race detector.
	$(GO) test -race -short -count=1 ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 3s; e.g. make fuzz FUZZTIME=10m).
	@# The list must be complete unless FUZZ_TARGETS is given on the command line, to run some of them.
	@[ "$(origin FUZZ_TARGETS)" != file ] || $(MAKE) --no-print-directory fuzz-targets
	@# -short: the packages' TestMain starts no control plane, in the coordinator nor in each worker.
	@for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "Fuzzing $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -short -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s $$pkg || exit 1; \
	done

.PHONY: mutants
mutants: tools ## Mutation check: each mutant of a package's testdata/mutants.yaml (a safety rule switched off) must fail one of the tests it names.
	$(GO) run ./internal/mutants/run

# make test checks the mutants in two parts: those whose tests need no control plane beside the
# tests, at the lowest CPU priority (nice 19), and those whose tests start the control plane once
# the slow packages' tests, theirs among them, have passed (test-run-then-mutants-after), beside the
# other packages' tests and the rest of the former.
.PHONY: mutants-beside mutants-after
mutants-beside:
	@# -slots=4: a killed mutant's test often fails by waiting out a timeout, and holds its slot
	@# idle meanwhile: with two slots the 75 took 2,150 slot-seconds, 18 minutes of a first run of
	@# 32 (2026-11-29), and ended 3.3 minutes after everything else; with four, in as slow an hour,
	@# 3.1 minutes after it: the CPU bounds them then, the slots when the machine is faster.
	@# Each list runs its named tests without mutation first (about 90 s of two idle cores for the
	@# eight lists): make test runs them too, but whole and without -short, and a named test that
	@# fails only with -short or alone would count as a kill.
	nice -n 19 $(GO) run ./internal/mutants/run -which=unit -slots=4

mutants-after: tools
	@# -passed: test-run-slow ran the tests of these packages, without -short and with -race as the
	@# mutants' runs do, and they passed; running those the mutants name once more on the code as
	@# it is adds minutes. A list in another package runs them.
	@# Alone, `make mutants` checks every mutant with that run.
	@# -slots=3: their tests mostly wait on leases and probe intervals (two at a time kept about one
	@# core busy): three at a time took 67 s instead of 112 on an idle machine.
	$(GO) run ./internal/mutants/run -which=control-plane -slots=3 -passed="$(SLOW_TEST_PKGS)"

# test-run-then-mutants-after is make test's test-run in two parts: the slow packages, which hold
# every test a control-plane mutant names, then the others beside the control-plane mutants, whose
# tests mostly wait on real time (leases, probe intervals) and leave the CPU to the others' builds.
.PHONY: test-run-then-mutants-after test-run-slow test-run-rest
test-run-then-mutants-after: test-run-slow
	$(MAKE) --no-print-directory -j2 test-run-rest mutants-after

test-run-slow: $(PROMETHEUS)
	DWD_PROMETHEUS=$(PROMETHEUS) $(GO) test $(TEST_FLAGS) -p 2 -timeout=30m $(SLOW_TEST_PKGS)

test-run-rest: $(PROMETHEUS)
	DWD_PROMETHEUS=$(PROMETHEUS) $(GO) test $(TEST_FLAGS) -p 2 -timeout=30m \
		$$($(GO) list ./... | grep -vxF $(foreach p,$(SLOW_TEST_PKGS),-e $(MODULE)/$(p:./%=%)))

##@ Benchmarks

BENCH_NAME ?= latest
BENCH_FLAGS ?=

.PHONY: bench
bench: tools build ## Load benchmarks of real dwd processes against simulated shoots (about 30 min) into benchmarks/results/BENCH_NAME.json, .md, .png.
	$(BIN)/dwd-sim bench --name=$(BENCH_NAME) $(BENCH_FLAGS)

.PHONY: bench-micro
bench-micro: ## Micro-benchmarks of the hot paths: ring, lease decision, candidate nodes, a cached Cluster, scale plan, readiness.
	$(GO) test -run='^$$' -bench='NewRing|Partition|Owner|DecideScaling|CandidateNodes|CachedCluster|Plan|Tracker|ReleaseEveryPartition' -benchmem \
		./sharding ./prober ./scaler ./weeder | tee benchmarks/results/micro-$(BENCH_NAME).txt

##@ Run

.PHONY: demo
demo: tools build ## Run the watchdog against a local seed with simulated shoots.
	$(BIN)/dwd-sim demo

# The kustomization make managedresource renders: overlays/gardener, or one of yours that holds it.
KUSTOMIZATION ?= deploy/overlays/gardener

.PHONY: managedresource
managedresource: ## Print KUSTOMIZATION (default deploy/overlays/gardener) as a Gardener seed ManagedResource and its Secret, for kubectl apply -f - (docs/gardener.md).
	@$(GO) run ./deploy/managedresource -k $(KUSTOMIZATION)

.PHONY: clean
clean: ## Remove bin/ (including the control plane).
	rm -rf $(BIN)
