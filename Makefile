# weighstation — the front door. `make run` starts the local stack; `make test` proves it.
# Every tool is installed into .tools/ by scripts/install-tools.sh (pinned, idempotent).

SHELL := /bin/bash
ROOT := $(CURDIR)
TOOLS := $(ROOT)/.tools
BIN := $(TOOLS)/bin
WASM := wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm
GO_SOURCES := $(shell find control-plane -name '*.go' -o -name go.mod -o -name go.sum)
RUST_SOURCES := $(shell find wasm-filter/core/src wasm-filter/envoy/src -name '*.rs') $(wildcard wasm-filter/*/Cargo.toml wasm-filter/Cargo.*)

.PHONY: run test tools wasm control-plane validate test-unit test-rust test-go test-integration lint fuzz clean

run: tools wasm control-plane
	$(BIN)/weighstation-localstack -root $(ROOT)

test: tools wasm control-plane lint test-unit test-load-harness test-helm test-integration

tools:
	@scripts/install-tools.sh

wasm: $(WASM)
$(WASM): $(RUST_SOURCES)
	cd wasm-filter && cargo build --release --locked --target wasm32-wasip1 -p weighstation-filter

control-plane: $(BIN)/weighstation $(BIN)/weighstation-localstack
$(BIN)/weighstation: $(GO_SOURCES)
	cd control-plane && go build -o $(BIN)/weighstation ./cmd/weighstation
$(BIN)/weighstation-localstack: $(GO_SOURCES)
	cd control-plane && go build -o $(BIN)/weighstation-localstack ./cmd/localstack

validate: control-plane
	$(BIN)/weighstation validate $${POLICY_DIR:-policies}

# The fuzz targets are checked (on stable) too: a core API change that breaks them fails here,
# not at the next `make fuzz`.
lint: lint-load-tests
	@test -z "$$(gofmt -l control-plane)" || { gofmt -l control-plane; echo "gofmt: files above need formatting"; exit 1; }
	cd wasm-filter && cargo fmt --check
	cd wasm-filter && cargo clippy --locked --target wasm32-wasip1 -p weighstation-filter -p weighstation-core -- -D warnings
	cd wasm-filter/fuzz && CARGO_TARGET_DIR=$(TOOLS)/fuzz-check cargo check --locked --bins --quiet
	cd control-plane && go vet ./...

test-unit: test-rust test-go

test-rust:
	cd wasm-filter && cargo test --locked -p weighstation-core

test-go:
	cd control-plane && go test -count=1 ./internal/... ./cmd/...

# Drives the real Envoy, nats-server and Kafka started on free loopback ports.
test-integration: wasm control-plane
	cd control-plane && WEIGHSTATION_ROOT=$(ROOT) go test -count=1 -timeout 20m -v ./e2e/ 2>&1 | tee $(TOOLS)/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

# Coverage-guided fuzzing of the protocol scanners (nightly + cargo-fuzz, installed into .tools/).
# FUZZ_SECONDS per target; the corpus grows in .tools/fuzz-corpus, seeded from wasm-filter/fuzz/seeds.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/install-tools.sh cargo-fuzz
	cd wasm-filter/fuzz && for t in nats_session kafka_requests; do \
	  mkdir -p $(TOOLS)/fuzz-corpus/$$t && \
	  RUSTUP_TOOLCHAIN=nightly CARGO_TARGET_DIR=$(TOOLS)/fuzz-target $(TOOLS)/cargo/bin/cargo-fuzz run $$t $(TOOLS)/fuzz-corpus/$$t seeds/$$t \
	    -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096 || exit 1; \
	done

clean:
	rm -rf wasm-filter/target run

include helm/helm.mk
include load-tests/load-tests.mk
