# weighstation — the front door. `make run` starts the local stack; `make test` proves it.
# Every tool is installed into .tools/ by scripts/install-tools.sh (pinned, idempotent).

SHELL := /bin/bash
ROOT := $(CURDIR)
TOOLS := $(ROOT)/.tools
BIN := $(TOOLS)/bin
WASM := wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm
IMPACT_WASM := wasm-filter/target/wasm32-wasip1/release/weighstation_impact.wasm
GO_SOURCES := $(shell find control-plane -name '*.go' -o -name go.mod -o -name go.sum)
RUST_SOURCES := $(shell find wasm-filter/core/src wasm-filter/envoy/src wasm-filter/impact/src -name '*.rs') $(wildcard wasm-filter/*/Cargo.toml wasm-filter/Cargo.*)

.PHONY: run test tools wasm noop-filters control-plane validate test-unit test-rust test-go test-integration test-docs test-clusters-smoke test-clusters test-global-shapes test-quota-store-smoke test-soak test-impact-long soak lint fuzz clean otelcol

run: tools wasm control-plane
	$(BIN)/weighstation-localstack -root $(ROOT)

test: tools wasm control-plane lint test-unit test-load-harness test-image test-helm test-integration test-docs test-clusters-smoke test-quota-store-smoke test-soak test-k8s-node-smoke

tools:
	@scripts/install-tools.sh

wasm: $(WASM) $(IMPACT_WASM)
$(WASM): $(RUST_SOURCES)
	cd wasm-filter && cargo build --release --locked --target wasm32-wasip1 -p weighstation-filter
# The limiter replay `weighstation impact` runs (the filter's own core, as a Wasm module).
$(IMPACT_WASM): $(RUST_SOURCES)
	cd wasm-filter && cargo build --release --locked --target wasm32-wasip1 -p weighstation-impact

# The filters that do nothing, which `make bench-cpu` measures beside tcp_proxy and the filter:
# a proxy-wasm module (V8, as the filter) and an Envoy dynamic module, built for this host. Each
# output is its own stamp: rebuilt only when its crate or the lock file changes.
NOOP_WASM := wasm-filter/target/wasm32-wasip1/release/weighstation_noop.wasm
NOOP_NATIVE := wasm-filter/target/release/libweighstation_native_noop.so
noop-filters: $(NOOP_WASM) $(NOOP_NATIVE)
$(NOOP_WASM): $(wildcard wasm-filter/noop/src/*.rs) wasm-filter/noop/Cargo.toml wasm-filter/Cargo.lock
	cd wasm-filter && cargo build --release --locked --target wasm32-wasip1 -p weighstation-noop
	@touch $@
$(NOOP_NATIVE): $(wildcard wasm-filter/native-noop/src/*.rs) wasm-filter/native-noop/Cargo.toml wasm-filter/Cargo.lock
	cd wasm-filter && cargo build --release --locked -p weighstation-native-noop
	@touch $@

control-plane: $(BIN)/weighstation $(BIN)/weighstation-localstack $(BIN)/weighstation_impact.wasm
$(BIN)/weighstation_impact.wasm: $(IMPACT_WASM)
	cp $(IMPACT_WASM) $@
$(BIN)/weighstation: $(GO_SOURCES)
	cd control-plane && go build -o $(BIN)/weighstation ./cmd/weighstation
$(BIN)/weighstation-localstack: $(GO_SOURCES)
	cd control-plane && go build -o $(BIN)/weighstation-localstack ./cmd/localstack

$(BIN)/weighstation-soak: $(GO_SOURCES)
	cd control-plane && go build -o $(BIN)/weighstation-soak ./cmd/soak

# A real OpenTelemetry Collector (otlp receiver, file exporter) for the e2e test of the control
# plane's OTLP log export. tools/otelcol is its own Go module: its dependencies stay out of control-plane.
OTELCOL_SOURCES := $(wildcard tools/otelcol/*.go tools/otelcol/go.mod tools/otelcol/go.sum)
otelcol: $(BIN)/otelcol
$(BIN)/otelcol: $(OTELCOL_SOURCES)
	cd tools/otelcol && go build -o $(BIN)/otelcol .

validate: control-plane
	$(BIN)/weighstation validate $${POLICY_DIR:-policies}

# The fuzz targets are checked (on stable) too: a core API change that breaks them fails here,
# not at the next `make fuzz`.
lint: lint-load-tests check-generated
	@test -z "$$(gofmt -l control-plane tools)" || { gofmt -l control-plane tools; echo "gofmt: files above need formatting"; exit 1; }
	cd tools/image && go vet ./...
	cd wasm-filter && cargo fmt --check
	cd wasm-filter && cargo clippy --locked --target wasm32-wasip1 -p weighstation-filter -p weighstation-core -p weighstation-impact -p weighstation-noop -- -D warnings
	cd wasm-filter && cargo clippy --locked -p weighstation-native-noop -- -D warnings
	cd wasm-filter/fuzz && CARGO_TARGET_DIR=$(TOOLS)/fuzz-check cargo check --locked --bins --quiet
	cd control-plane && go vet ./...
	cd tools/otelcol && go vet .

test-unit: test-rust test-go

test-rust:
	cd wasm-filter && cargo test --locked -p weighstation-core

test-go:
	cd control-plane && go test -count=1 ./internal/... ./cmd/...

# Drives the real Envoy, nats-server and Kafka started on free loopback ports, and a real
# kube-apiserver with etcd for policies as objects (under the RBAC the chart renders, hence helm).
test-integration: wasm control-plane $(BIN)/otelcol
	@scripts/install-tools.sh helm k8s kubectl
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) go test -count=1 -timeout 30m -v ./e2e/ 2>&1 | tee $(TOOLS)/e2e.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# Every command the READMEs and docs give for the local stack (their ```sh local-stack blocks),
# run against `make run` started on free ports, as written but for the ports and shortened
# durations (control-plane/e2edocs).
test-docs: wasm control-plane bench-install
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) go test -count=1 -timeout 15m -v ./e2edocs/ 2>&1 | tee $(TOOLS)/e2edocs.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# In front of clusters: three nats-servers with JetStream behind the gateway, servers restarted,
# stream leaders stepped down and Envoy killed under fixed-rate load (e2ecluster); three KRaft
# brokers the gateway discovers, restarted, killed and joined by a fourth under a limited
# tenant's fixed-rate load (e2ekafkacluster). One package at a time (-p 1): each starts its own
# stack. make test runs the smoke set; make test-clusters every event, with three gateway
# replicas (run it before changing how the gateway fronts a cluster).
CLUSTER_PACKAGES = ./e2ecluster/ ./e2ekafkacluster/

test-clusters-smoke: wasm control-plane
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) WEIGHSTATION_CLUSTERS=smoke go test -p 1 -count=1 -timeout 15m -v $(CLUSTER_PACKAGES) 2>&1 | tee $(TOOLS)/e2ecluster.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

test-clusters: wasm control-plane test-global-shapes
	@scripts/install-tools.sh redis
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) WEIGHSTATION_CLUSTERS=full go test -p 1 -count=1 -timeout 60m -v $(CLUSTER_PACKAGES) $(QUOTA_STORE_PACKAGE) 2>&1 | tee $(TOOLS)/e2ecluster-full.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# The quota store under the quota service (e2equota): make test runs the smoke (one server with
# TLS and an ACL user; a primary, a replica and three sentinels behind three gateway replicas
# under load, a sentinel then the primary killed; about 30 s); make test-clusters the Redis
# Cluster test as well.
QUOTA_STORE_PACKAGE = ./e2equota/

test-quota-store-smoke: wasm control-plane
	@scripts/install-tools.sh redis
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) go test -count=1 -timeout 5m -v -run 'TestQuotaReachesOneServerWithTLSAndAUser|TestQuotaFollowsSentinelFailover' $(QUOTA_STORE_PACKAGE) 2>&1 | tee $(TOOLS)/e2equota.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# A global limit over three replicas in every load shape of docs/operations.md (connections
# 1:2:7, all on one replica, a connection that stops (reject, delay), stalls between bursts or
# starts late, a replica added), at 1.33x and 10x the limit, counted at the broker (make test
# runs a replica added at 1.33x and a late start at 10x).
test-global-shapes: wasm control-plane
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) WEIGHSTATION_GLOBAL_SHAPES=full go test -count=1 -timeout 20m -v -run 'TestGlobalLimitSharesFollowDemand' ./e2e/ 2>&1 | tee $(TOOLS)/e2e-global-shapes.log | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# The impact check's long form: a 10-minute trace recorded through the gateway, replayed by
# `weighstation impact` against a halved rate and sent again live (make test runs 30 s of it).
test-impact-long: wasm control-plane
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) WEIGHSTATION_IMPACT_TRACE=10m go test -count=1 -timeout 40m -v -run 'TestImpactPredictsTheLiveRefusals' ./e2e/ 2>&1 | grep -E '^(=== RUN|\s*--- FAIL|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# The soak: its own supervised stack under fixed-rate mixed load, a fault schedule (policy flips,
# the control plane, nats-server, Kafka and Envoy killed or drained) and hostile clients, then a
# ledger of every message (docs/reliability.md). The report goes to .tools/soak/report.md.
SOAK ?= 10m
soak: wasm control-plane $(BIN)/weighstation-soak
	$(BIN)/weighstation-soak -root $(ROOT) -duration $(SOAK) -out $(TOOLS)/soak

# The short soak in `make test`: every fault and hostile client once, the ledger exact.
test-soak: wasm control-plane $(BIN)/weighstation-soak
	$(BIN)/weighstation-soak -root $(ROOT) -duration 60s -out $(TOOLS)/soak-short

# Coverage-guided fuzzing of the protocol scanners (nightly + cargo-fuzz, installed into .tools/)
# and of the policy loader (Go native fuzzing of what `weighstation validate` parses, FuzzParse).
# FUZZ_SECONDS per target; the corpus grows in .tools/fuzz-corpus, seeded from wasm-filter/fuzz/seeds
# (Go: the example policies, the package's testdata and testdata/fuzz/FuzzParse).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := nats_session nats_info kafka_requests kafka_responses partial_reads fetch_responses
CARGO_FUZZ := env RUSTUP_TOOLCHAIN=nightly CARGO_TARGET_DIR=$(TOOLS)/fuzz-target $(TOOLS)/cargo/bin/cargo-fuzz
fuzz:
	@scripts/install-tools.sh cargo-fuzz
	cd wasm-filter/fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(TOOLS)/fuzz-corpus/$$t && \
	  $(CARGO_FUZZ) run $$t $(TOOLS)/fuzz-corpus/$$t seeds/$$t \
	    -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096 || exit 1; \
	done
	cd control-plane && go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_SECONDS)s -fuzzminimizetime 5s ./internal/policy/

# The long run docs/reliability.md reports: FUZZ_EXECS executions of every target, one at a time,
# each a single libFuzzer process (no -jobs/-fork) or a single Go fuzz worker (which minimizes a new
# input for 5 s, not the default 60 s that stalls a lone worker), under nice. The scanners are safe
# Rust, so by default they run without AddressSanitizer (FUZZ_SANITIZER=address to have it, at a
# third to a fifth of the speed); overflow checks and debug assertions stay on. Logs in
# .tools/fuzz-long/<target>.log; a summary of executions, corpus and coverage at the end. A crash
# stops the run and leaves its input in wasm-filter/fuzz/artifacts/<target>/ (Go:
# control-plane/internal/policy/testdata/fuzz/FuzzParse/): it becomes a seed, with its fix.
FUZZ_EXECS ?= 100000000
FUZZ_SANITIZER ?= none
CARGO_FUZZ_LONG := env RUSTUP_TOOLCHAIN=nightly CARGO_TARGET_DIR=$(TOOLS)/fuzz-target-$(FUZZ_SANITIZER) $(TOOLS)/cargo/bin/cargo-fuzz
.PHONY: fuzz-long
fuzz-long:
	@scripts/install-tools.sh cargo-fuzz
	mkdir -p $(TOOLS)/fuzz-long
	cd wasm-filter/fuzz && $(CARGO_FUZZ_LONG) build -s $(FUZZ_SANITIZER) && for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(TOOLS)/fuzz-corpus/$$t && echo "fuzz-long: $$t, $(FUZZ_EXECS) executions ($(TOOLS)/fuzz-long/$$t.log)" && \
	  nice -n 15 $(CARGO_FUZZ_LONG) run -s $(FUZZ_SANITIZER) $$t $(TOOLS)/fuzz-corpus/$$t seeds/$$t -- -runs=$(FUZZ_EXECS) -max_len=4096 \
	    -timeout=10 -print_final_stats=1 > $(TOOLS)/fuzz-long/$$t.log 2>&1 || { tail -40 $(TOOLS)/fuzz-long/$$t.log; exit 1; }; \
	done
	cd control-plane && go test -c -fuzz '^FuzzParse$$' -o $(TOOLS)/fuzz-long/policy.test ./internal/policy/
	@mkdir -p $(TOOLS)/fuzz-corpus/FuzzParse && echo "fuzz-long: FuzzParse, $(FUZZ_EXECS) executions ($(TOOLS)/fuzz-long/FuzzParse.log)"
	cd control-plane/internal/policy && nice -n 15 $(TOOLS)/fuzz-long/policy.test -test.run '^$$' -test.fuzz '^FuzzParse$$' \
	  -test.fuzztime $(FUZZ_EXECS)x -test.fuzzminimizetime 5s -test.parallel 1 -test.fuzzcachedir $(TOOLS)/fuzz-corpus/FuzzParse \
	  > $(TOOLS)/fuzz-long/FuzzParse.log 2>&1 || { tail -40 $(TOOLS)/fuzz-long/FuzzParse.log; exit 1; }
	@scripts/fuzz-summary.sh $(TOOLS) $(FUZZ_TARGETS) FuzzParse

clean:
	rm -rf wasm-filter/target run

include helm/helm.mk
include load-tests/load-tests.mk
include tools/image/image.mk
include tools/generate.mk
include helm/node/node.mk
