package e2e

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// Tenant shallow (testdata/tenants.yaml) has a burst of 50 at 300 messages/s; its client
// shallow-noisy 100/s and every other client 150/s, none with a burst of its own. In each test
// shallow-noisy offers ten times its limit while a neighbour offers 75/s, far under its own
// limit and, with the noisy client's, the tenant's. Were the noisy client's burst one second
// of its rate (100), it would empty the tenant's bucket and the neighbour would be refused;
// a default burst is at most a quarter of the tenant's (12), and the neighbour never is.
const (
	shallowTenant        = "shallow"
	shallowNoisyLimit    = 100.0
	shallowNoisyBurst    = 50 / 4
	shallowNeighbourAt   = 75.0
	shallowNoisyRefusal  = "rate limit of client shallow-noisy of tenant shallow: 100 messages/s"
	shallowTenantRefusal = "rate limit of tenant shallow:"
)

// nats.go: the noisy client offers 1,000/s for a second, rests a second (its bucket refills
// whatever its depth), and does it again; the neighbour publishes at 75/s throughout.
func TestNATSClientBurstLeavesItsTenantRoom(t *testing.T) {
	const rounds, busy, rest = 2, time.Second, time.Second
	noisySink, calmSink := &errorSink{}, &errorSink{}
	connect := func(name string, sink *errorSink) *nats.Conn {
		return gatewayNATS(t, shallowTenant, shallowTenant+"-secret", nats.Name(name),
			nats.ErrorHandler(sink.handler), nats.FlusherTimeout(30*time.Second))
	}
	noisy, calm := connect("shallow-noisy", noisySink), connect("shallow-calm", calmSink)
	noisySubject, calmSubject := uniqueSubject("shallow.noisy"), uniqueSubject("shallow.calm")
	cn, cc := collect(t, noisySubject), collect(t, calmSubject)

	var noisySent, calmSent int
	var noisyBusy time.Duration
	starts := make([]time.Time, rounds)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		onSchedule(shallowNeighbourAt, time.Duration(rounds)*(busy+rest)+rest/2, func(n int) bool {
			if err := calm.Publish(calmSubject, []byte(strconv.Itoa(n))); err != nil {
				t.Errorf("neighbour publish: %v", err)
				return false
			}
			calmSent++
			return true
		})
		_ = calm.FlushTimeout(30 * time.Second)
	}()
	go func() {
		defer wg.Done()
		for r := range rounds {
			time.Sleep(rest) // the neighbour is publishing; the noisy client's bucket is full
			from := time.Now()
			starts[r] = from
			onSchedule(10*shallowNoisyLimit, busy, func(n int) bool {
				if err := noisy.Publish(noisySubject, []byte(fmt.Sprintf("%d-%d", r, n))); err != nil {
					t.Errorf("noisy publish: %v", err)
					return false
				}
				noisySent++
				return true
			})
			noisyBusy += time.Since(from)
		}
		_ = noisy.FlushTimeout(30 * time.Second)
	}()
	wg.Wait()

	admitted, refused := requireConservation(t, "shallow-noisy", noisySent, cn, noisySink.total)
	_, calmRefused := requireConservation(t, "shallow-calm", calmSent, cc, calmSink.total)
	byClient, byTenant := noisySink.count(shallowNoisyRefusal), noisySink.count(shallowTenantRefusal)
	t.Logf("shallow-noisy: offered %.0f/s, admitted %d (%.1f/s over its %s busy, limit %.0f/s), refused %d (%d naming its client limit, %d the tenant's); shallow-calm at %.0f/s: refused %d of %d",
		10*shallowNoisyLimit, admitted, float64(admitted)/noisyBusy.Seconds(), noisyBusy.Round(time.Millisecond), shallowNoisyLimit,
		refused, byClient, byTenant, shallowNeighbourAt, calmRefused, calmSent)
	if calmRefused != 0 {
		t.Errorf("shallow-calm, far under every limit, was refused %d times: %v", calmRefused, first(calmSink.all(), 3))
	}
	if refused == 0 || byClient != refused {
		t.Errorf("shallow-noisy was refused %d times, %d of them by its own client limit (%d by the tenant's): want every refusal its own: %v",
			refused, byClient, byTenant, first(noisySink.all(), 3))
	}
	// Each round admits at most the bucket's depth (it refilled while the client rested) and
	// its rate over the round, which the gateway decided between the round's first publish
	// and its last delivery; and one token more, a gateway worker's block of the bucket.
	for r, from := range starts {
		n, last := cn.arrivedBetween(from, from.Add(busy+rest))
		if most := shallowNoisyBurst + 1 + int(shallowNoisyLimit*last.Sub(from).Seconds()); n > most {
			t.Errorf("round %d: shallow-noisy was admitted %d in %s: more than its default burst (%d) and its rate allow (%d)",
				r, n, last.Sub(from).Round(time.Millisecond), shallowNoisyBurst, most)
		}
	}
}

