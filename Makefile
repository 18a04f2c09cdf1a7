# sandgate: `make run` and `make test` are the contract (see README.md).
SHELL := /bin/bash
GO ?= go
CADDY ?= ./caddy
# Integration tests share one Docker engine and two cores: a few packages at a time.
TEST_PARALLEL ?= 2
TEST_TIMEOUT ?= 40m
BENCHTIME ?= 3x
# Per fuzz target: a short run in `make test`, a long one under `make fuzz`.
FUZZTIME_SHORT ?= 10s
FUZZTIME ?= 5m
# The Go modules of this repository that vet, staticcheck and the tests cover: the gateway's and the opt-in
# Kubernetes module's (kubernetes/, docs/kubernetes.md). tools/ only pins the linters.
GO_MODULES := . kubernetes
# KUBERNETES=1 builds the fleet binary: make caddy / make gateway-image with the Kubernetes module
# (./xcaddy.sh --kubernetes), as deploy/kubernetes runs it. Without it the gateway has no client-go.
XCADDY_K8S := $(if $(KUBERNETES),--kubernetes)

.PHONY: all build caddy agent assets images gateway-image profile-images prereqs run test test-go test-stress test-unit test-k8s k8s-binaries fuzz fuzz-short bench bench-k8s soak lint vet staticcheck fmt clean

all: build

build: caddy

# The pages embed xterm.js and noVNC from npm (routes/pages/web/vendor, git-ignored); without them the binary still
# builds and the pages answer 503.
assets:
	scripts/prereqs.sh node
	scripts/assets.sh

caddy: assets
	./xcaddy.sh $(XCADDY_K8S) --output $(CADDY)

agent:
	CGO_ENABLED=0 $(GO) build -trimpath -o build/sandgate-agent ./agentimage

prereqs:
	scripts/prereqs.sh docker base-image

images: prereqs
	scripts/images.sh base browser

# The gateway image (a drop-in for ghcr.io/labring/fastgpt-agent-sandbox-proxy): the Dockerfile copies ./caddy.
# deploy/kubernetes runs the fleet image: make gateway-image KUBERNETES=1.
gateway-image: prereqs
	CGO_ENABLED=0 ./xcaddy.sh $(XCADDY_K8S) --output ./caddy
	docker build --build-arg BASE_IMAGE=$${BASE_IMAGE:-debian:bookworm-slim} -t $${GATEWAY_IMAGE:-sandgate:latest} .

# Derived images for profiles with apt, node or R dependencies (apt cannot run in a sandbox; R packages come from
# Debian's r-cran-*): make profile-images PROFILES=profiles.json (docs/customise.md)
profile-images: prereqs
	scripts/profile-images.sh $(PROFILES)

# Builds the gateway and the sandbox images, then serves Caddyfile.example on localhost. The ticket secret is made
# once and kept in build/ticket-secret (set SANDGATE_TICKET_SECRET to use your own).
run: build images
	scripts/prereqs.sh runsc localhost-names
	@test -s build/ticket-secret || (umask 077; head -c 32 /dev/urandom | base64 > build/ticket-secret)
	SANDGATE_TICKET_SECRET="$${SANDGATE_TICKET_SECRET:-$$(cat build/ticket-secret)}" $(CADDY) run --config Caddyfile.example --adapter caddyfile

# The whole suite: unit, golden Caddyfile and integration tests against a real Docker engine (test-go), then a
# short run of every fuzz target (fuzz-short), one after the other. .ci/run calls the two halves itself.
test: test-go fuzz-short

# runsc: gVisor, built once from the Go module proxy and registered with the engine (the runsc conformance run and
# Caddyfile.example's python-isolated profile need it); SANDGATE_REQUIRE_RUNSC=1 makes a test needing runsc fail, not skip.
test-go: images assets
	scripts/prereqs.sh chromium pebble redis runsc localhost-names
	@for m in $(GO_MODULES); do echo "== go test in $$m"; (cd $$m && SANDGATE_REQUIRE_RUNSC=1 $(GO) test -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...) || exit 1; done

# The whole suite on a busy machine: $(STRESS_CPUS) CPU hogs (stress-ng, from Debian when missing) run beside
# `make test` and are stopped when it ends, passed, failed or interrupted. The tests wait for states, not times, so
# they must pass here too (README "Testing under load"). Only go test's -timeout, the backstop for a hang, is scaled:
# hogs beside two cores make the heaviest package (sandboxes/docker) take over 30 minutes.
STRESS_CPUS ?= 2
STRESS_TEST_TIMEOUT ?= 90m
test-stress:
	scripts/prereqs.sh stress-ng
	@stress-ng --cpu $(STRESS_CPUS) --timeout 0 --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT INT TERM; \
	echo "stress-ng --cpu $(STRESS_CPUS) running (pid $$hog)"; \
	$(MAKE) test TEST_TIMEOUT=$(STRESS_TEST_TIMEOUT); rc=$$?; \
	kill $$hog 2>/dev/null; wait $$hog 2>/dev/null; \
	exit $$rc

