package compile

import (
	"encoding/json"
	"strings"
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

// Permissions reach each protocol's filter as the filter reads them: Kafka's grants, and the
// Kafka data lists and NATS lists where an empty list (nothing) is not an absent one (every
// name).
func TestPermissionsReachTheFilterOfTheirProtocol(t *testing.T) {
	set := &policy.Set{DefaultTenant: "a", Tenants: []*policy.Tenant{
		{Policy: policy.LimitPolicy{Tenant: "a"}, Permissions: policy.EffectivePermissions{
			KafkaProduce: []string{}, KafkaConsume: []string{"a.*"}, KafkaTransactionalIDs: []string{"a-tx-?"},
			KafkaDeleteTopics: []string{"a.*"}, KafkaCluster: []string{"ElectLeaders"},
			NATSPublish: []string{}, NATSJetStreamAdmin: []string{"A_*"}}},
		{Policy: policy.LimitPolicy{Tenant: "b"}},
		{Policy: policy.LimitPolicy{Tenant: "c"}, Permissions: policy.EffectivePermissions{KafkaGroups: []string{}}},
	}}
	kafka := Filter(set, "1", Kafka, 1).JSON()
	nats := Filter(set, "1", NATS, 1).JSON()
	for _, want := range []string{
		// produce [] stays [] (no topic); groups and createTopics, nil, are absent (every name).
		`"name":"a","policy":"","identify":{},"limits":{},"permissions":{"produce":[],"consume":["a.*"],"transactionalIds":["a-tx-?"],"deleteTopics":["a.*"],"cluster":["ElectLeaders"]}}`,
		// An empty data list alone is still stated.
		`"name":"c","policy":"","identify":{},"limits":{},"permissions":{"groups":[]}}`,
	} {
		if !strings.Contains(kafka, want) {
			t.Errorf("kafka filter config lacks %s:\n%s", want, kafka)
		}
	}
	if !strings.Contains(nats, `"natsPermissions":{"publish":[],"jetStreamAdmin":["A_*"]}`) {
		t.Errorf("nats filter config: publish [] must stay [] (nothing), subscribe absent (every subject):\n%s", nats)
	}
	if strings.Count(kafka, "permissions") != 2 || strings.Count(nats, "Permissions") != 1 {
		t.Errorf("a tenant with no permissions stated carries none, and each protocol only its own:\n%s\n%s", kafka, nats)
	}
}
