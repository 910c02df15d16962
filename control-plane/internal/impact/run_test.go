package impact

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

func TestReadUsageRefusesWhatItCannotReplay(t *testing.T) {
	cases := []struct {
		name, csv, err string
	}{
		{"no header", "x,y\n", "want the header"},
		{"per minute", "start,protocol,tenant,messages,bytes,refused,delayed\n2026-11-25T15:52:00Z,nats,a,1,1,0,0\n2026-11-25T15:53:00Z,nats,a,1,1,0,0\n", "--resolution 1s"},
		{"bad count", "start,protocol,tenant,messages,bytes,refused,delayed\n2026-11-25T15:52:00Z,nats,a,x,1,0,0\n", "line 2"},
		{"short row", "start,protocol,tenant,messages,bytes,refused,delayed,consumed\n2026-11-25T15:52:00Z,nats,a,1,1,0,0\n", "line 2"},
		{"bad time", "start,protocol,tenant,messages,bytes,refused,delayed\nyesterday,nats,a,1,1,0,0\n", "line 2"},
	}
	for _, c := range cases {
		if _, err := ReadUsage(strings.NewReader(c.csv)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
		}
	}
	d, err := ReadUsage(strings.NewReader("start,protocol,tenant,messages,bytes,refused,delayed\n" +
		"2026-11-25T15:52:01Z,nats,a,90,9000,10,0\n2026-11-25T15:52:00Z,nats,a,5,500,0,0\n"))
	if err != nil || len(d) != 1 || len(d[0].Seconds) != 2 || d[0].Seconds[0].Messages != 5 || d[0].Seconds[1].Messages != 100 || d[0].Seconds[1].Bytes != 10000 {
		t.Errorf("demand %+v (%v): want seconds in order, refused counted as offered at the accepted size", d, err)
	}
}

func writePolicies(t *testing.T, docs string) *policy.Set {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

const proposed = `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: { name: defaults }
spec: { defaultTenant: anon, quotaService: { address: "127.0.0.1:1" } }
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: anon }
spec:
  tenant: anon
  onLimit: reject
  limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: acme-policy }
spec:
  tenant: acme
  identify: { nats: { users: [acme] } }
  onLimit: reject
  limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: big }
spec:
  tenant: big
  identify: { nats: { users: [big] } }
  scope: global
  onLimit: reject
  limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }
`

func second(ms int64, n uint64) []Second { return []Second{{StartMs: ms, Messages: n, Bytes: n * 10}} }

// perGateway limits hold per replica, global ones for the gateway; a tenant without a policy is
// the default tenant's traffic.
func TestAnalyzeAppliesTheProposalAsTheGatewayWould(t *testing.T) {
	sim := module(t)
	set := writePolicies(t, proposed)
	demands := []Demand{
		{Protocol: "nats", Tenant: "acme", Seconds: second(1_000_000, 500)},
		{Protocol: "nats", Tenant: "big", Seconds: second(1_000_000, 500)},
		{Protocol: "nats", Tenant: "gone", Seconds: second(1_000_000, 150)},
	}
	got, err := Analyze(context.Background(), sim, set, demands, 2)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]TenantImpact{}
	for _, g := range got {
		by[g.Tenant] = g
	}
	// In a second at 100/s with a burst of 100, a bucket admits about 200.
	if a := by["acme"]; a.Totals.Admitted < 395 || a.Totals.Admitted > 401 || a.Totals.Admitted+a.Totals.RefusedRate != 500 || a.Policy != "acme-policy" {
		t.Errorf("acme, perGateway on 2 replicas: %+v, want about 400 admitted (each replica's 200)", a.Totals)
	}
	if b := by["big"]; b.Totals.Admitted < 195 || b.Totals.Admitted > 201 {
		t.Errorf("big, global: %+v, want about 200 admitted (the gateway's)", b.Totals)
	}
	if a := by["anon"]; a.Totals.Offered != 150 || !strings.Contains(a.Note, "gone") {
		t.Errorf("anon: %+v %q, want gone's 150 messages", a.Totals, a.Note)
	}
	if s, a := by["acme"].RefusedShare(), by["acme"].Totals; s != float64(a.RefusedRate)/500 {
		t.Errorf("acme refused share %v of %+v", s, a)
	}
}

