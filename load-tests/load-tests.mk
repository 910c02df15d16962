# The open-loop load harness (weighstation-bench), k6 with our extension, and the benchmark
# evidence (make bench). Included by the Makefile, which defines ROOT, TOOLS and BIN.

# Whatever target the including Makefile has first stays its default goal.
load_tests_default_goal := $(.DEFAULT_GOAL)

LOAD_TESTS_SOURCES := $(shell find load-tests -path load-tests/k6 -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum -o -name '*.yaml' \) -print)
K6_SOURCES := $(shell find load-tests/k6 -name '*.go' -o -name go.mod -o -name go.sum)

.PHONY: bench bench-cpu bench-nats bench-quick bench-tenants bench-tenants-kube bench-quota bench-install k6 test-load-harness lint-load-tests

# weighstation-bench, the benchmark suite and k6 (v1.8.1 with k6/x/weighstation) into .tools/bin.
bench-install: $(BIN)/weighstation-bench $(BIN)/weighstation-benchsuite $(BIN)/k6

$(BIN)/weighstation-bench: $(LOAD_TESTS_SOURCES)
	cd load-tests && go build -o $@ ./cmd/weighstation-bench

$(BIN)/weighstation-benchsuite: $(LOAD_TESTS_SOURCES)
	cd load-tests && go build -o $@ ./cmd/weighstation-benchsuite

$(BIN)/weighstation-tenantscale: $(LOAD_TESTS_SOURCES)
	cd load-tests && go build -o $@ ./cmd/weighstation-tenantscale

# In the control-plane module: etcd and kube-apiserver as the e2e tests run them.
$(BIN)/weighstation-kubeapi: $(GO_SOURCES)
	cd control-plane && go build -o $@ ./cmd/kubeapi

# In the control-plane module: it starts the quota store with the local stack's own code.
$(BIN)/weighstation-quotabench: $(GO_SOURCES)
	cd control-plane && go build -o $@ ./cmd/quotabench

k6: $(BIN)/k6
# A plain go build of a main package calling go.k6.io/k6/cmd.Execute (what xk6 would produce).
$(BIN)/k6: $(K6_SOURCES)
	cd load-tests/k6 && go build -o $@ ./cmd/k6

lint-load-tests:
	@test -z "$$(gofmt -l load-tests)" || { gofmt -l load-tests; echo "gofmt: files above need formatting"; exit 1; }
	cd load-tests && go vet ./...
	cd load-tests/k6 && go vet ./...

# The harness's own tests (scheduler rate, latency from intended time, .hgrm round trip, the
# scenarios against nats-server) and the stall calibrations of the harness and of k6.
# One package at a time (-p 1): the timing tests should not compete with each other for the CPUs.
test-load-harness: tools $(BIN)/k6 lint-load-tests
	cd load-tests && NATS_SERVER=$(BIN)/nats-server go test -count=1 -p 1 -timeout 10m ./...
	cd load-tests/k6 && NATS_SERVER=$(BIN)/nats-server K6=$(BIN)/k6 go test -count=1 -timeout 10m ./...

# The published evidence: ~20 minutes, the local stack started on free ports, results into
# docs/benchmarks/ (README.md with the tables and plots, suite.json, runs/).
bench: tools wasm noop-filters control-plane $(BIN)/weighstation-benchsuite bench-tenants bench-quota
	$(BIN)/weighstation-benchsuite -root $(ROOT) -out $(ROOT)/docs/benchmarks

# What many tenants cost (~5 minutes): the local stack with 10, 1,000, 10,000 and 100,000
# LimitPolicies; Envoy's start, one policy change timed to the first message it decides, and
# Envoy's and the control plane's memory, into docs/benchmarks/tenants/ (TENANTS to pick rungs).
TENANTS ?= 10,1000,10000,100000
bench-tenants: tools wasm control-plane $(BIN)/weighstation-tenantscale
	$(BIN)/weighstation-tenantscale -root $(ROOT) -out $(ROOT)/docs/benchmarks/tenants -tenants $(TENANTS)

