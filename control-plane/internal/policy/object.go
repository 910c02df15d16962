package policy

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseObject decodes one Kubernetes object, rendered as a YAML document of the file format,
// alone: the rules that need no other document. ref names the object in errors
// ("LimitPolicy team-a/acme"); exactly one of the results is non-nil when there is no error.
func ParseObject(ref string, doc []byte) (*LimitPolicy, *GatewayDefaults, error) {
	c := &collector{}
	d := &decoder{file: ref, c: c, object: true}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(doc)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, Errors{{Pos: Pos{File: ref}, Field: "(document)", Reason: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	lp, gd := d.document(&root)
	if len(c.errs) > 0 {
		return nil, nil, c.errs
	}
	if lp == nil && gd == nil {
		return nil, nil, Errors{{Pos: Pos{File: ref}, Field: "(document)", Reason: "is empty"}}
	}
	return lp, gd, nil
}

// Resolve checks the rules across documents and resolves every tenant's limits, as a policy
// directory's load does; hash identifies the content. The errors, and the set's warnings, name
// the documents' refs.
func Resolve(gd GatewayDefaults, policies []LimitPolicy, hash string) (*Set, Errors) {
	c := &collector{}
	set := validateSet("", policies, []GatewayDefaults{gd}, c)
	if len(c.errs) > 0 {
		return nil, c.errs.sorted()
	}
	set.Hash = hash
	set.Warnings = c.warns.sorted()
	return set, nil
}
