package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS read side (testdata/consume.yaml): consume-nats may receive 256 KiB/s (burst 32 KiB)
// and its JetStream pulls are held to it; consume-nats-core's core subscriber may receive
// 64 KiB/s, and its debt may run 1 s before it is a slow consumer.
const natsConsumeLimit, natsCoreLimit = 256 << 10, 64 << 10

// natsBacklog is 14 s of the pull limit, as the Kafka tests' backlog: 3,584 messages of 1 KiB,
// each numbered by its first eight bytes (printable, so natscli prints one per line).
const natsBacklog, natsMessageBytes = 3584, 1024

// jetStreamBacklog creates a stream of n messages of `size` bytes on subject and a durable pull
// consumer of it, straight on nats-server (as the baseline user); it returns the stream's name.
func jetStreamBacklog(t *testing.T, subject, durable string, n, size int) (string, nats.JetStreamContext) {
	t.Helper()
	stream := "READ_" + subject[len("read."):]
	admin, err := directNATS(t).JetStream(nats.PublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: nats.MemoryStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() { _ = admin.DeleteStream(stream) })
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for i := 0; i < n; i++ {
		copy(body, fmt.Sprintf("%08d", i))
		if _, err := admin.PublishAsync(subject, append([]byte(nil), body...)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-admin.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("the backlog was not acknowledged in 30 s")
	}
	if _, err := admin.AddConsumer(stream, &nats.ConsumerConfig{Durable: durable, AckPolicy: nats.AckExplicitPolicy, AckWait: 30 * time.Second}); err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return stream, admin
}

// numbered is a message as a NATS consumer saw it: its number is its offset.
func numbered(at time.Time, data []byte) received {
	n, err := strconv.Atoi(string(data[:min(8, len(data))]))
	if err != nil {
		n = -1
	}
	return received{at: at, offset: int64(n), bytes: len(data)}
}

// natsPullers are the clients JetStream pulls are tested with: each reads the backlog of
// stream/durable through the gateway as the consume-nats tenant, acknowledging every message.
var natsPullers = []struct {
	name string
	pull func(t *testing.T, stream, durable string) []received
}{
	{"nats.go Fetch", func(t *testing.T, stream, durable string) []received {
		return fetchPulls(t, tenantNATS(t, "consume-nats", nil), stream, durable, natsBacklog, 32)
	}},
	{"nats.go Consume", func(t *testing.T, stream, durable string) []received {
		return consumePulls(t, stream, durable, jetstream.PullMaxMessages(32))
	}},
	{"natscli consumer next", natscliPulls},
}

// fetchPulls: nats.go's PullSubscribe and Fetch on nc, `batch` messages at a time, each pull
// expiring after 5 s, until it has n.
func fetchPulls(t *testing.T, nc *nats.Conn, stream, durable string, n, batch int) []received {
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := js.PullSubscribe("", durable, nats.Bind(stream, durable))
	if err != nil {
		t.Fatal(err)
	}
	var got []received
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		msgs, err := sub.Fetch(batch, nats.MaxWait(5*time.Second))
		if err != nil {
			// A held pull must not cost the client an error (a status the gateway caused).
			t.Errorf("fetch: %v", err)
			continue
		}
		now := time.Now()
		for _, m := range msgs {
			got = append(got, numbered(now, m.Data))
			if err := m.Ack(); err != nil {
				t.Errorf("ack: %v", err)
			}
		}
	}
	return got
}

