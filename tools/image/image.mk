# The control-plane image, assembled without a container daemon (tools/image, go-containerregistry),
# included by the main Makefile; it uses its ROOT, TOOLS, BIN, WASM and IMPACT_WASM.
#
#   make image        .tools/image/oci (OCI layout), .tools/image/weighstation.tar (docker-archive),
#                     .tools/image/digest; prints the digest. IMAGE_VERSION names it (default dev).
#   make test-image   reads the image back: config, files, no shell, the same digest when built
#                     again; unpacks its root filesystem into .tools/image/rootfs, where
#                     `make test-helm` takes the binary and the filter module it runs (part of make test)
#
# The node images, what a single-node Kubernetes test imports into containerd (no registry there:
# helm/node imports each OCI layout), assembled the same way from files on this machine:
#
#   make node-images       .tools/image/node/<name>/oci (an OCI layout naming the image
#                          weighstation.local/<name>:<version>) and <name>/digest for pause, coredns,
#                          envoy, nats-server, kafka and clients; built again only when an input changed
#   make test-node-images  reads them back: config, files and owners, every ELF's libraries listed
#                          by the image's own loader in a chroot, the programs run there as the
#                          image's user, pause reaping orphans, the shared layers, the same digests
#                          when built again (root: chroot and PID namespaces; about 20 s, so not
#                          part of test-image)

IMAGE_DIR := $(TOOLS)/image
IMAGE_ROOTFS := $(IMAGE_DIR)/rootfs
IMAGE_BINARY := $(IMAGE_DIR)/build/weighstation
IMAGE_VERSION ?= dev
IMAGE_TOOL_SOURCES := $(wildcard tools/image/*.go tools/image/go.mod tools/image/go.sum tools/image/kafka-broker/*)
# Debian's CA bundle: the control plane's own outbound TLS (an OTLP collector over https).
IMAGE_CA_BUNDLE := /etc/ssl/certs/ca-certificates.crt

.PHONY: image test-image node-images test-node-images

# Static, and the same bytes from the same commit: no cgo, no paths, no VCS stamp, no build id.
$(IMAGE_BINARY): $(GO_SOURCES)
	cd control-plane && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o $@ ./cmd/weighstation

$(BIN)/weighstation-image: $(IMAGE_TOOL_SOURCES)
	cd tools/image && go build -o $@ .

# The files' times and the image's creation time are the commit's, so two builds of one commit
# give one digest.
image: wasm $(IMAGE_BINARY) $(BIN)/weighstation-image
	$(BIN)/weighstation-image build --binary $(IMAGE_BINARY) --filter $(ROOT)/$(WASM) --impact $(ROOT)/$(IMPACT_WASM) \
		--ca-bundle $(IMAGE_CA_BUNDLE) --revision $$(git rev-parse HEAD) --created $$(git log -1 --format=%ct) \
		--version $(IMAGE_VERSION) --out $(IMAGE_DIR)

test-image: image
	cd tools/image && go vet ./... && IMAGE_DIR=$(IMAGE_DIR) IMAGE_BINARY=$(IMAGE_BINARY) WASM=$(ROOT)/$(WASM) \
		IMPACT_WASM=$(ROOT)/$(IMPACT_WASM) IMAGE_CA_BUNDLE=$(IMAGE_CA_BUNDLE) go test -count=1 ./...
	$(BIN)/weighstation-image unpack --layout $(IMAGE_DIR)/oci --to $(IMAGE_ROOTFS)

NODE_IMAGE_DIR := $(IMAGE_DIR)/node
NODE_PAUSE := $(IMAGE_DIR)/build/pause
NODE_PROBES := $(IMAGE_DIR)/build/probes
NODE_PROBE_SOURCES := $(wildcard control-plane/e2e/clients/java/*.java)
NODE_JAVA_HOME := /usr/lib/jvm/java-17-openjdk-amd64
NODE_KAFKA := $(TOOLS)/kafka
NODE_KAFKA_JARS := $(wildcard $(NODE_KAFKA)/libs/*.jar)
# The images' time is the last commit to what goes into them (this tool, the tools' versions, the
# probes, the load harness), not HEAD's: a commit elsewhere makes no new images. The stamp is named
# by it, so that a new one builds them again.
NODE_IMAGE_CREATED := $(or $(shell git log -1 --format=%ct -- tools/image scripts/install-tools.sh control-plane/e2e/clients/java load-tests helm/node helm/k8s 2>/dev/null),0)
NODE_IMAGE_STAMP := $(NODE_IMAGE_DIR)/.built-$(NODE_IMAGE_CREATED)
NODE_COREDNS := $(TOOLS)/k8s/node-bin/coredns
NODE_K8S_CLIENT := $(BIN)/weighstation-k8s-client
NODE_IMAGE_FLAGS := --created $(NODE_IMAGE_CREATED) --pause $(NODE_PAUSE) --coredns $(NODE_COREDNS) --envoy $(BIN)/envoy \
	--nats-server $(BIN)/nats-server --nats $(BIN)/nats --bench $(BIN)/weighstation-bench --k8s-client $(NODE_K8S_CLIENT) --java-home $(NODE_JAVA_HOME) --kafka $(NODE_KAFKA) --probes $(NODE_PROBES)

# The pod sandbox's first process: static, the same bytes from the same source.
$(NODE_PAUSE): $(wildcard tools/image/pause/*.go) tools/image/go.mod
	cd tools/image && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o $@ ./pause

# The e2e tests' Java probes, compiled as the tests compile them (against Kafka's jars) by JDK 17's
# javac, so that the image's JRE runs them; weighstation-image packs the classes into a jar.
$(NODE_PROBES).stamp: $(NODE_PROBE_SOURCES) $(NODE_KAFKA_JARS)
	rm -rf $(NODE_PROBES) && mkdir -p $(NODE_PROBES)
	$(NODE_JAVA_HOME)/bin/javac -d $(NODE_PROBES) -cp '$(NODE_KAFKA)/libs/*' $(NODE_PROBE_SOURCES)
	touch $@

node-images: $(NODE_IMAGE_STAMP)

$(NODE_IMAGE_STAMP): $(BIN)/weighstation-image $(NODE_PAUSE) $(NODE_PROBES).stamp $(BIN)/envoy $(BIN)/nats-server $(BIN)/nats \
		$(BIN)/weighstation-bench $(NODE_COREDNS) $(NODE_K8S_CLIENT) $(NODE_KAFKA_JARS) $(NODE_JAVA_HOME)/release
	rm -f $(NODE_IMAGE_DIR)/.built-*
	$(BIN)/weighstation-image node $(NODE_IMAGE_FLAGS) --out $(NODE_IMAGE_DIR)
	touch $@

test-node-images: node-images
	@test -z "$$(gofmt -l tools/image)" || { gofmt -l tools/image; echo "gofmt: files above need formatting"; exit 1; }
	cd tools/image && go vet ./... && NODE_IMAGE_DIR=$(NODE_IMAGE_DIR) NODE_IMAGE_FLAGS="$(NODE_IMAGE_FLAGS)" \
		go test -tags nodeimages -count=1 -run Node ./...
