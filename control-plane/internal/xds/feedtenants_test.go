package xds

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

func tenantWithRate(name string, rate uint64) *policy.Tenant {
	return &policy.Tenant{Policy: policy.LimitPolicy{Tenant: name, Name: name}, Limits: policy.Effective{MessagesPerSecond: &rate}}
}

// A tenant that is the very *policy.Tenant published before keeps its JSON, unencoded again;
// any other is compiled and encoded; a tenant no longer in the set is dropped.
func TestFeedTenantsEncodeOnlyTenantsNotPublishedBefore(t *testing.T) {
	kept, changed, removed := tenantWithRate("kept", 1), tenantWithRate("changed", 1), tenantWithRate("removed", 1)
	var ft feedTenants
	if err := ft.update(&policy.Set{Tenants: []*policy.Tenant{changed, kept, removed}}); err != nil {
		t.Fatal(err)
	}
	before := map[compile.Protocol]json.RawMessage{}
	for _, p := range protocols {
		before[p] = ft.encoded[p]["kept"]
	}
	added := tenantWithRate("added", 3)
	if err := ft.update(&policy.Set{Tenants: []*policy.Tenant{added, tenantWithRate("changed", 2), kept}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range protocols {
		got := ft.encoded[p]
		if len(got) != 3 || got["removed"] != nil {
			t.Errorf("%s: %d tenants encoded, want added, changed and kept", p, len(got))
		}
		if &got["kept"][0] != &before[p][0] {
			t.Errorf("%s: kept was encoded again", p)
		}
		if !strings.Contains(string(got["changed"]), `"messagesPerSecond":2`) || !strings.Contains(string(got["added"]), `"messagesPerSecond":3`) {
			t.Errorf("%s: changed %s, added %s", p, got["changed"], got["added"])
		}
	}
}
