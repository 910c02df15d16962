# Helm chart targets, included by the main Makefile (`include helm/helm.mk`); they use its
# ROOT, TOOLS and BIN and its `wasm` and `control-plane` targets.
#
#   make test-helm   lint + render 4 value sets for Kubernetes 1.29 and 1.37, strict schema
#                    validation, values.schema.json rejections, rendered policies through
#                    `weighstation validate`, the bootstrap drift test, both pods run as rendered
#                    against the real Envoy, promtool on the alerts and dashboard (part of make test)
#   make test-k8s    optional, not in make test: a real kube-apiserver (see docs/operations.md)

HELM_TOOLS := envoy helm kubeconform k8s-schemas promtool

.PHONY: tools-helm test-helm test-k8s

tools-helm:
	@scripts/install-tools.sh $(HELM_TOOLS)

test-helm: tools-helm wasm control-plane
	@test -z "$$(gofmt -l helm/test)" || { gofmt -l helm/test; echo "gofmt: files above need formatting"; exit 1; }
	cd helm/test && go vet ./...
	cd helm/test && WEIGHSTATION_ROOT=$(ROOT) HELM=$(BIN)/helm KUBECONFORM=$(BIN)/kubeconform \
		PROMTOOL=$(BIN)/promtool WEIGHSTATION=$(BIN)/weighstation ENVOY=$(BIN)/envoy \
		K8S_SCHEMAS=$(TOOLS)/k8s-schemas WASM=$(ROOT)/$(WASM) \
		go test -count=1 -timeout 5m ./...
