package policy

import (
	"errors"
	"strings"
	"testing"
)

// Grants are the objects': a policy file that sets them is told why it may not.
func TestFilesMayNotSetGrants(t *testing.T) {
	_, err := parse(map[string]string{"defaults.yaml": strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n",
		"  defaultTenant: anonymous\n  grants: [{namespaces: [a], tenants: [b]}]\n", 1)})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != "spec.grants" || errs[0].Pos.Line != 7 ||
		!strings.Contains(errs[0].Reason, "a policy directory has no namespaces") {
		t.Fatalf("got %v", err)
	}
}

// An object decodes with the file rules; its errors name the object and field, not lines of
// its rendering, and its grants are read.
func TestParseObject(t *testing.T) {
	_, gd, err := ParseObject("GatewayDefaults default", []byte(`apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: {name: default}
spec:
  defaultTenant: base
  grants:
    - namespaces: [team-a]
      tenants: [acme]
      identities: {natsUsers: ["acme-*"], clientIdPrefixes: [acme-], tlsSans: ["spiffe://acme/*"]}
`))
	if err != nil || len(gd.Grants) != 1 || gd.Grants[0].Namespaces[0] != "team-a" || gd.Grants[0].ClientIDPrefixes[0] != "acme-" || gd.Grants[0].TLSSANs[0] != "spiffe://acme/*" {
		t.Fatalf("grants: %+v, %v", gd, err)
	}
	_, _, err = ParseObject("LimitPolicy team-a/acme", []byte(`apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: acme}
spec: {tenant: acme, limits: {maxMessageBytes: 1MB}}
`))
	if err == nil || err.Error() != `LimitPolicy team-a/acme: spec.limits.maxMessageBytes: "1MB" is not a size (use an integer, optionally with KiB, MiB or GiB, or "unlimited")` {
		t.Fatalf("got %v", err)
	}
}
