package usage

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

func count(protocol, tenant string, messages, refusedRate uint64, connections int64) TenantCount {
	c := TenantCount{Protocol: protocol, Tenant: tenant, Messages: messages, Bytes: messages * 100, Connections: connections}
	c.Refused[1] = refusedRate
	return c
}

func u64(v uint64) *uint64 { return &v }

func withSubjects(c TenantCount, pairs ...any) TenantCount {
	for i := 0; i+1 < len(pairs); i += 2 {
		c.Subjects = append(c.Subjects, SubjectCount{pairs[i].(string), uint64(pairs[i+1].(int))})
	}
	return c
}

func TestNowSumsWorkersAndReplicas(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	t0 := time.Unix(1000, 0)
	reports := []Report{
		{Replica: "envoy-a", Worker: 1, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 2)}},
		{Replica: "envoy-a", Worker: 2, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 1)}},
		{Replica: "envoy-b", Worker: 7, AtMs: 1000, Tenants: []TenantCount{count("nats", "acme", 0, 0, 1)}},
		{Replica: "envoy-a", Worker: 1, AtMs: 2000, Tenants: []TenantCount{withSubjects(count("nats", "acme", 300, 10, 2), "orders.new", 240, "audit", 60)}},
		{Replica: "envoy-a", Worker: 2, AtMs: 2000, Tenants: []TenantCount{count("nats", "acme", 100, 0, 1)}},
		// envoy-b reports twice in 2 s: its rate is over its own interval.
		{Replica: "envoy-b", Worker: 7, AtMs: 3000, Tenants: []TenantCount{withSubjects(count("nats", "acme", 400, 30, 1), "orders.new", 400)}},
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
	wantTop := []SubjectRate{{"orders.new", 440}, {"audit", 60}}
	if len(a.TopSubjects) != 2 || a.TopSubjects[0] != wantTop[0] || a.TopSubjects[1] != wantTop[1] {
		t.Errorf("top subjects %+v, want %+v (240/s + 400 over 2 s)", a.TopSubjects, wantTop)
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
	b := New(10, DefaultMinutes, DefaultSeconds)
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
	b := New(3, DefaultMinutes, DefaultSeconds)
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
		{Filter{Reason: "maxMessageBytes"}, 0},
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
	b := New(1, DefaultMinutes, DefaultSeconds)
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

// Per-minute and per-second usage add what each worker counted between two reports, spread over
// the time between them; a worker's first report counts whole, a worker seen again after the
// control plane forgot it (or restarted) does not, and a report sent twice counts once.
func TestHistoryAddsWhatWorkersCountedBetweenReports(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	minute := int64(29_450_000) * 60000 // a minute's start
	now := time.UnixMilli(minute + 3000)
	reports := []Report{
		// Seen first at its 7th report (the control plane restarted): its 1000 are not counted.
		{Replica: "a", Worker: 1, Seq: 7, AtMs: minute + 1000, Tenants: []TenantCount{count("nats", "acme", 1000, 0, 1)}},
		// 100 more over (1000, 2500]: 66 in second 1 (2/3 of the time), 34 in second 2.
		{Replica: "a", Worker: 1, Seq: 8, AtMs: minute + 2500, Tenants: []TenantCount{count("nats", "acme", 1100, 5, 1)}},
		// The same report again: ignored.
		{Replica: "a", Worker: 1, Seq: 8, AtMs: minute + 2500, Tenants: []TenantCount{count("nats", "acme", 1100, 5, 1)}},
		// A new worker's first report: counted whole, over its last second.
		{Replica: "b", Worker: 2, Seq: 1, AtMs: minute + 2000, Tenants: []TenantCount{count("nats", "acme", 30, 0, 1)}},
	}
	for _, r := range reports {
		b.Ingest(r, now)
	}
	// 50 more over (2500, 61000]: spread over the rest of the minute, 1 in the next.
	b.Ingest(Report{Replica: "a", Worker: 1, Seq: 9, AtMs: minute + 61000, Tenants: []TenantCount{count("nats", "acme", 1150, 5, 1)}}, time.UnixMilli(minute+61000))
	got := b.History(time.UnixMilli(minute), false)
	want := []Bucket{
		{Start: time.UnixMilli(minute).UTC(), Protocol: "nats", Tenant: "acme", Messages: 130 + 49, Bytes: 13000 + 4914, Refused: 5, RefusedBy: [6]uint64{0, 5}},
		{Start: time.UnixMilli(minute + 60000).UTC(), Protocol: "nats", Tenant: "acme", Messages: 1, Bytes: 86},
	}
	if len(got) != len(want) {
		t.Fatalf("minutes %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("minute %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	secs := b.History(time.UnixMilli(minute), true)
	bySecond := map[int64]uint64{}
	var total uint64
	for _, s := range secs {
		bySecond[(s.Start.UnixMilli()-minute)/1000] += s.Messages
		total += s.Messages
	}
	if bySecond[1] != 66+30 || bySecond[2] != 34 || total != 180 {
		t.Errorf("per second %v (total %d): want 96 in second 1 (66 of a's 100, b's 30), 34 in second 2, 180 in all", bySecond, total)
	}
	var csv, pq bytes.Buffer
	if err := WriteHistory(&csv, "csv", got); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(csv.String()), "\n"); len(lines) != 3 || lines[0] != "start,protocol,tenant,messages,bytes,refused,delayed,consumed,client" || !strings.HasSuffix(lines[1], ",nats,acme,179,17914,5,0,0,") {
		t.Errorf("csv:\n%s", csv.String())
	}
	if err := WriteHistory(&pq, "parquet", got); err != nil {
		t.Fatal(err)
	}
	back, err := parquet.Read[Bucket](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	if err != nil || len(back) != 2 || back[0].Messages != 179 || !back[1].Start.Equal(want[1].Start) {
		t.Errorf("parquet read back %+v (%v)", back, err)
	}
}

// A control plane that has no earlier report of a worker (it restarted) cannot count the
// worker's report, so it asks for the counters of the last report a control plane counted, and
// counts from those: nothing the worker did while no control plane counted it is lost. A worker
// that does not send them (an older filter) is counted from its next report, as before.
func TestARestartedControlPlaneCountsFromTheLastCountedReport(t *testing.T) {
	minute := int64(29_450_000) * 60000
	at := func(s int64) time.Time { return time.UnixMilli(minute + s*1000) }
	b := New(10, DefaultMinutes, DefaultSeconds)
	// The worker's report 5 was counted by the control plane before it restarted (1000
	// messages); 6 did not get through; 7 reaches the restarted one.
	_, ask := b.Ingest(Report{Replica: "a", Worker: 1, Seq: 7, AtMs: at(7).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1300, 0, 1)}}, at(7))
	if !ask {
		t.Fatal("a worker first seen at its 7th report was not asked for its since")
	}
	since := &Since{AtMs: at(5).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1000, 0, 1)}}
	_, ask = b.Ingest(Report{Replica: "a", Worker: 1, Seq: 8, AtMs: at(8).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1400, 0, 1)}, Since: since}, at(8))
	if ask {
		t.Error("asked again after the since came")
	}
	var total uint64
	for _, r := range b.History(time.UnixMilli(minute), true) {
		total += r.Messages
	}
	if total != 400 {
		t.Errorf("counted %d messages: want the 400 since the last counted report", total)
	}
	_, ask = b.Ingest(Report{Replica: "a", Worker: 1, Seq: 9, AtMs: at(9).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1450, 0, 1)}}, at(9))
	if total = 0; ask {
		t.Error("a counted worker was asked for its since")
	}
	for _, r := range b.History(time.UnixMilli(minute), true) {
		total += r.Messages
	}
	if total != 450 {
		t.Errorf("counted %d messages after the next report: want 450", total)
	}

	old := New(10, DefaultMinutes, DefaultSeconds)
	old.Ingest(Report{Replica: "a", Worker: 1, Seq: 7, AtMs: at(7).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1300, 0, 1)}}, at(7))
	old.Ingest(Report{Replica: "a", Worker: 1, Seq: 8, AtMs: at(8).UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 1400, 0, 1)}}, at(8))
	if h := old.History(time.UnixMilli(minute), false); len(h) != 1 || h[0].Messages != 100 {
		t.Errorf("a worker that sends no since: %+v, want its 100 from the report it was asked at", h)
	}
}