// consumePulls: nats.go's jetstream Consume with `size` (messages or bytes a pull), each pull
// expiring after 4 s and heartbeating every second: a missed heartbeat is an error it reports.
func consumePulls(t *testing.T, stream, durable string, size jetstream.PullConsumeOpt) []received {
	js, err := jetstream.New(tenantNATS(t, "consume-nats", nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []received
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mu.Lock()
		got = append(got, numbered(time.Now(), m.Data()))
		n := len(got)
		mu.Unlock()
		if err := m.Ack(); err != nil {
			t.Errorf("ack: %v", err)
		}
		if n == natsBacklog {
			close(done)
		}
	}, size, jetstream.PullExpiry(4*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// A held pull must not cost a heartbeat or the pull's expiry.
			t.Errorf("consume: %v", err)
		}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	cc.Stop()
	mu.Lock()
	defer mu.Unlock()
	return got
}

// natscliPulls: `nats consumer next --count`, which pulls one message at a time and
// acknowledges it; each printed line is stamped as it arrives.
func natscliPulls(t *testing.T, stream, durable string) []received {
	cmd := exec.Command(filepath.Join(root, ".tools/bin/nats"), "consumer", "next", stream, durable,
		"--count", strconv.Itoa(natsBacklog), "--raw", "--ack", "--server", "nats://"+addr(ports.NATS),
		"--user", "consume-nats", "--password", "consume-nats-secret", "--timeout", "60s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []received
	lines := bufio.NewScanner(out)
	lines.Buffer(make([]byte, 4*natsMessageBytes), 4*natsMessageBytes)
	for lines.Scan() {
		if line := lines.Bytes(); len(line) == natsMessageBytes {
			got = append(got, numbered(time.Now(), line))
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("nats consumer next: %v\n%s", err, tail(stderr.String(), 2000))
	}
	return got
}

// A tenant limited to 256 KiB/s drains a 14-second JetStream backlog: its pulls are held so
// that it receives at its limit (±5% over 10 s), every message once and in order, each
// acknowledged once, none redelivered, no pull's heartbeat missed. The gateway counts what it
// delivered. Pulls take no inFlight slot (natscli's one-message pulls exhausted consume-nats's
// 1,000 when they did: the messages that answer a pull do not arrive on its reply subject).
// The decision log has the held pulls.
func TestNATSJetStreamPullsAreHeldToTheConsumeLimit(t *testing.T) {
	defer awaitConsumeDecision(t, "consume-nats", "nats", "pull held")
	for i, c := range natsPullers {
		t.Run(c.name, func(t *testing.T) {
			subject := fmt.Sprintf("read.pull%d", i)
			stream, admin := jetStreamBacklog(t, subject, "reader", natsBacklog, natsMessageBytes)
			tenant := map[string]string{"protocol": "nats", "tenant": "consume-nats"}
			consumed0 := metric(t, "weighstation_bytes_consumed", tenant)
			throttled0 := metric(t, "weighstation_consume_throttled", tenant)
			got := c.pull(t, stream, "reader")
			if len(got) == 0 {
				t.Fatal("the consumer received nothing")
			}
			rate := consumedPerSecond(got, 2*time.Second, 10*time.Second)
			// Acknowledgements are published after the last message arrives.
			var info *nats.ConsumerInfo
			eventually(t, 5*time.Second, "every acknowledgement", func() bool {
				var err error
				info, err = admin.ConsumerInfo(stream, "reader")
				return err == nil && info.AckFloor.Stream >= natsBacklog
			})
			consumed := metric(t, "weighstation_bytes_consumed", tenant) - consumed0
			t.Logf("%s: %d messages in %s, %.0f B/s over 10 s (limit %d, %.1f%%), %.0f pulls held; acknowledged through %d, %d pending, %d redelivered; %.0f bytes counted",
				c.name, len(got), got[len(got)-1].at.Sub(got[0].at).Round(time.Millisecond), rate, natsConsumeLimit,
				100*rate/natsConsumeLimit, metric(t, "weighstation_consume_throttled", tenant)-throttled0,
				info.AckFloor.Stream, info.NumAckPending, info.NumRedelivered, consumed)
			checkExactlyOnceInOrder(t, "the consumer", got, natsBacklog)
			if rate < 0.95*natsConsumeLimit || rate > 1.05*natsConsumeLimit {
				t.Errorf("the consumer received %.0f B/s over 10 s; its limit is %d (±5%%)", rate, natsConsumeLimit)
			}
			if info.AckFloor.Stream != natsBacklog || info.NumAckPending != 0 || info.NumRedelivered != 0 {
				t.Errorf("acknowledged through %d of %d, %d pending, %d redelivered: want every message acknowledged once",
					info.AckFloor.Stream, natsBacklog, info.NumAckPending, info.NumRedelivered)
			}
			if total := float64(natsBacklog * natsMessageBytes); consumed < total || consumed > 1.01*total {
				t.Errorf("weighstation_bytes_consumed grew by %.0f for %.0f bytes of messages", consumed, total)
			}
		})
	}
}

// A tenant limited to 200 messages/s (consume.messagesPerSecond, bytes unlimited) drains a
// 14-second backlog of small messages with nats.go Fetch(25): it receives 200 messages/s (±5%
// over 10 s), every message once and in order.
func TestNATSJetStreamPullsAreHeldToTheMessageLimit(t *testing.T) {
	const limit, backlog = 200, 2800
	stream, _ := jetStreamBacklog(t, "read.messages", "reader", backlog, 64)
	got := fetchPulls(t, tenantNATS(t, "consume-nats-msgs", nil), stream, "reader", backlog, 25)
	if len(got) == 0 {
		t.Fatal("the consumer received nothing")
	}
	counted := make([]received, len(got))
	for i, r := range got {
		counted[i] = r
		counted[i].bytes = 1 // a message each: the rate in messages
	}
	rate := consumedPerSecond(counted, 2*time.Second, 10*time.Second)
	t.Logf("%d messages in %s, %.1f messages/s over 10 s (limit %d, %.1f%%)", len(got),
		got[len(got)-1].at.Sub(got[0].at).Round(time.Millisecond), rate, limit, 100*rate/limit)
	checkExactlyOnceInOrder(t, "the consumer", got, backlog)
	if rate < 0.95*limit || rate > 1.05*limit {
		t.Errorf("the consumer received %.1f messages/s over 10 s; its limit is %d (±5%%)", rate, limit)
	}
}

// coreSubscriber subscribes to subject through the gateway as tenant and records what it
// receives, and its connection's disconnections and reconnections.
type coreSubscriber struct {
	got                    atomic.Int64
	disconnects, reconnect atomic.Int64
}

func subscribeCore(t *testing.T, tenant, subject string) *coreSubscriber {
	t.Helper()
	s := &coreSubscriber{}
	nc := gatewayNATS(t, tenant, tenant+"-secret",
		nats.DisconnectErrHandler(func(*nats.Conn, error) { s.disconnects.Add(1) }),
		nats.ReconnectHandler(func(*nats.Conn) { s.reconnect.Add(1) }),
		nats.ReconnectWait(100*time.Millisecond), nats.MaxReconnects(-1))
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { s.got.Add(int64(len(m.Data))) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// publishAt publishes 1 KiB messages on subject straight to nats-server at bytesPerSecond for
// `for`, paced from each message's intended send time; returns the bytes sent.
func publishAt(t *testing.T, subject string, bytesPerSecond int, d time.Duration) int {
	t.Helper()
	nc := directNATS(t)
	body := make([]byte, natsMessageBytes)
	every := time.Second * natsMessageBytes / time.Duration(bytesPerSecond)
	start, sent := time.Now(), 0
	for i := 0; time.Duration(i)*every < d; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		if err := nc.Publish(subject, body); err != nil {
			t.Fatal(err)
		}
		sent += len(body)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sent
}

// natsConnections is nats-server's /connz for a user: its connections to nats-server (through
// the gateway, the gateway's upstream connections), open or closed.
func natsConnections(t *testing.T, user, state string) []struct {
	PendingBytes int    `json:"pending_bytes"`
	Reason       string `json:"reason"`
} {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/connz?auth=true&user=%s&state=%s&limit=1024", addr(ports.NATSMonitor), user, state))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var connz struct {
		Connections []struct {
			PendingBytes int    `json:"pending_bytes"`
			Reason       string `json:"reason"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&connz); err != nil {
		t.Fatal(err)
	}
	return connz.Connections
}

// A core subscriber under its consume limit (half of it, for 4 s) receives everything on one
// connection. One over it (four times, for 4 s) is a slow consumer once its debt outruns its
// 1 s queue.maxWait: the gateway ends its connection, as nats-server ends a slow consumer's,
// nats.go sees the disconnection and reconnects, and the gateway counts it. nats-server sees
// its upstream connections closed by their client, never a slow consumer of its own, and no
// bytes pending for them (Envoy reads on: the gateway's limit is not TCP backpressure).
func TestNATSCoreSubscriberOverItsConsumeLimitIsASlowConsumer(t *testing.T) {
	tenant := map[string]string{"protocol": "nats", "tenant": "consume-nats-core"}

	under := subscribeCore(t, "consume-nats-core", "read.core.under")
	slow0 := metric(t, "weighstation_consume_slow_consumers", tenant)
	sent := publishAt(t, "read.core.under", natsCoreLimit/2, 4*time.Second)
	eventually(t, 5*time.Second, "every message at half the limit", func() bool { return under.got.Load() == int64(sent) })
	t.Logf("at half the limit: sent %d bytes, received %d, %d disconnections", sent, under.got.Load(), under.disconnects.Load())
	if under.disconnects.Load() != 0 || metric(t, "weighstation_consume_slow_consumers", tenant) != slow0 {
		t.Fatalf("a subscriber under its limit was disconnected %d times", under.disconnects.Load())
	}
	time.Sleep(2 * time.Second) // the bucket refills

	over := subscribeCore(t, "consume-nats-core", "read.core.over")
	consumed0 := metric(t, "weighstation_bytes_consumed", tenant)
	closed0 := len(natsConnections(t, "consume-nats-core", "closed"))
	pending := 0
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, c := range natsConnections(t, "consume-nats-core", "open") {
				pending = max(pending, c.PendingBytes)
			}
		}
	}()
	start := time.Now()
	sent = publishAt(t, "read.core.over", 4*natsCoreLimit, 4*time.Second)
	took := time.Since(start)
	close(stop)
	<-sampled
	eventually(t, 5*time.Second, "the slow consumer's reconnection", func() bool { return over.reconnect.Load() > 0 })
	slow := metric(t, "weighstation_consume_slow_consumers", tenant) - slow0
	consumed := metric(t, "weighstation_bytes_consumed", tenant) - consumed0
	t.Logf("at four times the limit for %s: sent %d bytes, received %d (%.0f B/s), %d disconnections, %d reconnections, %.0f slow consumers counted, %.0f bytes counted",
		took.Round(time.Millisecond), sent, over.got.Load(), float64(over.got.Load())/took.Seconds(),
		over.disconnects.Load(), over.reconnect.Load(), slow, consumed)
	if slow == 0 || over.disconnects.Load() == 0 {
		t.Errorf("%.0f slow consumers counted, %d disconnections seen: want the subscriber over its limit ended", slow, over.disconnects.Load())
	}
	// What it received is what the gateway counted, within what the connection it ended had in
	// the read that found it slow (nats-server writes at most 64 KiB at once to a client).
	if got := float64(over.got.Load()); consumed < got || consumed > got+64<<10 {
		t.Errorf("received %.0f bytes; the gateway counted %.0f", got, consumed)
	}
	reasons := map[string]int{}
	for _, c := range natsConnections(t, "consume-nats-core", "closed")[closed0:] {
		reasons[c.Reason]++
	}
	t.Logf("nats-server meanwhile: at most %d bytes pending to the subscriber's connections; closed: %v", pending, reasons)
	if reasons["Client Closed"] != int(over.disconnects.Load()) || len(reasons) != 1 {
		t.Errorf("nats-server closed %v; want one Client Closed per disconnection the gateway made (%d)", reasons, over.disconnects.Load())
	}
}

// natscli's `nats sub` over its tenant's consume limit (four times it, for 3 s) is ended as a
// slow consumer too: it says `Disconnected due to: EOF, will attempt reconnect`, as it does
// when nats-server ends a slow consumer, and reconnects (2 s later, its default).
func TestNATSCoreSubscriberOverItsConsumeLimitWithNatscli(t *testing.T) {
	tenant := map[string]string{"protocol": "nats", "tenant": "consume-nats-core"}
	time.Sleep(2 * time.Second) // the bucket refills after any earlier test
	slow0 := metric(t, "weighstation_consume_slow_consumers", tenant)
	cmd := exec.Command(filepath.Join(root, ".tools/bin/nats"), "sub", "read.core.cli", "--raw",
		"--server", "nats://"+addr(ports.NATS), "--user", "consume-nats-core", "--password", "consume-nats-core-secret")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(time.Second) // subscribed
	sent := publishAt(t, "read.core.cli", 4*natsCoreLimit, 3*time.Second)
	time.Sleep(2 * time.Second) // a reconnection
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	text := out.String()
	received := strings.Count(text, "\n")
	slow := metric(t, "weighstation_consume_slow_consumers", tenant) - slow0
	var said []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(strings.ToLower(line), "connect") {
			said = append(said, strings.TrimSpace(line))
		}
	}
	t.Logf("natscli at four times the limit: sent %d messages, printed %d lines; %.0f slow consumers counted; it said %q",
		sent/natsMessageBytes, received, slow, said)
	if slow == 0 || !strings.Contains(text, "Disconnected due to: EOF, will attempt reconnect") {
		t.Errorf("%.0f slow consumers counted, natscli said %q: want it ended and told", slow, said)
	}
}
