package usage

import (
	"math"
	"testing"
	"time"
)

func count(protocol, tenant string, messages, refusedRate uint64, connections int64) TenantCount {
	c := TenantCount{Protocol: protocol, Tenant: tenant, Messages: messages, Bytes: messages * 100, Connections: connections}
	c.Refused[1] = refusedRate
	return c
}

func u64(v uint64) *uint64 { return &v }

func TestNowSumsWorkersAndReplicas(t *testing.T) {
	b := New(10)
	t0 := time.Unix(1000, 0)
	reports := []Report{
		{Replica: "envoy-a", Worker: 1, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 2)}},
		{Replica: "envoy-a", Worker: 2, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 1)}},
		{Replica: "envoy-b", Worker: 7, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 1)}},
		{Replica: "envoy-a", Worker: 1, AtMs: 2000, Tenants: []TenantCount{count("nats", "acme", 300, 10, 2)}},
		{Replica: "envoy-a", Worker: 2, AtMs: 2000, Tenants: []TenantCount{count("nats", "acme", 100, 0, 1)}},
		// envoy-b reports twice in 2 s: its rate is over its own interval.
		{Replica: "envoy-b", Worker: 7, AtMs: 3000, Tenants: []TenantCount{count("nats", "acme", 400, 30, 1)}},
	}
	for _, r := range reports {
		b.Ingest(r, t0)
	}
	limits := func(_, tenant string) (Limits, bool) {
		return Limits{MessagesPerSecond: u64(500), Mode: "enforce"}, tenant == "acme"
	}
	got := b.Now(t0, limits)
	if len(got) != 1 {
		t.Fatalf("tenants: %+v", got)
	}
	a := got[0]
	cases := []struct {
		what      string
		got, want float64
	}{
		{"messages/s: 300 + 100 + 400/2", a.MessagesPerSecond, 600},
		{"bytes/s", a.BytesPerSecond, 60000},
		{"refused rate/s: 10 + 30/2", a.RefusedPerSecond["rate"], 25},
		{"connections", float64(a.Connections), 4},
		{"replicas", float64(a.Replicas), 2},
		{"load: 600 of 500 × 2 replicas (perGateway)", a.Load, 0.6},
	}
	for _, c := range cases {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	// A global limit is not multiplied by the replicas.
	global := func(_, _ string) (Limits, bool) { return Limits{MessagesPerSecond: u64(500), Global: true}, true }
	if l := b.Now(t0, global)[0].Load; math.Abs(l-1.2) > 1e-9 {
		t.Errorf("global load %v, want 1.2", l)
	}
	// Workers gone quiet no longer count.
	if got := b.Now(t0.Add(workerLapse+time.Second), limits); len(got) != 0 {
		t.Errorf("after the lapse: %+v", got)
	}
}

func TestNowSortsTheMostLoadedFirst(t *testing.T) {
	b := New(10)
	now := time.Unix(1000, 0)
	for at, n := range map[int64]uint64{1000: 0, 2000: 100} {
		b.Ingest(Report{Replica: "e", Worker: 1, AtMs: at, Tenants: []TenantCount{
			count("nats", "calm", n, 0, 1), count("kafka", "busy", n, 0, 1),
		}}, now)
	}
	limits := func(_, tenant string) (Limits, bool) {
		if tenant == "busy" {
			return Limits{MessagesPerSecond: u64(110)}, true
		}
		return Limits{MessagesPerSecond: u64(1000)}, true
	}
	got := b.Now(now, limits)
	if len(got) != 2 || got[0].Tenant != "busy" || got[1].Tenant != "calm" {
		t.Errorf("order: %+v", got)
	}
}

func TestDecisionsKeepTheLatestAndFilter(t *testing.T) {
	b := New(3)
	now := time.Now()
	d := func(tenant, limit, subject string) Decision {
		return Decision{Tenant: tenant, Protocol: "nats", Limit: limit, Decision: "refused", Subject: subject, AtMs: now.UnixMilli()}
	}
	b.Ingest(Report{Replica: "e", Worker: 1, AtMs: 1, Decisions: []Decision{d("acme", "rate", "orders.new"), d("globex", "maxMessageBytes", "x")}}, now)
	b.Ingest(Report{Replica: "e", Worker: 1, AtMs: 2, Decisions: []Decision{d("acme", "inFlight", "orders.get"), d("acme", "rate", "audit")}}, now)
	all, last := b.Decisions(Filter{}, -1)
	if last != 3 || len(all) != 3 || all[0].Seq != 1 || all[2].Seq != 3 {
		t.Fatalf("retained %+v, last %d: want seq 1..3 of 0..3", all, last)
	}
	if all[0].Replica != "e" {
		t.Errorf("replica not recorded: %+v", all[0])
	}
	cases := []struct {
		f    Filter
		want int
	}{
		{Filter{Tenant: "acme"}, 2},
		{Filter{Tenant: "acme", Reason: "rate"}, 1},
		{Filter{Reason: "size"}, 1},
		{Filter{Reason: "maxMessageBytes"}, 1},
		{Filter{Subject: "orders"}, 1},
		{Filter{Protocol: "kafka"}, 0},
		{Filter{SinceMs: now.Add(time.Minute).UnixMilli()}, 0},
	}
	for _, c := range cases {
		if got, _ := b.Decisions(c.f, -1); len(got) != c.want {
			t.Errorf("%+v: %d decisions, want %d", c.f, len(got), c.want)
		}
	}
	if got, _ := b.Decisions(Filter{}, 2); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("after 2: %+v", got)
	}
}

func TestSuppressedCountsAddUp(t *testing.T) {
	b := New(1)
	now := time.Unix(1000, 0)
	for at := int64(1000); at <= 3000; at += 1000 {
		b.Ingest(Report{Replica: "e", Worker: 1, AtMs: at,
			Tenants:    []TenantCount{count("nats", "acme", 0, 0, 1)},
			Suppressed: []Suppressed{{Protocol: "nats", Tenant: "acme", Decision: "rate", Count: 40}},
		}, now)
	}
	if got := b.Now(now, func(_, _ string) (Limits, bool) { return Limits{}, false })[0].Suppressed; got != 120 {
		t.Errorf("suppressed %d, want 120", got)
	}
}
