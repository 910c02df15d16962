package policy

import (
	"strings"
	"testing"
)

// Objects judged one at a time: each against the defaults and those admitted before it, with
// the errors Resolve would give it among them; a refused one claims nothing.
func TestAdmissionJudgesEachPolicyAgainstThoseAdmitted(t *testing.T) {
	object := func(ref, doc string) LimitPolicy {
		t.Helper()
		lp, _, err := ParseObject(ref, []byte("apiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: x }\n"+doc))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		lp.Name = ref
		return *lp
	}
	_, gd, err := ParseObject("GatewayDefaults default", []byte("apiVersion: weighstation.io/v1alpha1\nkind: GatewayDefaults\nmetadata: { name: default }\nspec:\n  defaultTenant: base\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := NewAdmission(*gd)
	steps := []struct {
		ref, doc string
		want     string // a fragment of the error; empty: admitted
	}{
		{"LimitPolicy a/acme", "spec: { tenant: acme, identify: { nats: { users: [acme] }, kafka: { clientIdPrefixes: [acme-] } } }", ""},
		{"LimitPolicy b/acme", "spec: { tenant: acme, identify: { nats: { users: [acme-2] } } }", `tenant "acme" already has a LimitPolicy`},
		{"LimitPolicy b/globex", "spec: { tenant: globex, identify: { nats: { users: [acme] } } }", `NATS user "acme" already identifies tenant "acme"`},
		{"LimitPolicy b/acme-eu", "spec: { tenant: acme-eu, identify: { kafka: { clientIdPrefixes: [acme-eu-] } } }", `overlaps prefix "acme-"`},
		{"LimitPolicy b/initech", "spec: { tenant: initech }", "spec.identify"},
		{"LimitPolicy b/bad", "spec: { tenant: bad, identify: { nats: { users: [bad] } }, scope: global }", "global needs a quota service"},
		// Refused objects claimed nothing: their tenant and users are free.
		{"LimitPolicy c/globex", "spec: { tenant: globex, identify: { nats: { users: [globex] } } }", ""},
		{"LimitPolicy c/initech", "spec: { tenant: initech, identify: { nats: { users: [initech] } } }", ""},
	}
	for _, s := range steps {
		errs := a.Admit(object(s.ref, s.doc))
		switch {
		case s.want == "" && len(errs) > 0:
			t.Errorf("%s refused: %v", s.ref, errs)
		case s.want != "" && !strings.Contains(errs.Error(), s.want):
			t.Errorf("%s: errors %v, want one saying %q", s.ref, errs, s.want)
		case s.want != "":
			for _, e := range errs {
				if e.Pos.File != s.ref {
					t.Errorf("%s: error %v names another object", s.ref, e)
				}
			}
		}
	}
}