// arrivedBetween counts the distinct messages that arrived in [from, to) and says when the last
// of them did.
func (c *collector) arrivedBetween(from, to time.Time) (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, last := 0, from
	for _, at := range c.arrivals {
		if !at.Before(from) && at.Before(to) {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// Apache Kafka's Java producer, twice: the neighbour at 75 records/s and, once its first record
// is charged, the noisy client at 1,000/s. Neither retries (retries=0), so every refusal is
// reported; each writes its own topic, whose records carry the broker's append time. The
// neighbour batches as throughput-minded producers do (linger.ms=100: batches of ~7 records,
// within every limit's burst): a batch needs that many tokens of the tenant's bucket at once.
// (The noisy client needs no such setting: refused, it waits out the throttle time.)
func TestKafkaClientBurstLeavesItsTenantRoom(t *testing.T) {
	const noisyFor, calmFor = 3 * time.Second, 6 * time.Second
	props := map[string]string{"enable.idempotence": "false", "retries": "0", "batch.size": "800"}
	calmProps := map[string]string{"linger.ms": "100"}
	for k, v := range props {
		calmProps[k] = v
	}
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	noisyID, calmID := "shallow-noisy-java", "shallow-calm-java"
	noisyTopic, calmTopic := fmt.Sprintf("%s-%d", noisyID, time.Now().UnixNano()), fmt.Sprintf("%s-%d", calmID, time.Now().UnixNano())
	createLogAppendTopic(t, cl, noisyTopic)
	createLogAppendTopic(t, cl, calmTopic)
	charged0 := metric(t, "weighstation_messages_accepted", kafkaLabels(shallowTenant))

	var noisy, calm clientRun
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		calm = javaProducerWith(t, addr(ports.Kafka), calmProps, calmTopic, calmID, shallowNeighbourAt, calmFor, 100)
	}()
	eventually(t, 10*time.Second, "the neighbour's first record charged", func() bool {
		return metric(t, "weighstation_messages_accepted", kafkaLabels(shallowTenant)) > charged0
	})
	noisy = javaProducerWith(t, addr(ports.Kafka), props, noisyTopic, noisyID, 10*shallowNoisyLimit, noisyFor, 100)
	wg.Wait()

	noisyBatches, calmBatches := storedBatches(t, cl, noisyTopic), storedBatches(t, cl, calmTopic)
	stored := func(bs []storedBatch) (n int) {
		for _, b := range bs {
			n += b.records
		}
		return n
	}
	rate, span := steadyRate(noisyBatches, time.Second)
	t.Logf("shallow-noisy: sent %d, acked %d, failed %d (%s), stored %d, admitted at %.1f/s over %s once its burst was spent (limit %.0f/s); shallow-calm at %.0f/s: sent %d, acked %d, failed %d (%s), stored %d",
		noisy.sent, noisy.acked, noisy.failed, orNone(noisy.errors), stored(noisyBatches), rate, span.Round(time.Millisecond), shallowNoisyLimit,
		shallowNeighbourAt, calm.sent, calm.acked, calm.failed, orNone(calm.errors), stored(calmBatches))
	if len(noisyBatches) == 0 || len(calmBatches) == 0 ||
		calmBatches[len(calmBatches)-1].appended.Before(noisyBatches[0].appended.Add(time.Second)) {
		t.Fatal("the neighbour did not publish through the noisy client's first second: the test proves nothing")
	}
	if calm.failed != 0 || calm.acked != calm.sent || stored(calmBatches) != calm.acked {
		t.Errorf("shallow-calm, far under every limit: sent %d, acked %d, failed %d (%s), stored %d: want every record acknowledged and stored",
			calm.sent, calm.acked, calm.failed, orNone(calm.errors), stored(calmBatches))
	}
	if noisy.failed == 0 || errorsOtherThan(noisy.errors, []string{"ThrottlingQuotaExceededException"}) != "" {
		t.Errorf("shallow-noisy, at ten times its limit: want its excess refused as THROTTLING_QUOTA_EXCEEDED, got %d failed (%s)", noisy.failed, orNone(noisy.errors))
	}
	if noisy.acked+noisy.failed != noisy.sent || stored(noisyBatches) != noisy.acked {
		t.Errorf("shallow-noisy: sent %d = acked %d + failed %d, stored %d: want every record acknowledged and stored once or reported refused",
			noisy.sent, noisy.acked, noisy.failed, stored(noisyBatches))
	}
}
