package compile

import (
	"encoding/json"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

func loadExamples(t *testing.T) *policy.Set {
	t.Helper()
	set, err := policy.LoadDir("../../../policies")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestFilterConfigCarriesResolvedLimitsPerProtocol(t *testing.T) {
	set := loadExamples(t)
	var nats, kafka FilterConfig
	for proto, into := range map[Protocol]*FilterConfig{NATS: &nats, Kafka: &kafka} {
		if err := json.Unmarshal([]byte(Filter(set, "3-abc", proto, 1).JSON()), into); err != nil {
			t.Fatal(err)
		}
	}
	if nats.Version != "3-abc" || nats.DefaultTenant != "anonymous" || len(nats.Tenants) != 3 {
		t.Fatalf("nats config header: %+v", nats)
	}
	acme := nats.Tenants[0]
	if acme.Name != "acme" || acme.Reject || acme.DryRun {
		t.Fatalf("acme: %+v", acme)
	}
	if *acme.Limits.MaxMessageBytes != 256<<10 || *acme.Limits.QueueMaxWaitMs != 250 || *acme.Limits.BurstMessages != 500 {
		t.Errorf("acme limits: %+v", acme.Limits)
	}
	if len(acme.Identify.NATSUsers) != 1 || len(acme.Identify.KafkaClientIDPrefixes) != 0 {
		t.Errorf("the NATS config carries NATS identities only: %+v", acme.Identify)
	}
	if len(acme.Overrides) != 1 || acme.Overrides[0].Patterns[0] != "orders.>" || *acme.Overrides[0].Limits.MaxMessageBytes != 64<<10 {
		t.Errorf("nats overrides: %+v", acme.Overrides)
	}
	if acme.Overrides[0].Limits.InFlight != nil {
		t.Error("an override carries only what it narrows")
	}
	kacme := kafka.Tenants[0]
	if kacme.Identify.KafkaClientIDPrefixes[0] != "acme-" || kacme.Overrides[0].Patterns[0] != "orders-*" {
		t.Errorf("kafka acme: %+v", kacme)
	}
	if !kafka.Tenants[2].Reject {
		t.Error("globex rejects on limit")
	}
}
