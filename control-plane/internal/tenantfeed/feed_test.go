package tenantfeed

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

func tenants(rates map[string]uint64) map[compile.Protocol]map[string]json.RawMessage {
	ts := map[string]json.RawMessage{}
	for name, rate := range rates {
		ts[name], _ = json.Marshal(compile.Tenant{Name: name, Limits: compile.Limits{MessagesPerSecond: &rate}})
	}
	return map[compile.Protocol]map[string]json.RawMessage{compile.NATS: ts}
}

func names(d *Delta) []string {
	var out []string
	for _, raw := range d.Tenants {
		var t compile.Tenant
		_ = json.Unmarshal(raw, &t)
		out = append(out, t.Name)
	}
	return out
}

// now answers at once what Wait would (the worker is behind, or it is not).
func now(f *Feed, applied string, replicas int) *Delta {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d, _ := f.Wait(ctx, compile.NATS, applied, replicas)
	return d
}

// A worker is sent the tenants changed, added and removed since the version it names, in one
// delta however many versions it is behind; one on the current version waits.
func TestADeltaIsWhatChangedSinceTheWorkersVersion(t *testing.T) {
	f := New()
	f.SetReplicas(2)
	must := func(version string, rates map[string]uint64) {
		f.Publish(version, tenants(rates))
	}
	must("1-a", map[string]uint64{"acme": 1, "globex": 2, "initech": 3})
	must("2-b", map[string]uint64{"acme": 10, "globex": 2, "initech": 3})
	must("3-c", map[string]uint64{"acme": 10, "globex": 2, "umbrella": 4})
	cases := []struct {
		applied          string
		tenants, removed string
		full             bool
	}{
		{applied: "1-a", tenants: "acme,umbrella", removed: "initech"},
		{applied: "2-b", tenants: "umbrella", removed: "initech"},
		{applied: "9-a", tenants: "acme,umbrella", removed: "initech"}, // another replica's counter, same content
		{applied: "1-zzz", tenants: "acme,globex,umbrella", full: true},
	}
	for _, c := range cases {
		f.mu.Lock()
		d, _ := f.delta(compile.NATS, c.applied, 2)
		f.mu.Unlock()
		if d == nil || strings.Join(names(d), ",") != c.tenants || strings.Join(d.Removed, ",") != c.removed ||
			d.Full != c.full || d.Version != "3-c" || d.Replicas != 2 {
			t.Errorf("from %s: %+v (tenants %v)", c.applied, d, names(d))
		}
	}
	if d := now(f, "7-c", 2); d != nil {
		t.Errorf("a worker on the current content was sent %+v", d)
	}
	f.mu.Lock()
	d, _ := f.delta(compile.NATS, "3-c", 3)
	f.mu.Unlock()
	if d == nil || len(d.Tenants) != 0 || d.Replicas != 2 {
		t.Errorf("a worker dividing by 3 of 2 replicas was sent %+v", d)
	}
}

// A waiting poll is answered as soon as something changes: a policy or the replica count.
func TestAPollIsAnsweredWhenSomethingChanges(t *testing.T) {
	f, polls, srv := servedFeed()
	defer srv.Close()
	poll := func() chan *http.Response {
		out := make(chan *http.Response, 1)
		go func() {
			resp, err := http.Get(srv.URL + Path + "?protocol=nats&applied=1-a&replicas=1&node=n&worker=1")
			if err != nil {
				t.Error(err)
			}
			out <- resp
		}()
		return out
	}
	for name, change := range map[string]func(){
		"policy":   func() { f.Publish("2-b", tenants(map[string]uint64{"acme": 2})) },
		"replicas": func() { f.SetReplicas(3) },
	} {
		answer := poll()
		time.Sleep(100 * time.Millisecond)
		select {
		case <-answer:
			t.Fatalf("%s: answered before any change", name)
		default:
		}
		change()
		select {
		case resp := <-answer:
			if resp == nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %v", name, resp)
			}
			_ = resp.Body.Close()
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer 5 s after the change", name)
		}
		if begun, ended := polls.counts(); begun != ended {
			t.Errorf("%s: %d polls begun, %d told ended after their answers", name, begun, ended)
		}
		f.Publish("1-a", tenants(map[string]uint64{"acme": 1}))
		f.SetReplicas(1)
	}
}

