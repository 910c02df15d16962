package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Clients within a tenant on the read side (testdata/consume.yaml, tenant consume-clients):
// consume-clients-a's consumers (NATS: the connection named reader-a) may receive 128 KiB/s;
// every other client of the tenant 4 MiB/s of its own.
const clientConsumeLimit = 128 << 10

// clientBacklog is 10 s of the client's limit in 1 KiB records: the measured window (after the
// first 2 s, which the full bucket's burst skews) holds 6 s of held reading.
const clientBacklog = 1280

// readBeside runs limited and, from a second later, unlimited at once; it returns what each
// received and how long the unlimited one took from its start.
func readBeside(limited, unlimited func() []received) (a, b []received, bTook time.Duration) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(time.Second)
		start := time.Now()
		b = unlimited()
		bTook = time.Since(start)
	}()
	a = limited()
	wg.Wait()
	return a, b, bTook
}

// checkClientConsumed fails unless a received at the client's limit (±5% over 6 s) and b, a
// client of the same tenant under the default, read its backlog in less than half the time
// the limit would have taken: it was not held by its neighbour's debt.
func checkClientConsumed(t *testing.T, a, b []received, bTook time.Duration) {
	t.Helper()
	if len(a) == 0 {
		t.Fatal("the limited client received nothing")
	}
	rate := consumedPerSecond(a, 2*time.Second, 6*time.Second)
	t.Logf("client a: %d records in %s, %.0f B/s over 6 s (its limit %d, %.1f%%); client b beside it: %d records in %s",
		len(a), a[len(a)-1].at.Sub(a[0].at).Round(time.Millisecond), rate, clientConsumeLimit, 100*rate/clientConsumeLimit,
		len(b), bTook.Round(time.Millisecond))
	if rate < 0.95*clientConsumeLimit || rate > 1.05*clientConsumeLimit {
		t.Errorf("client a received %.0f B/s over 6 s; its client limit is %d (±5%%)", rate, clientConsumeLimit)
	}
	if limitTakes := time.Duration(clientBacklog * 1024 / clientConsumeLimit * int(time.Second)); bTook > limitTakes/2 {
		t.Errorf("client b took %s for a backlog client a's limit takes %s for: it was held by its neighbour", bTook, limitTakes)
	}
}

// Two Kafka consumers (franz-go, a group each) of one tenant read the same backlog at once:
// consume-clients-a is held to its client's limit, every record once and in order, and
// consume-clients-b reads at its own, far higher, meanwhile.
func TestKafkaConsumeLimitOfAClient(t *testing.T) {
	topic := "consume-clients"
	produceBacklog(t, topic, 1, clientBacklog)
	a, b, bTook := readBeside(
		func() []received {
			got, _ := franzConsume(t, topic, "consume-clients-a", "consume-clients-a", clientBacklog, 40*time.Second)
			return got
		},
		func() []received {
			got, _ := franzConsume(t, topic, "consume-clients-b", "consume-clients-b", clientBacklog, 30*time.Second)
			return got
		})
	checkExactlyOnceInOrder(t, "consume-clients-a", a, clientBacklog)
	checkExactlyOnceInOrder(t, "consume-clients-b", b, clientBacklog)
	checkClientConsumed(t, a, b, bTook)
}

// The same on NATS: two connections of tenant consume-clients, named reader-a and reader-b,
// drain a JetStream backlog each with nats.go Fetch at once; reader-a's pulls are held to its
// client's limit, every message once and in order, and reader-b's are not.
func TestNATSConsumeLimitOfAClient(t *testing.T) {
	streamA, _ := jetStreamBacklog(t, "read.clienta", "reader", clientBacklog, 1024)
	streamB, _ := jetStreamBacklog(t, "read.clientb", "reader", clientBacklog, 1024)
	as := func(name string) *nats.Conn {
		return gatewayNATS(t, "consume-clients", "consume-clients-secret", nats.Name(name), nats.FlusherTimeout(30*time.Second))
	}
	a, b, bTook := readBeside(
		func() []received { return fetchPulls(t, as("reader-a"), streamA, "reader", clientBacklog, 16) },
		func() []received { return fetchPulls(t, as("reader-b"), streamB, "reader", clientBacklog, 16) })
	checkExactlyOnceInOrder(t, "reader-a", a, clientBacklog)
	checkExactlyOnceInOrder(t, "reader-b", b, clientBacklog)
	checkClientConsumed(t, a, b, bTook)
}
