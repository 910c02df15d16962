# Generated schemas, included by the main Makefile. control-plane/api/v1alpha1 is the one
# source: controller-gen writes the CRDs from it, and tools/schemagen derives the policy files'
# JSON Schema and the policy reference's field tables from the CRDs.
#
#   make generate          rewrite them all
#   make check-generated   fail if a committed copy is stale (part of make test, through lint)

CONTROLLER_GEN := $(BIN)/controller-gen
CRD_DIR := helm/weighstation/files/crds
CONTROLLER_GEN_ARGS := crd:crdVersions=v1 paths=./api/...
SCHEMAGEN_ARGS := -schema $(ROOT)/policies/schema/policy.schema.json -reference $(ROOT)/docs/policy-reference.md

.PHONY: generate check-generated

$(CONTROLLER_GEN): tools/controller-gen/go.mod tools/controller-gen/go.sum
	cd tools/controller-gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

generate: $(CONTROLLER_GEN)
	cd control-plane && $(CONTROLLER_GEN) $(CONTROLLER_GEN_ARGS) output:crd:dir=$(ROOT)/$(CRD_DIR)
	cd tools/schemagen && go run . -crds $(ROOT)/$(CRD_DIR) $(SCHEMAGEN_ARGS)

check-generated: $(CONTROLLER_GEN)
	rm -rf $(TOOLS)/generated/crds && mkdir -p $(TOOLS)/generated/crds
	cd control-plane && $(CONTROLLER_GEN) $(CONTROLLER_GEN_ARGS) output:crd:dir=$(TOOLS)/generated/crds
	@diff -r $(TOOLS)/generated/crds $(CRD_DIR) || { echo "$(CRD_DIR) is not what control-plane/api/v1alpha1 generates: run make generate"; exit 1; }
	cd tools/schemagen && go vet . && go run . -check -crds $(CRD_DIR:%=$(ROOT)/%) $(SCHEMAGEN_ARGS)
