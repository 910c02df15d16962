package e2e

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// errorSink collects the asynchronous errors nats.go reports (refusals are non-fatal -ERRs).
type errorSink struct {
	mu   sync.Mutex
	errs []string
}

func (s *errorSink) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err.Error())
	s.mu.Unlock()
}

// count returns how many errors contain every one of the fragments.
func (s *errorSink) count(fragments ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.errs {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(e, f)
		}
		if all {
			n++
		}
	}
	return n
}

func (s *errorSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs)
}

// tenantNATS connects through the gateway as a test tenant's user.
func tenantNATS(t *testing.T, tenant string, sink *errorSink) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.FlusherTimeout(30 * time.Second)}
	if sink != nil {
		opts = append(opts, nats.ErrorHandler(sink.handler))
	}
	return gatewayNATS(t, tenant, tenant+"-secret", opts...)
}

// collector counts distinct messages a direct subscriber receives on a subject.
type collector struct {
	mu       sync.Mutex
	seen     map[string]int
	arrivals []time.Time // of each distinct message
	first    time.Time
	last     time.Time
}

func collect(t *testing.T, subject string) *collector {
	t.Helper()
	c := &collector{seen: map[string]int{}}
	nc := directNATS(t, "acme", "acme-secret")
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		c.mu.Lock()
		now := time.Now()
		if len(c.seen) == 0 {
			c.first = now
		}
		c.last = now
		if c.seen[string(m.Data)] == 0 {
			c.arrivals = append(c.arrivals, now)
		}
		c.seen[string(m.Data)]++
		c.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *collector) delivered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// deliveredBetween counts the distinct messages that arrived in [from, to).
