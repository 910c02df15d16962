# The control-plane image, assembled without a container daemon (tools/image, go-containerregistry),
# included by the main Makefile; it uses its ROOT, TOOLS, BIN, WASM and IMPACT_WASM.
#
#   make image        .tools/image/oci (OCI layout), .tools/image/weighstation.tar (docker-archive),
#                     .tools/image/digest; prints the digest. IMAGE_VERSION names it (default dev).
#   make test-image   reads the image back: config, files, no shell, the same digest when built
#                     again; unpacks its root filesystem into .tools/image/rootfs, where
#                     `make test-helm` takes the binary and the filter module it runs (part of make test)

IMAGE_DIR := $(TOOLS)/image
IMAGE_ROOTFS := $(IMAGE_DIR)/rootfs
IMAGE_BINARY := $(IMAGE_DIR)/build/weighstation
IMAGE_VERSION ?= dev
IMAGE_TOOL_SOURCES := $(wildcard tools/image/*.go tools/image/go.mod tools/image/go.sum)
# Debian's CA bundle: the control plane's own outbound TLS (an OTLP collector over https).
IMAGE_CA_BUNDLE := /etc/ssl/certs/ca-certificates.crt

.PHONY: image test-image

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
