# The chart on a real single-node cluster (helm/node), included by the main Makefile; it uses its
# ROOT, TOOLS and BIN, and the `image` and `node-images` targets (tools/image/image.mk).
#
#   make test-k8s-node-smoke  the node, the chart, one client per protocol, one Envoy rollout under
#                             load (part of make test)
#   make test-k8s-node        every row of the table (docs/operations.md): run before changing how
#                             the chart runs the gateway
#   make run-k8s              the same node with the chart installed, until Ctrl-C
#
# As root: the node runs in a network namespace of its own (ip netns), with containerd and runc.

K8S_NODE_SOURCES := $(shell find helm/node -name '*.go' -o -name go.mod -o -name go.sum)
K8S_NODE_TOOLS := k8s coredns node-packages helm

.PHONY: k8s-node-tools test-k8s-node-smoke test-k8s-node run-k8s

$(BIN)/weighstation-k8s-node: $(K8S_NODE_SOURCES)
	cd helm/node && go build -o $@ ./cmd/weighstation-k8s-node

# Static: it runs in the clients image, which has no libraries for it.
$(BIN)/weighstation-k8s-client: $(K8S_NODE_SOURCES)
	cd helm/node && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o $@ ./cmd/weighstation-k8s-client

k8s-node-tools:
	@scripts/install-tools.sh $(K8S_NODE_TOOLS)

K8S_NODE_TEST = cd helm/node && test -z "$$(gofmt -l .)" && go vet ./... && go test -count=1 ./cluster/ ./node/ && \
	WEIGHSTATION_ROOT=$(ROOT) WEIGHSTATION_K8S_NODE=$(1) go test -count=1 -timeout $(2) -v ./e2e/ 2>&1 | tee $(TOOLS)/k8s-node-$(1).log | \
	grep -E '^(=== RUN|--- |PASS|FAIL|ok|node |\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

test-k8s-node-smoke: k8s-node-tools image node-images $(BIN)/weighstation-k8s-node
	$(call K8S_NODE_TEST,smoke,12m)

# The images' own tests (make test-node-images) run here, not in make test: the smoke runs every
# one of them on the node.
test-k8s-node: k8s-node-tools image test-node-images $(BIN)/weighstation-k8s-node
	@scripts/install-tools.sh netpol
	$(call K8S_NODE_TEST,full,45m)

# The node with the quick start's setup (docs/operations.md): full topology unless
# K8S_NODE_TOPOLOGY=smoke. Its files are in .tools/k8s-node-run (removed at the next run).
K8S_NODE_TOPOLOGY ?= full
run-k8s: k8s-node-tools image node-images $(BIN)/weighstation-k8s-node
	rm -rf $(TOOLS)/k8s-node-run
	$(BIN)/weighstation-k8s-node run --dir $(TOOLS)/k8s-node-run --root $(ROOT) --topology $(K8S_NODE_TOPOLOGY) \
		--k8s-bin $(TOOLS)/k8s/bin --node-bin $(TOOLS)/k8s/node-bin
