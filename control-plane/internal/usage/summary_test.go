package usage

import (
	"reflect"
	"testing"
	"time"
)

// A tenant's summary is its last minute over every worker and protocol: what was admitted,
// refused by reason, consumed, and the clients refused most.
func TestSummaryIsTheLastMinuteOfATenant(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	refused := func(c TenantCount, reason int, n uint64, clients ...ClientCount) TenantCount {
		c.Refused[reason] = n
		c.Clients = clients
		return c
	}
	reports := []Report{
		{Replica: "a", Worker: 1, Seq: 1, AtMs: 1000_000, Tenants: []TenantCount{count("nats", "billing", 0, 0, 1)}},
		{Replica: "a", Worker: 1, Seq: 2, AtMs: 1001_000, Tenants: []TenantCount{
			refused(count("nats", "billing", 100, 0, 1), 1, 40, ClientCount{"billing-a", 38}, ClientCount{"billing-c", 2})}},
		{Replica: "a", Worker: 2, Seq: 1, AtMs: 1000_000, Tenants: []TenantCount{count("kafka", "billing", 0, 0, 1)}},
		{Replica: "a", Worker: 2, Seq: 2, AtMs: 1002_000, Tenants: []TenantCount{
			refused(count("kafka", "billing", 50, 0, 1), 3, 5, ClientCount{"billing-a", 5}),
			count("kafka", "other", 70, 0, 1)}},
	}
	for _, r := range reports {
		b.Ingest(r, time.UnixMilli(r.AtMs))
	}
	got := b.Summary("billing", time.UnixMilli(1003_000))
	want := Summary{Admitted: 150, Bytes: 15000, Refused: map[string]uint64{"rate": 40, "queue": 5},
		TopClients: []ClientCount{{"billing-a", 43}, {"billing-c", 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summary:\n got %+v\nwant %+v", got, want)
	}
	if later := b.Summary("billing", time.UnixMilli(1100_000)); later.Admitted != 0 || len(later.TopClients) != 0 || len(later.Refused) != 0 {
		t.Errorf("a minute and more later the summary is empty: %+v", later)
	}
}