func (c *collector) deliveredBetween(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.arrivals {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (c *collector) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := 0
	for _, n := range c.seen {
		d += n - 1
	}
	return d
}

func uniqueSubject(prefix string) string {
	return fmt.Sprintf("%s.%d", prefix, time.Now().UnixNano())
}

// publishBurst sends n distinct messages as fast as the client allows, then flushes.
func publishBurst(t *testing.T, nc *nats.Conn, subject string, n int, tag string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := nc.Publish(subject, []byte(tag+"-"+strconv.Itoa(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := nc.FlushTimeout(30 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// requireConservation: every message sent was either delivered once or refused and reported.
func requireConservation(t *testing.T, what string, sent int, c *collector, refused func() int) (int, int) {
	t.Helper()
	return requireConservationWithin(t, what, sent, c, refused, 10*time.Second)
}

// requireConservationWithin waits up to wait for the last messages (a delayed backlog drains
// at the tenant's rate).
func requireConservationWithin(t *testing.T, what string, sent int, c *collector, refused func() int, wait time.Duration) (int, int) {
	t.Helper()
	var d, r int
	ok := func() bool {
		d, r = c.delivered(), refused()
		return d+r == sent
	}
	deadline := time.Now().Add(wait)
	for !ok() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if d+r != sent || c.duplicates() != 0 {
		t.Fatalf("%s: sent %d, delivered %d, refused and reported %d, duplicates %d", what, sent, d, r, c.duplicates())
	}
	t.Logf("%s: sent %d = delivered %d + refused %d", what, sent, d, r)
	return d, r
}

func TestNATSMaxPayloadIsAdvertisedAndEnforced(t *testing.T) {
	nc := tenantNATS(t, "size-enforce", nil)
	eventually(t, 5*time.Second, "nats.go sees the tenant's max_payload", func() bool { return nc.MaxPayload() == 1024 })
	if err := nc.Publish("size.x", make([]byte, 2048)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("nats.go publish of 2 KiB: %v, want %v", err, nats.ErrMaxPayload)
	}
	if !nc.IsConnected() {
		t.Fatal("a locally refused publish closed the connection")
	}

	c := collect(t, "size.raw")
	before := metric(t, "weighstation_messages_refused", map[string]string{"protocol": "nats", "tenant": "size-enforce", "reason": "size"})
	raw := dialRawNATS(t, `{"verbose":false,"user":"size-enforce","pass":"size-enforce-secret"}`)
	raw.send("PUB size.raw 2\r\nok\r\nPUB size.raw 2048\r\n" + strings.Repeat("x", 2048) + "\r\n")
	if got := raw.expect("-ERR"); got != "-ERR 'Maximum Payload Violation'" {
		t.Fatalf("got %q", got)
	}
	if !raw.closed(5 * time.Second) {
		t.Fatal("the connection stayed open after a payload violation")
	}
	time.Sleep(200 * time.Millisecond)
	if c.delivered() != 1 {
		t.Fatalf("the direct subscriber got %d messages, want only the small one", c.delivered())
	}
	eventually(t, 5*time.Second, "the size refusal is counted", func() bool {
		return metric(t, "weighstation_messages_refused", map[string]string{"protocol": "nats", "tenant": "size-enforce", "reason": "size"}) == before+1
	})
}

func TestNATSSizeDryRunForwardsAndCounts(t *testing.T) {
	nc := tenantNATS(t, "size-dry", nil)
	if nc.MaxPayload() == 1024 {
		t.Fatal("dryRun advertised its limit, so nats.go would refuse")
	}
	c := collect(t, "sizedry.x")
	labels := map[string]string{"protocol": "nats", "tenant": "size-dry", "reason": "size"}
	before := metric(t, "weighstation_dryrun_would_refuse", labels)
	if err := nc.Publish("sizedry.x", make([]byte, 2048)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the oversized message is delivered and counted as would-refuse", func() bool {
		return c.delivered() == 1 && metric(t, "weighstation_dryrun_would_refuse", labels) == before+1
	})
}

func TestNATSRateRejectRefusesTheExcessAndReportsEveryRefusal(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-reject", sink)
	subject := uniqueSubject("ratereject")
	c := collect(t, subject)
	const sent = 300
	publishBurst(t, nc, subject, sent, "m")
	d, r := requireConservation(t, "rate reject", sent, c, func() int {
		return sink.count("Permissions Violation for Publish to", "rate limit of tenant rate-reject: 200 messages/s")
	})
	if r == 0 || d < 10 {
		t.Fatalf("delivered %d, refused %d: want the burst through and the excess refused", d, r)
	}
	if !nc.IsConnected() {
		t.Fatal("refusals closed the connection; they must be non-fatal")
	}
}

func TestNATSRateDelayHoldsThePublisherAndLosesNothing(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-delay", sink)
	subject := uniqueSubject("ratedelay")
	c := collect(t, subject)
	labels := map[string]string{"protocol": "nats", "tenant": "rate-delay"}
	delayedBefore := metric(t, "weighstation_messages_delayed", labels)
	const sent = 400
	start := time.Now()
	publishBurst(t, nc, subject, sent, "m")
	requireConservation(t, "rate delay", sent, c, func() int { return 0 })
	elapsed := time.Since(start)
	rate := float64(sent-10) / c.last.Sub(c.first).Seconds()
	t.Logf("400 messages at a 200/s limit took %s; delivered rate %.0f msg/s", elapsed.Round(time.Millisecond), rate)
	if elapsed < 1500*time.Millisecond {
		t.Fatalf("the publisher was not slowed: %s for %d messages at 200/s", elapsed, sent)
	}
	if sink.total() != 0 {
		t.Fatalf("delay mode reported errors: %v", sink.errs)
	}
	if metric(t, "weighstation_messages_delayed", labels) <= delayedBefore {
		t.Fatal("no delayed messages were counted")
	}
}

func TestNATSQueueBoundsHeldMessages(t *testing.T) {
	sink := &errorSink{}
	subject := uniqueSubject("queue")
	c := collect(t, subject)
	const perConn, conns = 50, 3
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		nc := tenantNATS(t, "queue-tight", sink)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			publishBurst(t, nc, subject, perConn, "c"+strconv.Itoa(i))
		}(i)
	}
	wg.Wait()
	_, r := requireConservation(t, "queue", perConn*conns, c, func() int {
		return sink.count("Permissions Violation", "queue limit of tenant queue-tight")
	})
	if r == 0 {
		t.Fatal("nothing was refused by the queue's bounds")
	}
}

func TestNATSRateDryRunForwardsEverything(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-dry", sink)
	subject := uniqueSubject("ratedry")
	c := collect(t, subject)
	labels := map[string]string{"protocol": "nats", "tenant": "rate-dry", "reason": "rate"}
	before := metric(t, "weighstation_dryrun_would_refuse", labels)
	publishBurst(t, nc, subject, 300, "m")
	requireConservation(t, "rate dryRun", 300, c, func() int { return 0 })
	if got := metric(t, "weighstation_dryrun_would_refuse", labels) - before; got < 100 {
		t.Fatalf("would-refuse counted %v for 300 messages at a 100/s limit", got)
	}
	if sink.total() != 0 {
		t.Fatalf("dryRun reported errors: %v", sink.errs)
	}
}

// slowResponder answers on subject after 50 ms, concurrently, and records the most requests
// in progress at once. It is connected straight to nats-server.
func slowResponder(t *testing.T, subject string) *int64 {
	t.Helper()
	var inProgress, most int64
	nc := directNATS(t, "acme", "acme-secret")
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		go func() {
			n := atomic.AddInt64(&inProgress, 1)
			for {
				old := atomic.LoadInt64(&most)
				if n <= old || atomic.CompareAndSwapInt64(&most, old, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
			atomic.AddInt64(&inProgress, -1)
			_ = m.Respond([]byte("done"))
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &most
}

// fanOutRequests runs n concurrent requests over conns connections; it returns the errors.
func fanOutRequests(t *testing.T, tenant, subject string, n, conns int) []error {
	t.Helper()
	var ncs []*nats.Conn
	for i := 0; i < conns; i++ {
		ncs = append(ncs, tenantNATS(t, tenant, &errorSink{}))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = ncs[i%conns].Request(subject, []byte("req"), 15*time.Second)
		}(i)
	}
	wg.Wait()
	return errs
}

func TestNATSInFlightBoundsASlowResponder(t *testing.T) {
	subject := uniqueSubject("svc.slow")
	most := slowResponder(t, subject)
	errs := fanOutRequests(t, "inflight-delay", subject, 50, 5)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v (delay mode must hold, not fail)", i, err)
		}
	}
	got := atomic.LoadInt64(most)
	t.Logf("50 concurrent requesters, inFlight 5: at most %d requests in progress at the responder", got)
	if got > 5 {
		t.Fatalf("%d requests were in progress at once, over inFlight 5", got)
	}
}

func TestNATSInFlightRejectFailsFastNotByTimeout(t *testing.T) {
	subject := uniqueSubject("svc.slow")
	most := slowResponder(t, subject)
	errs := fanOutRequests(t, "inflight-reject", subject, 50, 5)
	var ok, noResponders int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, nats.ErrNoResponders):
			noResponders++
		default:
			t.Fatalf("a refused request failed with %v; want %v, never a timeout", err, nats.ErrNoResponders)
		}
	}
	t.Logf("inFlight 5, reject: %d answered, %d refused with no-responders; at most %d in progress", ok, noResponders, atomic.LoadInt64(most))
	if noResponders == 0 || ok < 5 || atomic.LoadInt64(most) > 5 {
		t.Fatalf("answered %d, refused %d, most in progress %d", ok, noResponders, atomic.LoadInt64(most))
	}
}

