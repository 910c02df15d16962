package e2e

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
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

func (s *errorSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
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
	nc       *nats.Conn
	mu       sync.Mutex
	seen     map[string]int
	arrivals []time.Time // of each distinct message
	senders  []string    // of each distinct message: its payload up to its first '-'
	first    time.Time
	last     time.Time
}

func collect(t *testing.T, subject string) *collector {
	t.Helper()
	return collectOn(t, directNATS(t), subject)
}

// collectOn counts what a subscriber on nc receives of subject.
func collectOn(t *testing.T, nc *nats.Conn, subject string) *collector {
	t.Helper()
	c := &collector{nc: nc, seen: map[string]int{}}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		c.mu.Lock()
		now := time.Now()
		if len(c.seen) == 0 {
			c.first = now
		}
		c.last = now
		if c.seen[string(m.Data)] == 0 {
			c.arrivals = append(c.arrivals, now)
			sender, _, _ := strings.Cut(string(m.Data), "-")
			c.senders = append(c.senders, sender)
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

// settle makes sure the subscriber has been given everything nats-server had received for it
// when settle was called: the server answers the subscriber's PING after delivering what it
// routed to it before.
func (c *collector) settle(t *testing.T) {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatalf("flushing the subscriber: %v", err)
	}
}

func (c *collector) delivered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// deliveredBetween counts the distinct messages that arrived in [from, to).
func (c *collector) deliveredBetween(from, to time.Time) int {
	return c.deliveredFromBetween("", from, to)
}

// deliveredFromBetween counts the distinct messages of one sender (the payloads' prefix before
// '-'; "": every sender) that arrived in [from, to).
func (c *collector) deliveredFromBetween(sender string, from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i, at := range c.arrivals {
		if !at.Before(from) && at.Before(to) && (sender == "" || c.senders[i] == sender) {
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
	// The gateway's connection to nats-server is closed too, so whatever it forwarded has been
	// routed: once the small message has arrived, settle shows whether the large one followed.
	eventually(t, 5*time.Second, "the small message is delivered", func() bool { return c.delivered() >= 1 })
	c.settle(t)
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

// A publisher over its rate in delay mode is held — its own flush completes only as the gateway
// admits its messages — and the messages reach the subscriber at the limit, none lost. A gateway
// that buffered the messages instead would let the flush return at once.
func TestNATSRateDelayHoldsThePublisherAndLosesNothing(t *testing.T) {
	const limit, burst, sent = 200.0, 10, 400
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-delay", sink)
	subject := uniqueSubject("ratedelay")
	c := collect(t, subject)
	labels := map[string]string{"protocol": "nats", "tenant": "rate-delay"}
	delayedBefore := metric(t, "weighstation_messages_delayed", labels)
	start := time.Now()
	publishBurst(t, nc, subject, sent, "m") // returns when the flush's PONG is back
	accepted := time.Since(start)
	requireConservation(t, "rate delay", sent, c, func() int { return 0 })
	// After the burst, one message every 1/limit: the span from the first to the last arrival
	// holds sent-burst intervals.
	rate := float64(sent-burst) / c.last.Sub(c.first).Seconds()
	least := time.Duration(0.95 * (sent - burst) / limit * float64(time.Second))
	t.Logf("%d messages at a %.0f/s limit: the publisher's flush took %s; delivered at %.1f msg/s", sent, limit, accepted.Round(time.Millisecond), rate)
	if accepted < least {
		t.Fatalf("the publisher's messages were all accepted after %s; held to %.0f/s they take at least %s", accepted, limit, least)
	}
	if math.Abs(rate-limit)/limit > 0.05 {
		t.Fatalf("delivered at %.1f msg/s, want %.0f ± 5%%", rate, limit)
	}
	if sink.total() != 0 {
		t.Fatalf("delay mode reported errors: %v", sink.errs)
	}
	if metric(t, "weighstation_messages_delayed", labels) <= delayedBefore {
		t.Fatal("no delayed messages were counted")
	}
}

// The queue bounds what delay mode holds, in number and in time. queue-tight holds at most 2
// messages for at most 100 ms: three connections bursting over its 50/s rate never have more
// than 2 held at once (the tenant's queue-depth gauge, sampled through the run), and the
// overflow is refused and reported.
func TestNATSQueueBoundsHeldMessages(t *testing.T) {
	sink := &errorSink{}
	subject := uniqueSubject("queue")
	c := collect(t, subject)
	const perConn, conns, maxMessages = 50, 3, 2
	var ncs []*nats.Conn
	for i := 0; i < conns; i++ {
		ncs = append(ncs, tenantNATS(t, "queue-tight", sink))
	}
	gauge := samplePeak(t, "weighstation_queue_depth", "nats", "queue-tight")
	var wg sync.WaitGroup
	for i, nc := range ncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publishBurst(t, nc, subject, perConn, "c"+strconv.Itoa(i))
		}()
	}
	wg.Wait()
	peak := gauge.stop(t)
	_, r := requireConservation(t, "queue", perConn*conns, c, func() int {
		return sink.count("Permissions Violation", "queue limit of tenant queue-tight")
	})
	t.Logf("at most %.0f messages held at once (%d samples)", peak, gauge.samples)
	if sink.count("queue limit of tenant queue-tight: 2 messages already held") == 0 {
		t.Fatal("no message was refused for the queue being full")
	}
	if r == 0 || peak < 1 {
		t.Fatalf("refused %d, held at most %.0f: the queue was never used", r, peak)
	}
	if peak > maxMessages {
		t.Fatalf("%.0f messages held at once, over queue.maxMessages %d", peak, maxMessages)
	}
}

// A held message is refused once it has waited maxWait, never later. queue-wait lets one
// request be in flight and holds the rest for at most 200 ms, two at a time: of five requests
// sent at once to a responder that takes 2 s, one is answered, two are held and refused after
// maxWait, and two are refused at once (the queue is full). Each requester hears no-responders.
func TestNATSQueueMaxWaitRefusesHeldRequests(t *testing.T) {
	const maxWait, tick = 200 * time.Millisecond, 5 * time.Millisecond
	subject := uniqueSubject("svc.slow")
	responder := directNATS(t)
	if _, err := responder.Subscribe(subject, func(m *nats.Msg) {
		go func() {
			time.Sleep(2 * time.Second)
			_ = m.Respond([]byte("done"))
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	// One connection each, so each held request holds only itself.
	first := tenantNATS(t, "queue-wait", &errorSink{})
	answered := make(chan error, 1)
	go func() {
		_, err := first.Request(subject, []byte("first"), 10*time.Second)
		answered <- err
	}()
	eventually(t, 5*time.Second, "the first request is in flight", func() bool {
		return metric(t, "weighstation_in_flight", natsLabels("queue-wait")) == 1
	})
	const others = 4
	var ncs []*nats.Conn
	for i := 0; i < others; i++ {
		ncs = append(ncs, tenantNATS(t, "queue-wait", &errorSink{}))
	}
	took := make([]time.Duration, others)
	errs := make([]error, others)
	var wg sync.WaitGroup
	for i, nc := range ncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = nc.Request(subject, []byte("held"), 10*time.Second)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	var waited int
	for i, err := range errs {
		t.Logf("request %d: %v after %s", i, err, took[i].Round(time.Millisecond))
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request %d: %v after %s; want no-responders", i, err, took[i])
		}
		// A held request is refused at maxWait, on the next tick; fastRefusal covers the
		// refusal's way back to the requester on a loaded machine.
		if took[i] > maxWait+tick+fastRefusal/5 {
			t.Errorf("request %d was refused after %s, later than maxWait %s", i, took[i], maxWait)
		}
		if took[i] >= maxWait {
			waited++
		}
	}
	if waited != 2 {
		t.Fatalf("%d requests were held until maxWait; want 2 (queue.maxMessages), the other 2 refused at once", waited)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the request in flight: %v", err)
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
	most := countingResponder(t, subject, 50*time.Millisecond)
	errs := fanOutRequests(t, "inflight-delay", subject, 50, 5)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v (delay mode must hold, not fail)", i, err)
		}
	}
	got := most.Load()
	t.Logf("50 concurrent requesters, inFlight 5: at most %d requests in progress at the responder", got)
	if got > 5 {
		t.Fatalf("%d requests were in progress at once, over inFlight 5", got)
	}
}

func TestNATSInFlightRejectFailsFastNotByTimeout(t *testing.T) {
	subject := uniqueSubject("svc.slow")
	most := countingResponder(t, subject, 50*time.Millisecond)
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
	t.Logf("inFlight 5, reject: %d answered, %d refused with no-responders; at most %d in progress", ok, noResponders, most.Load())
	if noResponders == 0 || ok < 5 || most.Load() > 5 {
		t.Fatalf("answered %d, refused %d, most in progress %d", ok, noResponders, most.Load())
	}
}

// fastRefusal bounds how long a refused request or reply may take to reach its requester.
const fastRefusal = 500 * time.Millisecond

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
	requester := directNATS(t)
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
	// Fast: a refused reply is answered as the gateway decides it, a few milliseconds after the
	// request (3 ms measured); the bound leaves a loaded machine room and is a tenth of the
	// requester's 5 s timeout, which a requester left waiting for a reply would reach.
	if slowest > fastRefusal {
		t.Fatalf("the slowest requester heard no-responders after %s; want within %s", slowest, fastRefusal)
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
