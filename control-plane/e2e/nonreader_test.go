package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// Clients that do not read (docs/security.md "A client that does not read"): each writes as fast
// as the gateway takes its bytes for a minute. The gateway owes a refused client its refusals; past
// the per-connection bound (the chart's bufferLimitBytes, 32 KiB here) it reads nothing more from
// it, and closes it as a slow consumer once it has taken nothing for the deadline (10 s). A delayed
// client is owed nothing of the gateway's own: it is held by its limit and by TCP.
const (
	nonreaderWindow = 60 * time.Second
	// nonreaderRSSBound is what the issue allows Envoy to grow by under all of them at once.
	nonreaderRSSBound = 64 << 20
	// steadyInterval is the neighbour's schedule: 200 messages a second.
	steadyInterval = 5 * time.Millisecond
)

// nonreader is one client that does not read (or reads 1 KiB a second).
type nonreader struct {
	name     string
	protocol string
	tenant   string
	// want: "slow_consumer" (the filter closes it, counted), "aborted" (TCP closes it once it
	// acknowledged nothing for twice the deadline) or "held" (open, its writes pushed back); a
	// case may end either of two ways.
	want []string
	// slowRead: it reads 1 KiB a second instead of nothing.
	slowRead bool
	subject  string // NATS: what it publishes to; Kafka: its topic
}

func nonreaderCases() []nonreader {
	cases := []nonreader{
		{name: "nats-reject", protocol: "nats", tenant: "nonreader-reject", want: []string{"slow_consumer"}},
		{name: "nats-delay", protocol: "nats", tenant: "nonreader-delay", want: []string{"held"}},
		// The broker mutes the connection while its responses are unsent, so Envoy may stop
		// reading the client with no refusal owed (only the broker's own responses unread): then
		// TCP's deadline ends it.
		{name: "kafka-reject", protocol: "kafka", tenant: "nonreader-reject", want: []string{"slow_consumer", "aborted"}},
		// Only the broker's own responses go unread: TCP's deadline (TCP_USER_TIMEOUT) ends it.
		{name: "kafka-delay", protocol: "kafka", tenant: "nonreader-delay", want: []string{"aborted"}},
		// 1 KiB a second is less than the gateway sees taken within the deadline (it sees the
		// client take something each time Envoy's buffer toward it drains to half its limit).
		{name: "nats-slow-reader", protocol: "nats", tenant: "slow-reader", want: []string{"slow_consumer"}, slowRead: true},
	}
	// WEIGHSTATION_NONREADER=<name> runs one case alone, to measure what each costs by itself.
	if only := os.Getenv("WEIGHSTATION_NONREADER"); only != "" {
		cases = slices.DeleteFunc(cases, func(c nonreader) bool { return c.name != only })
	}
	for i := range cases {
		c := &cases[i]
		c.subject = uniqueSubject("nonreader." + c.name)
		if c.protocol == "kafka" {
			c.subject = strings.ReplaceAll(c.subject, ".", "-")
		}
	}
	return cases
}

// nonreaderOutcome is what a client saw of the gateway.
type nonreaderOutcome struct {
	written  int64
	closedAt time.Duration // 0: still open at the end
	refusals int           // -ERR 'Permissions Violation …' lines it read (slow reader)
}