# The same with the policies as LimitPolicy objects of a real kube-apiserver and etcd (~15 minutes
# at 10,000): all created with one kubectl apply (timed), each change a kubectl apply timed from
# its return, then how long the control plane took to write every object's status; rows labelled
# kubernetes in the same README (TENANTS_KUBE to pick rungs).
TENANTS_KUBE ?= 10000
bench-tenants-kube: tools wasm control-plane $(BIN)/weighstation-tenantscale $(BIN)/weighstation-kubeapi
	@scripts/install-tools.sh k8s kubectl
	$(BIN)/weighstation-tenantscale -root $(ROOT) -out $(ROOT)/docs/benchmarks/tenants -source kubernetes -tenants $(TENANTS_KUBE)

# The quota service at scale (~6 minutes): the real `weighstation quota` on one Redis, on
# Sentinel and on a Cluster, each posted the filter's reports by 100 replicas (then 10, on a fresh
# store) once a second on the same global limits, up a ladder of limits per replica (QUOTA_LIMITS)
# until a rung is not sustained; answer p50/p99, Redis commands/s and CPU per report, into
# docs/benchmarks/quota/. 30 sits between 10 and 100 because a 2-CPU machine sustains 100
# replicas on no more than that; the 10-replica ladders reach 1,000 and 10,000.
QUOTA_LIMITS ?= 10,30,100,1000,10000
bench-quota: tools $(BIN)/weighstation $(BIN)/weighstation-quotabench
	$(BIN)/weighstation-quotabench -root $(ROOT) -out $(ROOT)/docs/benchmarks/quota -limits $(QUOTA_LIMITS)

# NATS request/reply alone (~3 minutes): direct nats-server vs Envoy's tcp_proxy vs the filter,
# alternating in one run at 10%, 40% and 80% of the gateway's saturation, with the ratios.
bench-nats: tools wasm noop-filters control-plane $(BIN)/weighstation-benchsuite
	$(BIN)/weighstation-benchsuite -root $(ROOT) -out $(TOOLS)/bench-nats -only nats-request
	@sed -n '/^## Direct/,/^## Rate/p' $(TOOLS)/bench-nats/README.md | grep -v '^!\[' | grep -v '^## Rate'

# Envoy CPU per message and msgs/s (~10 minutes), targets alternated in 5 rounds: NATS publish
# (nats bench pub) at 128 B to 64 KiB through the filter, TLS, tcp_proxy and direct; delivery to a
# subscriber through the filter and tcp_proxy; Kafka Produce requests of 1 to 1000 records of
# 100 B to 64 KiB over one connection through the filter and tcp_proxy; kafka-producer-perf-test
# (acks=1) through the gateway and direct. NATS publish and delivery and 1-record Produce also
# through a no-op Wasm and a no-op native filter (the floors any filter costs). Prints the
# tables, whether the targets are met, the cost per KiB and the floors over tcp_proxy.
bench-cpu: tools wasm noop-filters control-plane $(BIN)/weighstation-benchsuite
	$(BIN)/weighstation-benchsuite -root $(ROOT) -out $(ROOT)/docs/benchmarks/cpu -only cpu
	@sed -n '/^## Envoy CPU/,/^\(## Direct\|Plots\)/p' $(ROOT)/docs/benchmarks/cpu/README.md | grep -v '^\(## Direct\|Plots\)'

# The same suite with measurements of a few seconds, to check it end to end (~3 minutes);
# its figures are not evidence, so they go to .tools/bench-quick.
bench-quick: tools wasm noop-filters control-plane $(BIN)/weighstation-benchsuite
	$(BIN)/weighstation-benchsuite -root $(ROOT) -out $(TOOLS)/bench-quick -quick

.DEFAULT_GOAL := $(load_tests_default_goal)