# The cluster tests (docs/kubernetes.md, "Test cluster"): a real single-node Kubernetes, built offline from the Go
# module proxy and cached in $$SANDGATE_K8S_CACHE, comes up (scripts/cluster.sh up), the packages with cluster tests
# run against it, and it goes down again, passed, failed or interrupted. A cluster that was already up before is
# left running. Cluster tests skip everywhere else (they need SANDGATE_K8S_KUBECONFIG).
# They live in the Kubernetes module (kubernetes/: the driver's conformance and cluster tests, the fleet test on the
# fleet binary, the checks of the cluster itself), which runs whole; K8S_TEST_PKGS are any of the gateway module's
# own. bench/ is left out: its cluster benchmark runs from bench-k8s.
K8S_TEST_PKGS ?= $(shell grep -rl --include='*_test.go' --exclude-dir=bench --exclude-dir=kubernetes --exclude-dir=node_modules -e 'testenv.KubeCluster' -e 'SANDGATE_K8S_KUBECONFIG' . | xargs -r -n1 dirname | sort -u)
K8S_IMAGES ?= base browser
K8S_TEST_TIMEOUT ?= 40m
k8s-binaries:
	scripts/cluster.sh build

# on_cluster runs command $(2) against the test cluster with images $(1) imported: it brings the cluster up and
# takes it down again afterwards (passed, failed or interrupted); a cluster that was up before stays up.
define on_cluster
	@if scripts/cluster.sh running 2>/dev/null; then \
		echo "$@: a cluster is up already; it stays up"; \
	else \
		trap 'scripts/cluster.sh down' EXIT; trap 'exit 130' INT TERM; \
	fi; \
	SANDGATE_K8S_IMAGES="$(1)" scripts/cluster.sh up && \
	SANDGATE_K8S_IMAGES="$(1)" scripts/cluster.sh images && \
	eval "$$(scripts/cluster.sh env)" && \
	$(2)
endef

test-k8s: images assets
	$(call on_cluster,$(K8S_IMAGES),$(if $(strip $(K8S_TEST_PKGS)),$(GO) test -count=1 -p 1 -timeout $(K8S_TEST_TIMEOUT) $(K8S_TEST_PKGS) &&) (cd kubernetes && $(GO) test -count=1 -p 1 -timeout $(K8S_TEST_TIMEOUT) ./...))

# Unit tests only: no Docker, no browser.
test-unit:
	@for m in $(GO_MODULES); do (cd $$m && $(GO) test -short -count=1 ./...) || exit 1; done

# Every fuzz target of tenant-input parsers (tickets, CDP filter, RFB filter, path resolution, address policy, ...):
# `go test` runs their seed corpora; these explore for FUZZTIME_SHORT / FUZZTIME each, with FUZZ_PARALLEL workers
# (default: one per core).
fuzz-short:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME_SHORT)

fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

bench: images
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 30m ./bench/...

# The soak (docs/lifecycle.md, "Soak"): a real gateway under a steady mix of creates, execs, files, tickets,
# terminals, pauses, snapshots and deletes from 8 workers for SOAK_TIME, sampling the gateway's RSS, goroutines and
# fds and the containers, volumes, networks and packet-filter rules it made every SOAK_EVERY. It fails unless they
# come back flat and every error is a typed refusal. Not part of make test or make bench (it skips there).
SOAK_TIME ?= 30m
SOAK_EVERY ?= 5m
SOAK_WORKERS ?= 8
# go test's backstop for a hang: the soak bounds itself by SOAK_TIME.
SOAK_TEST_TIMEOUT ?= 90m
soak: images assets
	SANDGATE_SOAK=1 SOAK_TIME=$(SOAK_TIME) SOAK_EVERY=$(SOAK_EVERY) SOAK_WORKERS=$(SOAK_WORKERS) \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkSoak$$' -benchtime 1x -timeout $(SOAK_TEST_TIMEOUT) ./bench

# The benchmark on the test cluster (docs/kubernetes.md, "Benchmark"): create to ready cold and warm against kubectl
# run, exec through the gateway against kubectl exec, and the cluster's memory. The cluster comes up and goes down
# as for test-k8s (one that was up already stays up). Not part of make test or make bench (it skips there).
bench-k8s: images assets
	$(call on_cluster,base,$(GO) test -count=1 -run '^$$' -bench Kubernetes -benchtime 1x -timeout $(K8S_TEST_TIMEOUT) ./bench)

# make lint is its two halves; .ci/run runs staticcheck (its own type-checking from source, so it shares no work
# with the Go build cache) beside make test-go.
lint: vet staticcheck

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(GO_MODULES); do echo "== go vet in $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

staticcheck:
	@for m in $(GO_MODULES); do echo "== staticcheck in $$m"; (cd $$m && $(GO) tool -modfile=$(CURDIR)/tools/go.mod staticcheck ./...) || exit 1; done

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf build $(CADDY)