// dial connects the client and completes its handshake (NATS: INFO, CONNECT, PONG).
func (c nonreader) dial(t *testing.T) net.Conn {
	t.Helper()
	if c.protocol == "nats" {
		r := dialRawNATS(t, fmt.Sprintf(`{"user":%q,"pass":%q,"verbose":false,"pedantic":false}`, c.tenant, c.tenant+"-secret"))
		return r.conn
	}
	conn, err := net.DialTimeout("tcp", addr(ports.Kafka), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// batch is the next few hundred messages, as one write.
func (c nonreader) batch(corr *int32) []byte {
	var b []byte
	for range 200 {
		if c.protocol == "nats" {
			b = append(b, "PUB "+c.subject+" 2\r\nhi\r\n"...)
			continue
		}
		*corr++
		b = append(b, produceAs(c.tenant+"-client", *corr, c.subject)...)
	}
	return b
}

// run writes until ctx ends or the gateway closes the connection; a write that cannot go on
// for 200 ms is backpressure, not a close.
func (c nonreader) run(ctx context.Context, conn net.Conn, start time.Time) nonreaderOutcome {
	var out nonreaderOutcome
	var closed, refusals atomic.Int64
	reading := make(chan struct{})
	if !c.slowRead {
		close(reading)
	} else {
		go func() {
			defer close(reading)
			buf := make([]byte, 1024)
			var lines []byte
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				_ = conn.SetReadDeadline(time.Now().Add(900 * time.Millisecond))
				n, err := conn.Read(buf)
				lines = append(lines, buf[:n]...)
				for {
					i := bytes.Index(lines, []byte("\r\n"))
					if i < 0 {
						break
					}
					if bytes.HasPrefix(lines, []byte("-ERR 'Permissions Violation")) {
						refusals.Add(1)
					}
					lines = lines[i+2:]
				}
				if err != nil && !isTimeout(err) {
					closed.CompareAndSwap(0, int64(time.Since(start)))
					return
				}
			}
		}()
	}
	var corr int32
	var pending []byte
	for ctx.Err() == nil && closed.Load() == 0 {
		if len(pending) == 0 {
			pending = c.batch(&corr)
		}
		_ = conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := conn.Write(pending)
		out.written += int64(n)
		pending = pending[n:]
		if err != nil && !isTimeout(err) {
			closed.CompareAndSwap(0, int64(time.Since(start)))
		}
	}
	<-reading
	out.closedAt = time.Duration(closed.Load())
	out.refusals = int(refusals.Load())
	return out
}

// steadyLatency is the neighbour: nats.go publishing through the gateway on a fixed schedule, a
// subscriber on nats-server itself timing each message from its intended send time.
type steadyLatency struct {
	mu       sync.Mutex
	phase    byte
	byPhase  map[byte][]time.Duration
	sent     atomic.Int64
	received atomic.Int64
	refused  atomic.Int64
}

func (s *steadyLatency) setPhase(p byte) {
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
}

func (s *steadyLatency) p99(phase byte) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := slices.Clone(s.byPhase[phase])
	if len(l) == 0 {
		return 0, 0
	}
	slices.Sort(l)
	return l[len(l)*99/100], len(l)
}

func startSteady(t *testing.T, ctx context.Context) *steadyLatency {
	t.Helper()
	s := &steadyLatency{byPhase: map[byte][]time.Duration{}}
	subject := uniqueSubject("steady")
	sub := directNATS(t)
	if _, err := sub.Subscribe(subject, func(m *nats.Msg) {
		if len(m.Data) < 9 {
			return
		}
		late := time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(m.Data[1:]))))
		s.received.Add(1)
		s.mu.Lock()
		s.byPhase[m.Data[0]] = append(s.byPhase[m.Data[0]], late)
		s.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := gatewayNATS(t, "steady", "steady-secret", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		s.refused.Add(1)
		t.Logf("the neighbour was refused: %v", err)
	}))
	go func() {
		start := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			intended := start.Add(time.Duration(i) * steadyInterval)
			time.Sleep(time.Until(intended))
			s.mu.Lock()
			phase := s.phase
			s.mu.Unlock()
			msg := binary.BigEndian.AppendUint64([]byte{phase}, uint64(intended.UnixNano()))
			if pub.Publish(subject, msg) == nil {
				s.sent.Add(1)
			}
		}
		_ = pub.Flush()
	}()
	return s
}

// acceptedCount is what the gateway says it accepted of a tenant on a protocol.
func acceptedCount(t *testing.T, protocol, tenant string) float64 {
	return metric(t, "weighstation_messages_accepted", map[string]string{"protocol": protocol, "tenant": tenant})
}

