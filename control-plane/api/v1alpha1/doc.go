// Package v1alpha1 is the one source of weighstation's policy schema: the LimitPolicy and
// GatewayDefaults CRDs (helm/weighstation/crds), the policy files' JSON Schema
// (policies/schema/policy.schema.json) and the field tables of docs/policy-reference.md are
// generated from these types and their comments (`make generate`). The control plane decodes
// files and objects with internal/policy, which reports positions; these types carry the shape,
// the per-object rules the API server enforces at admission, and the words users read.
//
// +kubebuilder:object:generate=false
// +groupName=weighstation.io
// +versionName=v1alpha1
package v1alpha1
