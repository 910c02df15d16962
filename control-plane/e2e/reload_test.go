package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const lateTenant = `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: late
spec:
  tenant: late
  identify:
    nats: { users: [anon] }
  limits:
    maxMessageBytes: 1KiB
    rate: { bytesPerSecond: 1MiB }
`

// A valid policy change is acknowledged by Envoy within 2 s and governs connections that were
// open before it, without closing them: the open connection is attributed to the new tenant
// and held to the new tenant's size limit. A change of tenants alone travels by the tenant
// feed: Envoy's filter configuration (ECDS) is not sent again.
func TestPolicyChangeGovernsOpenConnections(t *testing.T) {
	t.Cleanup(func() {
		// The next test reads the active version as its starting point: wait until the
		// control plane has noticed the removal (WaitInSync alone can return before it has).
		with := activeVersion(t)
		_, statErr := os.Stat(filepath.Join(policyDir, "late.yaml"))
		removePolicy(t, "late.yaml")
		if statErr == nil {
			eventually(t, 10*time.Second, "the policy version without late.yaml", func() bool { return activeVersion(t) != with })
		}
		if err := stack.WaitInSync(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	reconnects := 0
	before := gatewayNATS(t, "anon", "", nats.ReconnectHandler(func(*nats.Conn) { reconnects++ }))
	raw := dialRawNATS(t, `{"verbose":false,"user":"anon","pass":""}`)
	if err := before.Publish("reload.before", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := before.Flush(); err != nil {
		t.Fatal(err)
	}
	idleFeed(t)
	oldVersion := activeVersion(t)
	oldGeneration := metric(t, "weighstation_policy_generation", map[string]string{"protocol": "nats"})
	ecdsBefore := ecdsVersion(t, "weighstation.nats")

	start := time.Now()
	writePolicy(t, "late.yaml", lateTenant)
	eventually(t, 2*time.Second, "Envoy acknowledges the new version", func() bool {
		st, err := stack.ControlPlaneStatus()
		if err != nil || st.Active == nil || st.Active.Version == oldVersion {
			return false
		}
		for _, n := range st.Nodes {
			if n.Connected && n.AckedVersion != st.Active.Version {
				return false
			}
		}
		return true
	})
	eventually(t, 2*time.Second-time.Since(start), "the filter reports the new generation", func() bool {
		return metric(t, "weighstation_policy_generation", map[string]string{"protocol": "nats"}) > oldGeneration
	})
	t.Logf("policy change in force in the filter after %s", time.Since(start).Round(time.Millisecond))
	if after := ecdsVersion(t, "weighstation.nats"); after != ecdsBefore {
		t.Errorf("a change of tenants alone was sent as a new filter configuration: ECDS %s, then %s", ecdsBefore, after)
	}

	lateBefore := metric(t, "weighstation_messages_accepted", natsLabels("late"))
	for i := 0; i < 4; i++ {
		if err := before.Publish("reload.after", []byte("governed by the new policy")); err != nil {
			t.Fatal(err)
		}
	}
	if err := before.Flush(); err != nil {
		t.Fatalf("the connection opened before the change no longer works: %v", err)
	}
	eventually(t, 5*time.Second, "the open connection's messages count for the new tenant", func() bool {
		return metric(t, "weighstation_messages_accepted", natsLabels("late")) == lateBefore+4
	})
	if !before.IsConnected() || reconnects != 0 {
		t.Fatalf("the open connection was disturbed: connected=%v reconnects=%d", before.IsConnected(), reconnects)
	}
	// The open nats.go connection is told its new max_payload at the next server message.
	eventually(t, 5*time.Second, "nats.go learns the new max_payload", func() bool {
		_ = before.Flush()
		return before.MaxPayload() == 1024
	})

	// The raw connection, also opened before the change, is now held to late's 1 KiB limit.
	raw.send("PUB reload.big 2048\r\n" + strings.Repeat("x", 2048) + "\r\n")
	if got := raw.expect("-ERR"); got != "-ERR 'Maximum Payload Violation'" {
		t.Fatalf("got %q, want the Maximum Payload Violation error", got)
	}
	if !raw.closed(5 * time.Second) {
		t.Fatal("the connection stayed open after a payload violation")
	}
}

// idleFeed: while no policy changes, each filter worker's poll of the tenant feed is held at
// the control plane (20 s), so the workers poll a few times in 2 s at most, not over and over: a
// worker answered at once each time (told a replica count it does not take, say) burns Envoy's
// CPU.
func idleFeed(t *testing.T) {
	t.Helper()
	polls := func() float64 { return metricTotal(t, "weighstation_tenant_feed_polls_total", nil) }
	before := polls()
	time.Sleep(2 * time.Second)
	// Two workers, two protocols: one poll each if their held polls ended meanwhile; a worker
	// answered at once polls hundreds of times.
	if n := polls() - before; n > 10 {
		t.Errorf("the filter polled the tenant feed %.0f times in 2 s with no policy change: its workers are answered at once again and again", n)
	}
}

// An invalid change is refused whole: the last good version stays in force, /status names the
// file and line, and /readyz stays ready. Fixing the file recovers.
func TestInvalidPolicyKeepsTheLastGoodVersion(t *testing.T) {
	t.Cleanup(func() { removePolicy(t, "broken.yaml") })
	good := activeVersion(t)
	generation := metric(t, "weighstation_policy_generation", map[string]string{"protocol": "nats"})
	writePolicy(t, "broken.yaml", `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: broken
spec:
  tenant: broken
  identify:
    nats: { users: [broken] }
  limits:
    maxMessageBytes: 12 parsecs
`)
	var st struct {
		file string
		line int
		errs []string
	}
	eventually(t, 5*time.Second, "/status reports the refused change", func() bool {
		s, err := stack.ControlPlaneStatus()
		if err != nil || s.LastError == nil {
			return false
		}
		st.file, st.line, st.errs = s.LastError.File, s.LastError.Line, s.LastError.Errors
		return true
	})
	if !strings.HasSuffix(st.file, "broken.yaml") || st.line != 10 {
		t.Errorf("lastError at %s:%d, want broken.yaml:10", st.file, st.line)
	}
	if len(st.errs) != 1 || !strings.Contains(st.errs[0], "broken.yaml:10:22: spec.limits.maxMessageBytes:") {
		t.Errorf("errors = %q", st.errs)
	}
	if v := activeVersion(t); v != good {
		t.Errorf("active version changed from %s to %s on an invalid change", good, v)
	}
	resp, err := http.Get("http://" + addr(ports.ControlPlane) + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d after an invalid change, want 200", resp.StatusCode)
	}
	// Envoy still holds the good version (nothing else was pushed) and so does the filter.
	if err := stack.WaitInSync(5 * time.Second); err != nil {
		t.Fatalf("after an invalid change: %v", err)
	}
	if g := metric(t, "weighstation_policy_generation", map[string]string{"protocol": "nats"}); g != generation {
		t.Fatalf("the filter's policy generation moved from %v to %v on an invalid change", generation, g)
	}
	// Traffic is still governed by the good version: size-enforce's 1 KiB limit still bites (with
	// no policy in force, its user would be the default tenant's, allowed 64 KiB).
	raw := dialRawNATS(t, `{"verbose":false,"user":"size-enforce","pass":"size-enforce-secret"}`)
	raw.send("PUB invalid.still.governed 2048\r\n" + strings.Repeat("x", 2048) + "\r\n")
	if got := raw.expect("-ERR"); got != "-ERR 'Maximum Payload Violation'" {
		t.Fatalf("a 2 KiB message of size-enforce after the invalid change: %q, want the good version's size refusal", got)
	}

	removePolicy(t, "broken.yaml")
	eventually(t, 5*time.Second, "the error clears once the file is fixed", func() bool {
		s, err := stack.ControlPlaneStatus()
		return err == nil && s.LastError == nil
	})
}

// A reload that does not change a tenant's rate keeps its bucket: an exhausted tenant is not
// refilled by someone else's policy change. slow-rate refills one message a second and holds a
// burst of 20, so a reset bucket lets 20 through where a kept one lets through one a second.
func TestReloadKeepsUnchangedBuckets(t *testing.T) {
	t.Cleanup(func() {
		removePolicy(t, "unrelated.yaml")
		if err := stack.WaitInSync(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	const burst = 20
	sink := &errorSink{}
	nc := tenantNATS(t, "slow-rate", sink)
	subject := uniqueSubject("keep")
	publishBurst(t, nc, subject, 2*burst, "drain") // empties the bucket
	drained := time.Now()                          // every drain message has been decided
	old := activeVersion(t)
	writePolicy(t, "unrelated.yaml", strings.NewReplacer("late", "unrelated", "[anon]", "[unrelated]").Replace(lateTenant))
	eventually(t, 2*time.Second, "the unrelated change is in force", func() bool {
		return activeVersion(t) != old && stack.WaitInSync(10*time.Millisecond) == nil
	})
	refusedBefore := sink.count("rate limit of tenant slow-rate")
	c := collect(t, subject)
	publishBurst(t, nc, subject, 2*burst, "after")
	// What a kept bucket can have refilled by the time the last message was decided: one a
	// second since it was emptied, and one more for a token that was nearly whole.
	refill := int(time.Since(drained).Seconds()) + 1
	d, _ := requireConservation(t, "after reload", 2*burst, c, func() int {
		return sink.count("rate limit of tenant slow-rate") - refusedBefore
	})
	t.Logf("after an unrelated reload, %d of %d got through; a kept bucket allows %d, a reset one %d", d, 2*burst, refill, burst)
	if refill >= burst {
		t.Fatalf("the reload took %s: too long to tell a kept bucket from a reset one", time.Since(drained))
	}
	if d > refill {
		t.Fatalf("%d of %d got through right after the reload, more than the %d the refill allows: the bucket was reset", d, 2*burst, refill)
	}
}

// A reload that leaves a tenant's inFlight unchanged keeps the count of its requests awaiting a
// reply: five requests held by a responder still fill a limit of five after someone else's
// policy changes, and their replies free the slots.
func TestReloadKeepsInFlightCounts(t *testing.T) {
	t.Cleanup(func() {
		removePolicy(t, "keep-inflight.yaml")
		if err := stack.WaitInSync(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	subject := uniqueSubject("svc.held")
	requests := make(chan *nats.Msg, 10)
	responder := directNATS(t)
	if _, err := responder.ChanSubscribe(subject, requests); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := tenantNATS(t, "inflight-reject", &errorSink{})
	answers := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func() {
			_, err := nc.Request(subject, []byte("held"), 15*time.Second)
			answers <- err
		}()
	}
	var held []*nats.Msg
	for len(held) < 5 {
		select {
		case m := <-requests:
			held = append(held, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 5 requests reached the responder", len(held))
		}
	}

	old := activeVersion(t)
	writePolicy(t, "keep-inflight.yaml", strings.NewReplacer("late", "keep-inflight", "[anon]", "[keep-inflight]").Replace(lateTenant))
	eventually(t, 2*time.Second, "the unrelated change is in force", func() bool {
		return activeVersion(t) != old && stack.WaitInSync(10*time.Millisecond) == nil
	})

	if _, err := nc.Request(subject, []byte("sixth"), 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a sixth request after the reload: %v; want %v (the five in flight still count)", err, nats.ErrNoResponders)
	}
	for _, m := range held {
		if err := m.Respond([]byte("done")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		if err := <-answers; err != nil {
			t.Fatalf("a held request: %v", err)
		}
	}
	go func() {
		for m := range requests {
			_ = m.Respond([]byte("done"))
		}
	}()
	eventually(t, 2*time.Second, "the replies free the slots", func() bool {
		_, err := nc.Request(subject, []byte("again"), 2*time.Second)
		return err == nil
	})
}

// A reload that changes a tenant's rate governs its open connections within 2 s.
func TestReloadAppliesANewRateToOpenConnections(t *testing.T) {
	policy := func(perSecond, burst int) string {
		return fmt.Sprintf(`apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: reload-rate
spec:
  tenant: reload-rate
  identify:
    nats: { users: [reload-rate] }
  onLimit: reject
  limits:
    rate: { messagesPerSecond: %d, burstMessages: %d }
`, perSecond, burst)
	}
	t.Cleanup(func() {
		removePolicy(t, "reload-rate.yaml")
		if err := stack.WaitInSync(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	old := activeVersion(t)
	writePolicy(t, "reload-rate.yaml", policy(1000, 1000))
	eventually(t, 5*time.Second, "the tenant is in force", func() bool {
		return activeVersion(t) != old && stack.WaitInSync(10*time.Millisecond) == nil
	})
	sink := &errorSink{}
	nc := tenantNATS(t, "reload-rate", sink)
	refused := func() int { return sink.count("rate limit of tenant reload-rate") }

	subject := uniqueSubject("reloadrate")
	c := collect(t, subject)
	publishBurst(t, nc, subject, 50, "before")
	requireConservation(t, "at 1000/s", 50, c, refused)
	if refused() != 0 {
		t.Fatalf("%d of 50 refused under a 1000/s limit", refused())
	}

	old = activeVersion(t)
	start := time.Now()
	writePolicy(t, "reload-rate.yaml", policy(1, 5))
	took := eventually(t, 2*time.Second, "the new rate is in force", func() bool {
		return activeVersion(t) != old && stack.WaitInSync(10*time.Millisecond) == nil
	})
	subject = uniqueSubject("reloadrate")
	c = collect(t, subject)
	publishBurst(t, nc, subject, 50, "after")
	d, r := requireConservation(t, "at 1/s", 50, c, refused)
	t.Logf("the new rate was in force on the open connection %s after the file was written; of 50 sent then, %d delivered, %d refused",
		took.Round(time.Millisecond), d, r)
	if d > 5+int(time.Since(start).Seconds())+1 {
		t.Fatalf("%d of 50 delivered on the open connection: the 1/s limit (burst 5) is not in force", d)
	}
}
