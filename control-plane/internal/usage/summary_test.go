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
			refused(count("nats", "billing", 100, 0, 1), 1, 40, ClientCount{Client: "billing-a", Refused: 38}, ClientCount{Client: "billing-c", Refused: 2},
				ClientCount{Client: "billing-b", Messages: 60, Bytes: 6000})}},
		{Replica: "a", Worker: 2, Seq: 1, AtMs: 1000_000, Tenants: []TenantCount{count("kafka", "billing", 0, 0, 1)}},
		{Replica: "a", Worker: 2, Seq: 2, AtMs: 1002_000, Tenants: []TenantCount{
			refused(count("kafka", "billing", 50, 0, 1), 3, 5, ClientCount{Client: "billing-a", Refused: 5}),
			count("kafka", "other", 70, 0, 1)}},
	}
	for _, r := range reports {
		b.Ingest(r, time.UnixMilli(r.AtMs))
	}
	got := b.Summary("billing", time.UnixMilli(1003_000))
	want := Summary{Admitted: 150, Bytes: 15000, Refused: map[string]uint64{"rate": 40, "queue": 5},
		TopClients: []ClientCount{{Client: "billing-a", Refused: 43}, {Client: "billing-c", Refused: 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summary:\n got %+v\nwant %+v", got, want)
	}
	if later := b.Summary("billing", time.UnixMilli(1100_000)); later.Admitted != 0 || len(later.TopClients) != 0 || len(later.Refused) != 0 {
		t.Errorf("a minute and more later the summary is empty: %+v", later)
	}
}

// The per-client metrics are each tenant's busiest clients over the last minute, per second.
func TestClientRatesAreATenantsTopClientsOverTheLastMinute(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	withClients := func(c TenantCount, clients ...ClientCount) TenantCount {
		c.Clients = clients
		return c
	}
	b.Ingest(Report{Replica: "a", Worker: 1, Seq: 1, AtMs: 1000_000, Tenants: []TenantCount{
		withClients(count("nats", "billing", 0, 0, 1)),
		withClients(count("kafka", "billing", 0, 0, 1))}}, time.UnixMilli(1000_000))
	b.Ingest(Report{Replica: "a", Worker: 1, Seq: 2, AtMs: 1001_000, Tenants: []TenantCount{
		withClients(count("nats", "billing", 150, 0, 1), ClientCount{Client: "a", Messages: 60, Bytes: 600, Refused: 120},
			ClientCount{Client: "b", Messages: 30, Bytes: 300}, ClientCount{Client: "c", Messages: 6, Bytes: 60}),
		withClients(count("kafka", "billing", 12, 0, 1), ClientCount{Client: "k", Messages: 12, Bytes: 1200})}},
		time.UnixMilli(1001_000))
	got := b.ClientRates(time.UnixMilli(1002_000), 2)
	want := []ClientRate{
		{Protocol: "kafka", Tenant: "billing", Client: "k", MessagesPerSecond: 0.2, BytesPerSecond: 20},
		{Protocol: "nats", Tenant: "billing", Client: "a", MessagesPerSecond: 1, BytesPerSecond: 10, RefusedPerSecond: 2},
		{Protocol: "nats", Tenant: "billing", Client: "b", MessagesPerSecond: 0.5, BytesPerSecond: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("client rates:\n got %+v\nwant %+v", got, want)
	}
	if later := b.ClientRates(time.UnixMilli(1100_000), 2); len(later) != 0 {
		t.Errorf("a minute later: %+v", later)
	}
}