// Five clients that do not read, at once, for a minute, against the real Envoy, nats-server and
// Kafka: NATS and Kafka in reject mode (their refusals unread), NATS and Kafka in delay mode, and a
// NATS client reading 1 KiB a second. Envoy's resident memory grows by less than 64 MiB; a
// neighbour tenant far under its limits is never refused and keeps its p99 (before and during,
// in one run); the refused ones are closed as slow consumers and counted
// (weighstation_connections_closed{reason="slow_consumer"}), the delayed ones held and still
// open; everything the gateway accepted reached the broker.
func TestClientsThatDoNotReadCannotGrowTheGateway(t *testing.T) {
	cases := nonreaderCases()
	kafkaCl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer kafkaCl.Close()
	counted := map[string]*atomic.Int64{}
	direct := directNATS(t)
	closedBefore, acceptedBefore := map[string]float64{}, map[string]float64{}
	for _, c := range cases {
		closedBefore[c.name] = slowConsumersClosed(t, c)
		acceptedBefore[c.name] = acceptedCount(t, c.protocol, c.tenant)
		if c.protocol == "kafka" {
			createLogAppendTopic(t, kafkaCl, c.subject)
			continue
		}
		n := &atomic.Int64{}
		counted[c.name] = n
		if _, err := direct.Subscribe(c.subject, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := direct.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	steady := startSteady(t, ctx)
	time.Sleep(10 * time.Second) // the neighbour's p99 before
	rssBefore := envoyRSS(t)

	steady.setPhase(1)
	var rssPeak atomic.Int64
	go func() {
		for ctx.Err() == nil {
			if r := envoyRSS(t); r > rssPeak.Load() {
				rssPeak.Store(r)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	start := time.Now()
	window, endWindow := context.WithTimeout(ctx, nonreaderWindow)
	defer endWindow()
	outcomes := make([]nonreaderOutcome, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		conn := c.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = c.run(window, conn, start)
			conn.Close() // a held client goes away: what it was admitted is all there is
		}()
	}
	wg.Wait()
	steady.setPhase(2)
	rssAfter := envoyRSS(t)
	time.Sleep(time.Second)
	stop()

	grew := max(rssPeak.Load(), rssAfter) - rssBefore
	t.Logf("Envoy RSS %d MiB before, peak %d MiB, %d MiB at the end: grew %d MiB (bound %d MiB)",
		rssBefore>>20, rssPeak.Load()>>20, rssAfter>>20, grew>>20, nonreaderRSSBound>>20)
	if grew >= nonreaderRSSBound {
		t.Errorf("Envoy grew by %d MiB under clients that do not read (bound %d MiB)", grew>>20, nonreaderRSSBound>>20)
	}

	for i, c := range cases {
		o := outcomes[i]
		closed := slowConsumersClosed(t, c) - closedBefore[c.name]
		got := "held"
		switch {
		case o.closedAt > 0 && closed > 0:
			got = "slow_consumer"
		case o.closedAt > 0:
			got = "aborted"
		}
		t.Logf("%s: wrote %d KiB, %s (closed after %v), %d refusals read, slow consumers counted %.0f",
			c.name, o.written>>10, got, o.closedAt.Round(time.Millisecond), o.refusals, closed)
		if !slices.Contains(c.want, got) {
			t.Errorf("%s: %s, want %s", c.name, got, strings.Join(c.want, " or "))
		}
		if got == "held" && closed != 0 {
			t.Errorf("%s: counted as a slow consumer, but still open at the end", c.name)
		}
		if !slices.Contains(c.want, "slow_consumer") && metric(t, "weighstation_messages_delayed", map[string]string{"protocol": c.protocol, "tenant": c.tenant}) == 0 {
			t.Errorf("%s: held, but no message of it was delayed", c.name)
		}
		if c.slowRead {
			refused := metric(t, "weighstation_messages_refused", map[string]string{"protocol": c.protocol, "tenant": c.tenant, "reason": "rate"})
			if o.refusals == 0 || float64(o.refusals) > refused {
				t.Errorf("%s: read %d refusals; the gateway counted %.0f", c.name, o.refusals, refused)
			}
		}
	}

	// What reached the broker the gateway accepted, and nothing twice. Not all it accepted: each
	// of these connections ends cut (by the client, the gateway or TCP), and what was decided but
	// still in Envoy's buffers then (a held connection's admitted messages wait in Envoy's buffer
	// while its carry is full; a muted broker leaves requests unread) never leaves, as it would
	// not with the broker itself. TestAClientThatReadsItsRefusalsGetsEveryOne counts exactly.
	for _, c := range cases {
		accepted := acceptedCount(t, c.protocol, c.tenant) - acceptedBefore[c.name]
		var stored func() float64
		if c.protocol == "nats" {
			stored = func() float64 { return float64(counted[c.name].Load()) }
		} else {
			stored = func() float64 {
				n := 0
				for _, b := range storedBatches(t, kafkaCl, c.subject) {
					n += b.records
				}
				return float64(n)
			}
		}
		ok := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			accepted = acceptedCount(t, c.protocol, c.tenant) - acceptedBefore[c.name]
			if got := stored(); got > 0 && got <= accepted {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("%s: the gateway accepted %.0f messages, the broker has %.0f", c.name, accepted, stored())
			continue
		}
		t.Logf("%s: the gateway accepted %.0f messages, the broker has %.0f", c.name, accepted, stored())
	}

	before, nBefore := steady.p99(0)
	during, nDuring := steady.p99(1)
	t.Logf("the neighbour: p99 %v before (%d messages), %v during (%d); %d sent, %d received, %d refused",
		before, nBefore, during, nDuring, steady.sent.Load(), steady.received.Load(), steady.refused.Load())
	if steady.refused.Load() != 0 {
		t.Errorf("the neighbour was refused %d times", steady.refused.Load())
	}
	if steady.received.Load() != steady.sent.Load() {
		t.Errorf("the neighbour sent %d, %d arrived", steady.sent.Load(), steady.received.Load())
	}
	// Twice the p99 before, plus 5 ms: the others' first second (until TCP pushes back, their
	// kernel buffers take what they write, and the brokers answer all they were sent), the
	// delayed Kafka client's retries until TCP ends it, and this VM's steal move a loopback p99
	// by up to about that. Before the filter bounded what it owes, it went from 1.3 to 22–54 ms.
	if limit := 2*before + 5*time.Millisecond; during > limit {
		t.Errorf("the neighbour's p99 went from %v to %v beside clients that do not read (limit %v)", before, during, limit)
	}
}

// slowConsumersClosed is weighstation_connections_closed{reason="slow_consumer"} of a case's
// protocol and tenant.
func slowConsumersClosed(t *testing.T, c nonreader) float64 {
	return metric(t, "weighstation_connections_closed", map[string]string{
		"protocol": c.protocol, "tenant": c.tenant, "reason": "slow_consumer",
	})
}

// A client that reads its refusals keeps every one of them, however fast it publishes: 20,000
// messages at once against 500 a second, read back as they come. Held whenever the gateway owes
// it more than the bound, it is never closed, and delivered + refused = sent.
func TestAClientThatReadsItsRefusalsGetsEveryOne(t *testing.T) {
	const sent = 20000
	subject := uniqueSubject("refusals-read")
	direct := directNATS(t)
	var delivered atomic.Int64
	if _, err := direct.Subscribe(subject, func(*nats.Msg) { delivered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := direct.Flush(); err != nil {
		t.Fatal(err)
	}
	r := dialRawNATS(t, `{"user":"slow-reader","pass":"slow-reader-secret","verbose":false,"pedantic":false}`)
	go func() {
		msgs := strings.Repeat("PUB "+subject+" 2\r\nhi\r\n", sent) + "PING\r\n"
		_ = r.conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
		if _, err := r.conn.Write([]byte(msgs)); err != nil {
			t.Errorf("write: %v", err)
		}
	}()
	// Every refusal comes before the PONG of the PING sent after the last message.
	refused := 0
	_ = r.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	var line []byte
	buf := make([]byte, 64<<10)
	for pong := false; !pong; {
		n, err := r.conn.Read(buf)
		if err != nil {
			t.Fatalf("after %d refusals: %v", refused, err)
		}
		line = append(line, buf[:n]...)
		for {
			i := bytes.Index(line, []byte("\r\n"))
			if i < 0 {
				break
			}
			switch l := string(line[:i]); {
			case strings.HasPrefix(l, "-ERR 'Permissions Violation"):
				refused++
			case l == "PONG":
				pong = true
			case strings.HasPrefix(l, "-ERR"):
				t.Fatalf("unexpected error: %s", l)
			}
			line = line[i+2:]
		}
	}
	eventually(t, 10*time.Second, "every admitted message delivered", func() bool {
		return delivered.Load()+int64(refused) >= sent
	})
	t.Logf("sent %d: %d delivered, %d refused", sent, delivered.Load(), refused)
	if got := delivered.Load() + int64(refused); got != sent {
		t.Errorf("delivered %d + refused %d = %d, sent %d", delivered.Load(), refused, got, sent)
	}
}
