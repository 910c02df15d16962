package refusals

import (
	"sync"
	"testing"
)

// Every way the gateway words a refusal (contract §4) is read back as tenant, client, limit and
// value; a refusal that names no limit is still counted.
func TestParseReadsWhatTheRefusalNames(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Reason
	}{
		{`nats: permissions violation: Permissions Violation for Publish to "weighstation.bench.x" (rate limit of tenant anonymous: 100 messages/s)`,
			Reason{Tenant: "anonymous", Limit: "rate", Value: "100 messages/s"}},
		{`Permissions Violation for Publish to "a" (rate limit of client billing-a of tenant billing: 100 messages/s and 1048576 bytes/s)`,
			Reason{Tenant: "billing", Client: "billing-a", Limit: "rate", Value: "100 messages/s and 1048576 bytes/s"}},
		{`Permissions Violation for Publish to "a" (inFlight limit of tenant acme: 200 requests awaiting a reply)`,
			Reason{Tenant: "acme", Limit: "inFlight", Value: "200 requests awaiting a reply"}},
		{`Permissions Violation for Publish to "a" (queue limit of tenant acme: not admitted within maxWait 250ms (1000 held))`,
			Reason{Tenant: "acme", Limit: "queue", Value: "not admitted within maxWait 250ms (1000 held)"}},
		{`maximum connections exceeded (connections limit of tenant acme: 50)`,
			Reason{Tenant: "acme", Limit: "connections", Value: "50"}},
		{`Permissions Violation for Publish to "secret.x"`, Reason{Limit: "permission"}},
		{`something else`, Reason{Limit: "unnamed"}},
	} {
		got := Parse(tc.text)
		got.Sample = ""
		if got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

func TestTallyCountsByReasonMostFrequentFirst(t *testing.T) {
	var tally Tally
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0, 1:
				tally.Text(`Permissions Violation for Publish to "x" (rate limit of tenant anonymous: 100 messages/s)`)
			default:
				tally.Code("THROTTLING_QUOTA_EXCEEDED")
			}
		}()
	}
	wg.Wait()
	got := tally.Reasons()
	if len(got) != 2 || got[0].Count != 200 || got[0].Tenant != "anonymous" || got[1].Count != 100 || got[1].Limit != "THROTTLING_QUOTA_EXCEEDED" {
		t.Fatalf("reasons %+v", got)
	}
}

// More than 1% refused is limited by policy; 1% or less is not.
func TestJudgeDrawsTheLineAtOnePercent(t *testing.T) {
	if Judge(1000, 10, nil) != nil {
		t.Error("1% refused judged limited")
	}
	l := Judge(20000, 19898, []Reason{{Tenant: "anonymous", Limit: "rate", Value: "100 messages/s"}})
	if l == nil {
		t.Fatal("99.5% refused not judged limited")
	}
	want := "LIMITED BY POLICY: gateway refused 99.5% of what it was sent (rate limit of tenant anonymous: 100 messages/s)"
	if got := l.Headline("gateway"); got != want {
		t.Errorf("headline %q, want %q", got, want)
	}
	if Judge(0, 0, nil) != nil {
		t.Error("nothing sent judged limited")
	}
}
