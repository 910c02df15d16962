# Helm chart targets, included by the main Makefile (`include helm/helm.mk`); they use its
# ROOT, TOOLS and BIN and its `wasm` and `control-plane` targets.
#
#   make test-helm   lint + render every value set for Kubernetes 1.30 and 1.37, strict schema
#                    validation, values.schema.json rejections, rendered policies through
#                    `weighstation validate`, the bootstrap drift test, upstreams and per-broker
#                    (or, with kafka.cluster, per-node-id) Kafka ports, the control plane's args
#                    through the real `weighstation serve`, NOTES, both pods run as rendered
#                    against the real Envoy (and the 3-broker and discovered-cluster sets against
#                    stand-in brokers), promtool on the alerts and dashboard (part of make test)
#   make test-k8s    optional, not in make test: a real kube-apiserver (see docs/operations.md)

HELM_TOOLS := envoy rust-target helm kubeconform k8s-schemas promtool

.PHONY: tools-helm test-helm test-k8s

tools-helm:
	@scripts/install-tools.sh $(HELM_TOOLS)

# The chart's pods run what the image carries: the binary and the filter module are taken from
# its unpacked root filesystem (make test-image), not from .tools.
test-helm: tools-helm test-image
	@test -z "$$(gofmt -l helm/test)" || { gofmt -l helm/test; echo "gofmt: files above need formatting"; exit 1; }
	cd helm/test && go vet ./...
	cd helm/test && WEIGHSTATION_ROOT=$(ROOT) HELM=$(BIN)/helm KUBECONFORM=$(BIN)/kubeconform \
		PROMTOOL=$(BIN)/promtool WEIGHSTATION=$(IMAGE_ROOTFS)/usr/local/bin/weighstation ENVOY=$(BIN)/envoy \
		K8S_SCHEMAS=$(TOOLS)/k8s-schemas WASM=$(IMAGE_ROOTFS)/usr/share/weighstation/weighstation_filter.wasm \
		IMAGE_LAYOUT=$(IMAGE_DIR)/oci go test -count=1 -timeout 5m ./...

# Optional (not in make test): a real kube-apiserver with etcd, as make tools builds them
# (scripts/install-tools.sh k8s); every value set is installed with --dry-run=server, then for
# real, and every object must be stored by the API server.
K8S_BIN := $(TOOLS)/k8s/bin

test-k8s: tools-helm
	@scripts/install-tools.sh k8s
	cd helm/test && WEIGHSTATION_ROOT=$(ROOT) HELM=$(BIN)/helm \
		KUBE_APISERVER=$(K8S_BIN)/kube-apiserver ETCD=$(K8S_BIN)/etcd \
		go test -tags k8s -count=1 -timeout 10m -run K8s -v .
