package bootstrap

import (
	"encoding/json"
	"regexp"
	"testing"
)

// Envoy's tag extraction uses the same RE2 syntax: each regex's first group is cut from the name
// and its second is the label value. The names are those the filter defines
// (wasm-filter/core/src/metrics.rs).
func TestStatsTagsTurnFilterMetricNamesIntoLabels(t *testing.T) {
	cases := []struct {
		stat string
		want map[string]string
	}{
		{"wasmcustom.weighstation_messages_accepted.protocol.nats.tenant.acme", map[string]string{"protocol": "nats", "tenant": "acme"}},
		{"wasmcustom.weighstation_messages_refused.protocol.kafka.reason.rate.tenant.globex-eu", map[string]string{"protocol": "kafka", "reason": "rate", "tenant": "globex-eu"}},
		{"wasmcustom.weighstation_policy_generation.protocol.nats", map[string]string{"protocol": "nats"}},
	}
	for _, c := range cases {
		got := map[string]string{}
		for _, tag := range StatsTags {
			m := regexp.MustCompile(tag.GetRegex()).FindStringSubmatch(c.stat)
			if m != nil {
				got[tag.TagName] = m[2]
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: tags %v, want %v", c.stat, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", c.stat, k, got[k], v)
			}
		}
	}
}

func TestRenderPointsEnvoyAtTheControlPlane(t *testing.T) {
	out, err := Render(Options{NodeID: "n1", XDS: "cp.example:18000", Admin: "127.0.0.1:9901"})
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Node             struct{ ID string }
		DynamicResources struct {
			AdsConfig struct {
				APIType string `json:"apiType"`
			} `json:"adsConfig"`
		} `json:"dynamicResources"`
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b.Node.ID != "n1" || b.DynamicResources.AdsConfig.APIType != "GRPC" {
		t.Errorf("bootstrap: %s", out)
	}
	if _, err := Render(Options{NodeID: "n", XDS: "no-port", Admin: "127.0.0.1:9901"}); err == nil {
		t.Error("an xDS address without a port was accepted")
	}
}