// A responder over its tenant's rate has its replies refused; each requester waiting for one
// hears no-responders at once instead of timing out, and the responder is told why.
func TestNATSRefusedReplyFailsItsRequesterFast(t *testing.T) {
	subject := uniqueSubject("svc.limited")
	sink := &errorSink{}
	responder := tenantNATS(t, "rate-reject", sink)
	if _, err := responder.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte("pong")) }); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	requester := directNATS(t, "acme", "acme-secret")
	// All at once, so the replies outrun the responder's 10-message burst however slow the
	// machine is.
	const sent = 40
	errs := make([]error, sent)
	took := make([]time.Duration, sent)
	var wg sync.WaitGroup
	for i := 0; i < sent; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = requester.Request(subject, []byte("ping"), 5*time.Second)
			took[i] = time.Since(start)
		}(i)
	}
	wg.Wait()
	var answered, noResponders int
	var slowest time.Duration
	for i, err := range errs {
		switch {
		case err == nil:
			answered++
		case errors.Is(err, nats.ErrNoResponders):
			noResponders++
			slowest = max(slowest, took[i])
		default:
			t.Fatalf("request %d: %v after %s; want a reply or no-responders, never a timeout", i, err, took[i])
		}
	}
	t.Logf("responder at its rate limit: %d of %d answered, %d refused replies heard as no-responders (slowest %s)",
		answered, sent, noResponders, slowest.Round(time.Microsecond))
	if answered == 0 || noResponders == 0 {
		t.Fatalf("answered %d, no-responders %d: want the burst answered and the rest refused", answered, noResponders)
	}
	eventually(t, 5*time.Second, "the responder told of each refused reply", func() bool {
		return sink.count("Permissions Violation", "rate limit of tenant rate-reject") == noResponders
	})
}

func TestNATSConnectionLimitRefusesTheNextConnection(t *testing.T) {
	a := tenantNATS(t, "conns", nil)
	tenantNATS(t, "conns", nil)
	_, err := nats.Connect("nats://"+addr(ports.NATS), nats.UserInfo("conns", "conns-secret"), nats.Timeout(5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "maximum connections exceeded (connections limit of tenant conns: 2)") {
		t.Fatalf("third connection: %v", err)
	}
	a.Close()
	eventually(t, 5*time.Second, "a freed place admits a new connection", func() bool {
		nc, err := nats.Connect("nats://"+addr(ports.NATS), nats.UserInfo("conns", "conns-secret"), nats.Timeout(2*time.Second))
		if err != nil {
			return false
		}
		nc.Close()
		return true
	})
}

func TestNATSSubjectOverrideNarrowsOnlyItsSubjects(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "override", sink)
	slow, fast := uniqueSubject("slow"), uniqueSubject("fast")
	cs, cf := collect(t, slow), collect(t, fast)
	publishBurst(t, nc, slow, 60, "s")
	publishBurst(t, nc, fast, 60, "f")
	_, r := requireConservation(t, "override slow.>", 60, cs, func() int {
		return sink.count("Permissions Violation for Publish to \""+slow, "rate limit of tenant override: 20 messages/s")
	})
	if r == 0 {
		t.Fatal("the override refused nothing")
	}
	requireConservation(t, "no override", 60, cf, func() int { return 0 })
}
