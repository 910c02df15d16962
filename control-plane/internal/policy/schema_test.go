package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

const schemaPath = "../../../policies/schema/policy.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile(schemaPath)
	if err != nil {
		t.Fatalf("compiling %s: %v", schemaPath, err)
	}
	return s
}

// yamlDocs decodes every document of a YAML file into JSON-shaped values.
func yamlDocs(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc)
	}
	return out
}

// fieldPaths lists the dotted paths of every object key in v (list items as []).
func fieldPaths(v any, prefix string, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			into[p] = true
			fieldPaths(e, p, into)
		}
	case []any:
		for _, e := range x {
			fieldPaths(e, prefix+"[]", into)
		}
	}
}

// schemaPaths lists the dotted paths of every property the schema allows, following $refs.
func schemaPaths(t *testing.T, raw map[string]any, node any, prefix string, into map[string]bool, depth int) {
	if depth > 20 {
		t.Fatal("schema recursion too deep")
	}
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		schemaPaths(t, raw, raw["$defs"].(map[string]any)[name], prefix, into, depth+1)
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		if alts, ok := m[key].([]any); ok {
			for _, a := range alts {
				schemaPaths(t, raw, a, prefix, into, depth+1)
			}
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			into[path] = true
			schemaPaths(t, raw, p, path, into, depth+1)
		}
	}
	if items, ok := m["items"]; ok {
		schemaPaths(t, raw, items, prefix+"[]", into, depth+1)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The JSON Schema and the loader accept the same fields: the every-field fixture loads, the
// schema accepts each of its documents, and the fields it uses are exactly the schema's.
func TestSchemaMatchesLoader(t *testing.T) {
	fixture := "testdata/every-field.yaml"
	if _, err := LoadDir(filepath.Dir(fixture)); err != nil {
		t.Fatalf("the loader refuses the every-field fixture:\n%v", err)
	}
	schema := compileSchema(t)
	used := map[string]bool{}
	for i, doc := range yamlDocs(t, fixture) {
		if err := schema.Validate(doc); err != nil {
			t.Errorf("document %d: schema refuses what the loader accepts: %v", i, err)
		}
		fieldPaths(doc, "", used)
	}
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	schemaPaths(t, raw, raw, "", allowed, 0)
	if got, want := strings.Join(sortedKeys(used), "\n"), strings.Join(sortedKeys(allowed), "\n"); got != want {
		t.Errorf("fields used by the every-field fixture:\n%s\n\nfields in the schema:\n%s", got, want)
	}
}

func TestSchemaAcceptsShippedExamplesAndRefusesUnknownFields(t *testing.T) {
	schema := compileSchema(t)
	files, _ := filepath.Glob("../../../policies/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example policies found")
	}
	for _, f := range files {
		for i, doc := range yamlDocs(t, f) {
			if err := schema.Validate(doc); err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
			}
			doc.(map[string]any)["spec"].(map[string]any)["limitz"] = 1
			if err := schema.Validate(doc); err == nil {
				t.Errorf("%s document %d: schema accepted an unknown field", f, i)
			}
		}
	}
}
