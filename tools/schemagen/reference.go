package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// The policy reference's field tables sit between these lines, one pair per kind.
const (
	beginTable = "<!-- generated from control-plane/api/v1alpha1 by make generate: %s -->"
	endTable   = "<!-- end of generated table -->"
)

// rewriteReference replaces each kind's generated field table in the policy reference.
func rewriteReference(doc []byte, crds kinds) ([]byte, error) {
	out := doc
	for _, kind := range []string{"LimitPolicy", "GatewayDefaults"} {
		begin := []byte(fmt.Sprintf(beginTable, kind))
		i := bytes.Index(out, begin)
		if i < 0 {
			return nil, fmt.Errorf("no line %q", begin)
		}
		j := bytes.Index(out[i:], []byte(endTable))
		if j < 0 {
			return nil, fmt.Errorf("no %q after the %s table", endTable, kind)
		}
		var b bytes.Buffer
		b.Write(begin)
		b.WriteString("\n\n| field | meaning |\n|---|---|\n")
		if kind == "LimitPolicy" {
			b.WriteString("| `metadata.name` | unique among LimitPolicies (on Kubernetes: in its namespace); a DNS label |\n")
		}
		for _, r := range fieldRows(child(crds[kind], "spec"), "spec") {
			fmt.Fprintf(&b, "| `%s` | %s |\n", r.path, r.meaning)
		}
		b.WriteString("\n")
		out = append(append(append([]byte{}, out[:i]...), b.Bytes()...), out[i+j:]...)
	}
	return out, nil
}

type row struct{ path, meaning string }

// fieldRows lists a schema's fields in declaration-independent (sorted) order: leaves, lists
// of values, and limits (whose fields the Limits table describes).
func fieldRows(s map[string]any, path string) []row {
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	var rows []row
	for _, n := range names {
		p := props[n].(map[string]any)
		fp := path + "." + n
		switch {
		case isLimits(p):
			rows = append(rows, row{fp, meaning(p)})
		case p["type"] == "object":
			rows = append(rows, fieldRows(p, fp)...)
		case p["type"] == "array" && child(p, "[]")["type"] == "object":
			rows = append(rows, fieldRows(child(p, "[]"), fp+"[]")...)
		default:
			rows = append(rows, row{fp, meaning(p)})
		}
	}
	return rows
}

func isLimits(s map[string]any) bool {
	return child(s, "rate") != nil && child(s, "maxMessageBytes") != nil
}

func meaning(s map[string]any) string {
	m := strings.ReplaceAll(oneLine(s["description"]), "|", `\|`)
	if enum, ok := s["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, v := range enum {
			vals[i] = fmt.Sprintf("`%v`", v)
		}
		m += " One of " + strings.Join(vals, ", ") + "."
	}
	if d, ok := s["default"]; ok {
		m += fmt.Sprintf(" Default `%v`.", d)
	}
	return m
}
