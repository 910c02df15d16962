package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

const apiVersion = "weighstation.io/v1alpha1"

// objectsOnly are spec fields of the CRDs a policy file may not set: grants name namespaces,
// which a policy directory does not have.
var objectsOnly = map[string]string{"GatewayDefaults": "grants"}

// fileSchema is the JSON Schema (2020-12) of one policy file document: the CRD's spec schema,
// with unknown fields refused (the API server prunes or refuses them by its own rules),
// int-or-string values as JSON Schema alternatives, a file's metadata, and no status.
func fileSchema(crds kinds) ([]byte, error) {
	defs := map[string]any{}
	for kind, s := range crds {
		spec := convert(child(s, "spec"))
		if field, ok := objectsOnly[kind]; ok {
			delete(spec["properties"].(map[string]any), field)
		}
		defs[kind] = map[string]any{
			"description":          oneLine(s["description"]),
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"apiVersion", "kind", "metadata", "spec"},
			"properties": map[string]any{
				"apiVersion": map[string]any{"const": apiVersion},
				"kind":       map[string]any{"const": kind},
				"metadata": map[string]any{
					"type":                 "object",
					"additionalProperties": false,
					"required":             []any{"name"},
					"properties": map[string]any{"name": map[string]any{
						"description": "Unique among the documents of its kind; a DNS label.",
						"type":        "string",
						"pattern":     "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
					}},
				},
				"spec": spec,
			},
		}
	}
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         "https://weighstation.io/schemas/v1alpha1/policy.schema.json",
		"title":       "weighstation policy document",
		"description": "One YAML document of a weighstation policy directory: a LimitPolicy (one tenant's limits) or the GatewayDefaults. Generated from control-plane/api/v1alpha1, as are the CRDs. `weighstation validate DIR` applies these rules and the cross-document ones (duplicate tenants, overlapping identities, burst versus maxMessageBytes).",
		"oneOf":       []any{map[string]any{"$ref": "#/$defs/LimitPolicy"}, map[string]any{"$ref": "#/$defs/GatewayDefaults"}},
		"$defs":       defs,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// atLeast is the CEL rule the API types put on every int-or-string limit: the integer's lower bound.
var atLeast = regexp.MustCompile(`^type\(self\) == string \|\| self >= ([0-9]+)$`)

// convert turns one OpenAPI v3 (structural) schema into JSON Schema. CEL rules other than
// atLeast have no JSON Schema form; `weighstation validate` checks the same rules.
func convert(s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = convert(p.(map[string]any))
			}
			out[k] = props
		case "items":
			out[k] = convert(v.(map[string]any))
		case "description":
			out[k] = oneLine(v)
		case "anyOf", "x-kubernetes-validations", "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys":
		default:
			out[k] = v
		}
	}
	if s["type"] == "object" {
		out["additionalProperties"] = false
	}
	if s["x-kubernetes-int-or-string"] == true {
		integer := map[string]any{"type": "integer"}
		for _, r := range rules(s) {
			if m := atLeast.FindStringSubmatch(r); m != nil {
				n, _ := strconv.Atoi(m[1])
				integer["minimum"] = n
			}
		}
		str := map[string]any{"type": "string"}
		if p, ok := out["pattern"]; ok {
			str["pattern"] = p
			delete(out, "pattern")
		}
		out["oneOf"] = []any{integer, str}
	}
	return out
}

func rules(s map[string]any) []string {
	var out []string
	list, _ := s["x-kubernetes-validations"].([]any)
	for _, r := range list {
		if m, ok := r.(map[string]any); ok {
			rule, _ := m["rule"].(string)
			out = append(out, rule)
		}
	}
	return out
}

func oneLine(v any) string {
	s, _ := v.(string)
	return strings.Join(strings.Fields(s), " ")
}