// A tenant with client limits has its busiest clients' rows after its own, each with what its
// workers reported of it, busiest first: at most clientRows of them per bucket.
func TestHistoryHasTheBusiestClientsOfATenant(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	minute := int64(29_450_000) * 60000
	withClients := func(c TenantCount, clients ...ClientCount) TenantCount {
		c.Clients = clients
		return c
	}
	b.Ingest(Report{Replica: "a", Worker: 1, Seq: 1, AtMs: minute + 1000, Tenants: []TenantCount{withClients(count("kafka", "billing", 100, 40, 1),
		ClientCount{Client: "billing-a", Messages: 10, Bytes: 1000, Refused: 40}, ClientCount{Client: "billing-b", Messages: 90, Bytes: 9000})}},
		time.UnixMilli(minute+1000))
	b.Ingest(Report{Replica: "a", Worker: 2, Seq: 1, AtMs: minute + 1000, Tenants: []TenantCount{withClients(count("kafka", "billing", 12, 0, 1),
		ClientCount{Client: "billing-a", Messages: 12, Bytes: 1200})}}, time.UnixMilli(minute+1000))
	var many []ClientCount
	for i := range clientRows + 5 {
		many = append(many, ClientCount{Client: fmt.Sprintf("c%02d", i), Messages: uint64(100 + i)})
	}
	b.Ingest(Report{Replica: "a", Worker: 3, Seq: 1, AtMs: minute + 1000, Tenants: []TenantCount{withClients(count("nats", "crowd", 2000, 0, 1), many...)}},
		time.UnixMilli(minute+1000))
	got := b.History(time.UnixMilli(minute), false)
	at := time.UnixMilli(minute).UTC()
	want := []Bucket{
		{Start: at, Protocol: "kafka", Tenant: "billing", Messages: 112, Bytes: 11200, Refused: 40, RefusedBy: [6]uint64{0, 40}},
		{Start: at, Protocol: "kafka", Tenant: "billing", Client: "billing-b", Messages: 90, Bytes: 9000},
		{Start: at, Protocol: "kafka", Tenant: "billing", Client: "billing-a", Messages: 22, Bytes: 2200, Refused: 40},
		{Start: at, Protocol: "nats", Tenant: "crowd", Messages: 2000, Bytes: 200000},
	}
	for i := clientRows + 4; i >= 5; i-- {
		want = append(want, Bucket{Start: at, Protocol: "nats", Tenant: "crowd", Client: fmt.Sprintf("c%02d", i), Messages: uint64(100 + i)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history:\n got %+v\nwant %+v", got, want)
	}
	if s := b.Summary("billing", time.UnixMilli(minute+2000)); s.Admitted != 112 {
		t.Errorf("the status summary counts client rows as the tenant's: admitted %d, want 112", s.Admitted)
	}
	var csv bytes.Buffer
	if err := WriteHistory(&csv, "csv", got[:3]); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(csv.String()), "\n"); len(lines) != 4 || !strings.HasSuffix(lines[2], ",kafka,billing,90,9000,0,0,0,billing-b") {
		t.Errorf("csv:\n%s", csv.String())
	}
}

// A worker whose clock is hours off cannot move or wipe the history: its reports are placed by
// the control plane's clock.
func TestHistoryIsPlacedByTheControlPlanesClock(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	now := time.UnixMilli(int64(1_795_000_020)*60000 + 30000)
	b.Ingest(Report{Replica: "ok", Worker: 1, Seq: 1, AtMs: now.UnixMilli(), Tenants: []TenantCount{count("nats", "acme", 10, 0, 1)}}, now)
	ahead := now.Add(2 * time.Hour).UnixMilli()
	b.Ingest(Report{Replica: "skewed", Worker: 1, Seq: 1, AtMs: ahead, Tenants: []TenantCount{count("nats", "globex", 20, 0, 1)}}, now)
	secs := b.History(now.Add(-time.Minute), true)
	if len(secs) != 2 || secs[0].Start.After(now) || secs[1].Start.After(now) {
		t.Errorf("per second: %+v: want both tenants, at the control plane's time", secs)
	}
}

// A decision carried by two reports (the first one's answer was lost) is recorded once.
func TestADecisionSentTwiceIsRecordedOnce(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	now := time.Now()
	d := Decision{WorkerSeq: 1, Tenant: "acme", Decision: "refused", Limit: "rate", AtMs: now.UnixMilli()}
	b.Ingest(Report{Replica: "a", Worker: 1, Seq: 1, AtMs: now.UnixMilli(), Decisions: []Decision{d}}, now)
	d2 := d
	d2.WorkerSeq = 2
	if added, _ := b.Ingest(Report{Replica: "a", Worker: 1, Seq: 2, AtMs: now.UnixMilli() + 1000, Decisions: []Decision{d, d2}}, now); len(added) != 1 || added[0].WorkerSeq != 2 {
		t.Errorf("added %+v: want only decision 2", added)
	}
	if all, _ := b.Decisions(Filter{}, -1); len(all) != 2 {
		t.Errorf("%d decisions, want 2", len(all))
	}
}

func TestHistoryKeepsABoundedWindow(t *testing.T) {
	b := New(1, 3, DefaultSeconds)
	base := int64(29_450_000) * 60000
	for i := int64(0); i < 10; i++ {
		at := base + i*60000 + 500
		b.Ingest(Report{Replica: "a", Worker: 1, Seq: uint64(i + 1), AtMs: at,
			Tenants: []TenantCount{count("nats", "acme", uint64(i+1)*10, 0, 1)}}, time.UnixMilli(at))
	}
	if got := b.History(time.UnixMilli(0), false); len(got) != 3 || got[0].Start != time.UnixMilli(base+7*60000).UTC() {
		t.Errorf("kept %+v: want the last 3 minutes", got)
	}
}

// The read side: what consumers received per second, against the consume limit, which is
// per replica whatever the tenant's scope.
func TestNowWeighsTheReadSide(t *testing.T) {
	b := New(10, DefaultMinutes, DefaultSeconds)
	now := time.Unix(1000, 0)
	for _, r := range []Report{
		{Replica: "a", Worker: 1, AtMs: 1000, Tenants: []TenantCount{{Protocol: "kafka", Tenant: "reader"}}},
		{Replica: "b", Worker: 1, AtMs: 1000, Tenants: []TenantCount{{Protocol: "kafka", Tenant: "reader"}}},
		{Replica: "a", Worker: 1, AtMs: 2000, Tenants: []TenantCount{{Protocol: "kafka", Tenant: "reader", Consumed: 3000, ConsumeThrottled: 4}}},
		{Replica: "b", Worker: 1, AtMs: 2000, Tenants: []TenantCount{{Protocol: "kafka", Tenant: "reader", Consumed: 1000}}},
	} {
		b.Ingest(r, now)
	}
	limits := func(_, _ string) (Limits, bool) {
		return Limits{ConsumeBytesPerSecond: u64(2500), Global: true}, true
	}
	got := b.Now(now, limits)
	if len(got) != 1 {
		t.Fatalf("tenants: %+v", got)
	}
	r := got[0]
	if r.ConsumedPerSecond != 4000 || r.ConsumeThrottledPerSecond != 4 || math.Abs(r.Load-0.8) > 1e-9 {
		t.Errorf("consumed %.0f/s, throttled %.0f/s, load %.2f; want 4000, 4, 0.80 (of 2500 × 2 replicas)",
			r.ConsumedPerSecond, r.ConsumeThrottledPerSecond, r.Load)
	}
}