// The read side: a tenant whose consumers received 3 MB in a second under a proposed
// consume limit of 1 MB/s per replica (one replica) would have been left behind by the debt;
// the same demand on two replicas (2 MB/s) less. The export's consumed column feeds it.
func TestAnalyzeReportsTheReadLagOfAProposedConsumeLimit(t *testing.T) {
	sim := module(t)
	set := writePolicies(t, strings.Replace(proposed,
		"  limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }\n---\napiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: big }",
		"  limits: { rate: { messagesPerSecond: 100, burstMessages: 100 }, consume: { bytesPerSecond: 1000000 } }\n---\napiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: big }", 1))
	d, err := ReadUsage(strings.NewReader("start,protocol,tenant,messages,bytes,refused,delayed,consumed\n" +
		"2026-11-25T15:52:00Z,nats,acme,1,10,0,0,3000000\n2026-11-25T15:52:01Z,nats,acme,1,10,0,0,0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		replicas int
		lagMs    uint64
	}{{1, 1500}, {2, 0}} {
		got, err := Analyze(context.Background(), sim, set, d, c.replicas)
		if err != nil || len(got) != 1 {
			t.Fatalf("%v %+v", err, got)
		}
		// 3 MB in the first second's middle against 1 MB/s with a 1 MB bucket: 1.5 s behind
		// at its end; on two replicas the bucket (2 MB) and the second (2 MB/s) cover it.
		if a := got[0].Totals; a.ReadLagMs != c.lagMs || a.Consumed != 3_000_000 {
			t.Errorf("%d replicas: %+v, want a read lag of %d ms for 3000000 bytes consumed", c.replicas, a, c.lagMs)
		}
	}
}

// Client limits are replayed from the export's client rows: a named entry is one bucket for
// every client it names, a client under the default has a bucket of its own, and the rest of
// the tenant's traffic passes the tenant's bucket alone.
func TestAnalyzeReplaysClientLimits(t *testing.T) {
	sim := module(t)
	set := writePolicies(t, proposed+`---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: team }
spec:
  tenant: team
  identify: { nats: { users: [team] } }
  onLimit: reject
  limits: { rate: { messagesPerSecond: 1000 } }
  clients:
    default: { rate: { messagesPerSecond: 20 } }
    named:
      - match: { nats: ["batch-*"] }
        limits: { rate: { messagesPerSecond: 50 } }
`)
	d, err := ReadUsage(strings.NewReader("start,protocol,tenant,messages,bytes,refused,delayed,consumed,client\n" +
		"2026-11-25T15:52:00Z,nats,team,300,3000,0,0,0,\n" +
		"2026-11-25T15:52:00Z,nats,team,100,1000,0,0,0,batch-1\n" +
		"2026-11-25T15:52:00Z,nats,team,100,1000,0,0,0,batch-2\n" +
		"2026-11-25T15:52:00Z,nats,team,60,600,0,0,0,svc-x\n" +
		"2026-11-25T15:52:00Z,nats,team,10,100,0,0,0,svc-y\n" +
		"2026-11-25T15:52:01Z,nats,team,1,10,0,0,0,\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || len(d[0].Clients) != 4 || len(d[0].Seconds) != 2 {
		t.Fatalf("demand %+v: want team's two seconds and four clients", d)
	}
	got, err := Analyze(context.Background(), sim, set, d, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
	// batch-1 and batch-2 share one 50/s bucket (a second's burst): ~100 of their 200 in the
	// first second; svc-x its own 20/s: ~40 of 60; svc-y's 10 and the other 30 pass.
	o := got[0].Outcomes[0]
	if o.RefusedRate != 0 || o.RefusedClient < 115 || o.RefusedClient > 125 || o.Admitted+o.RefusedClient != 300 {
		t.Errorf("first second %+v: want about 120 refused by client buckets, none by the tenant's", o)
	}
}