// A poll the worker hangs up on is ended as abandoned (its worker is gone); one answered is
// not.
func TestAPollHungUpOnIsAbandoned(t *testing.T) {
	f, polls, srv := servedFeed()
	defer srv.Close()
	ctx, hangUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+Path+"?protocol=nats&applied=1-a&replicas=1&node=n&worker=1", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	hangUp()
	<-done
	go func() {
		if resp, err := http.Get(srv.URL + Path + "?protocol=nats&applied=1-a&replicas=1&node=n&worker=2"); err == nil {
			_ = resp.Body.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	f.Publish("2-b", tenants(map[string]uint64{"acme": 2}))
	deadline := time.Now().Add(5 * time.Second)
	for polls.endedCount() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	polls.mu.Lock()
	defer polls.mu.Unlock()
	if got := polls.abandoned; len(got) != 1 || got[0] != "1" {
		t.Errorf("abandoned polls of workers %v, want only worker 1's (it hung up; worker 2 was answered)", got)
	}
}

// A worker on the current version told another replica count is told this replica's only after
// replicasGrace: two control plane replicas that count the gateway apart would otherwise have a
// worker polling them in turn answered at once, over and over. A policy change is not held.
func TestAReplicaCountAloneIsToldAfterAGrace(t *testing.T) {
	f := New()
	f.Publish("1-a", tenants(map[string]uint64{"acme": 1}))
	f.SetReplicas(2)
	asked := time.Now()
	d, ok := f.Wait(context.Background(), compile.NATS, "1-a", 1)
	if waited := time.Since(asked); !ok || d.Replicas != 2 || waited < replicasGrace {
		t.Errorf("told %+v after %s, want 2 replicas after %s", d, waited, replicasGrace)
	}
	f.Publish("2-b", tenants(map[string]uint64{"acme": 2}))
	ctx, cancel := context.WithTimeout(context.Background(), replicasGrace/2)
	defer cancel()
	if d, ok := f.Wait(ctx, compile.NATS, "1-a", 1); !ok || d.Version != "2-b" {
		t.Errorf("a policy change with another replica count was held: %+v", d)
	}
}

// While the replica count is not known (0: counted elsewhere, not yet), a worker on the current
// version is current whatever count it names.
func TestAnUnknownReplicaCountLeavesTheWorkersOwn(t *testing.T) {
	f := New()
	f.Publish("1-a", tenants(map[string]uint64{"acme": 1}))
	if d := now(f, "1-a", 3); d != nil {
		t.Errorf("told %+v while the count is unknown", d)
	}
}

// Many removals are forgotten past tombstonesKept: a worker from before them is sent every
// tenant, one from after them a delta.
func TestForgottenRemovalsMakeAFullDelta(t *testing.T) {
	f := New()
	all := map[string]uint64{"keep": 1}
	for i := range tombstonesKept + 1 {
		all["t"+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = 1
	}
	f.Publish("1-a", tenants(all))
	f.Publish("2-b", tenants(map[string]uint64{"keep": 1}))
	f.Publish("3-c", tenants(map[string]uint64{"keep": 2}))
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, _ := f.delta(compile.NATS, "1-a", 0); d == nil || !d.Full || len(d.Tenants) != 1 {
		t.Errorf("from before the forgotten removals: %+v", d)
	}
	if d, _ := f.delta(compile.NATS, "2-b", 0); d == nil || d.Full || len(d.Tenants) != 1 {
		t.Errorf("from after them: %+v", d)
	}
}

// pollRecorder counts the polls a Handler told begun, and those told ended with the same
// beginning (as the tracker matches them).
type pollRecorder struct {
	mu            sync.Mutex
	begun         map[time.Time]bool
	begins, ended int
	abandoned     []string
}

// servedFeed is a feed at version 1-a dividing by 1, served with its polls recorded.
func servedFeed() (*Feed, *pollRecorder, *httptest.Server) {
	f := New()
	f.SetReplicas(1)
	f.Publish("1-a", tenants(map[string]uint64{"acme": 1}))
	polls := &pollRecorder{}
	return f, polls, httptest.NewServer(Handler(context.Background(), f, polls))
}

func (r *pollRecorder) Polled(p Poll) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun == nil {
		r.begun = map[time.Time]bool{}
	}
	r.begun[p.At] = true
	r.begins++
}

func (r *pollRecorder) PollEnded(p Poll) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun[p.At] {
		r.ended++
	}
	if p.Abandoned {
		r.abandoned = append(r.abandoned, p.Worker)
	}
}

func (r *pollRecorder) endedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

func (r *pollRecorder) counts() (begun, ended int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.begins, r.ended
}
