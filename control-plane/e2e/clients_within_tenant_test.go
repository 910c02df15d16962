package e2e

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Tenant billing (testdata/tenants.yaml) limits each of its clients within its own 300
// messages/s: billing-a has a bucket of 100/s, every other client one of the pool's at 60/s. In
// each test billing-a offers ten times its limit and billing-b half of its own, together well
// over the tenant's limit: without client buckets billing-a would take the tenant's whole budget
// and billing-b would be refused.
const (
	billingTenant      = "billing"
	billingTenantLimit = 300.0
	billingALimit      = 100.0
	billingBLimit      = 60.0
	// Buckets are one second deep (the policy sets no burst).
	billingABurst = int(billingALimit)
)

// billingWithin checks what a user of the tenant would see: billing-b never refused, billing-a
// admitted at its own limit within ±5% (after its burst, over the span it was acknowledged),
// and the tenant charged no more than its limit allows over the run.
func billingWithin(t *testing.T, admittedA int, spanA time.Duration, refusedB int, charged float64, wall time.Duration) {
	t.Helper()
	rateA := float64(admittedA-billingABurst) / spanA.Seconds()
	t.Logf("billing-a admitted %d over %s (%.1f/s after its burst, limit %.0f/s); billing-b refused %d; tenant charged %.0f in %s",
		admittedA, spanA.Round(time.Millisecond), rateA, billingALimit, refusedB, charged, wall.Round(time.Millisecond))
	if refusedB != 0 {
		t.Errorf("billing-b, at half its own limit, was refused %d times", refusedB)
	}
	if math.Abs(rateA-billingALimit) > 0.05*billingALimit {
		t.Errorf("billing-a admitted at %.1f/s: want its client limit %.0f/s ± 5%%", rateA, billingALimit)
	}
	if most := billingTenantLimit*wall.Seconds() + billingTenantLimit; charged > most {
		t.Errorf("the tenant was charged %.0f messages in %s: over its limit (at most %.0f)", charged, wall, most)
	}
}

// Two nats.go connections of one tenant, named billing-a and billing-b (CONNECT name).
func TestNATSClientOverItsLimitDoesNotStarveItsTenant(t *testing.T) {
	const window = 6 * time.Second
	labels := map[string]string{"protocol": "nats", "tenant": billingTenant}
	sinkA, sinkB := &errorSink{}, &errorSink{}
	connect := func(name string, sink *errorSink) *nats.Conn {
		return gatewayNATS(t, billingTenant, billingTenant+"-secret", nats.Name(name),
			nats.ErrorHandler(sink.handler), nats.FlusherTimeout(30*time.Second))
	}
	a, b := connect("billing-a", sinkA), connect("billing-b", sinkB)
	subjectA, subjectB := uniqueSubject("billing.a"), uniqueSubject("billing.b")
	ca, cb := collect(t, subjectA), collect(t, subjectB)
	charged0 := metric(t, "weighstation_messages_accepted", labels)

	type run struct {
		sent        int
		first, last time.Time
	}
	var ra, rb run
	publish := func(nc *nats.Conn, subject string, rate float64, r *run, wg *sync.WaitGroup) {
		defer wg.Done()
		onSchedule(rate, window, func(n int) bool {
			if err := nc.Publish(subject, []byte(strconv.Itoa(n))); err != nil {
				t.Errorf("publish: %v", err)
				return false
			}
			r.last = time.Now()
			if n == 0 {
				r.first = r.last
			}
			r.sent++
			return true
		})
		_ = nc.FlushTimeout(30 * time.Second)
	}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go publish(a, subjectA, 10*billingALimit, &ra, &wg)
	go publish(b, subjectB, billingBLimit/2, &rb, &wg)
	wg.Wait()
	wall := time.Since(start)

	refusalA := fmt.Sprintf("rate limit of client billing-a of tenant %s: %.0f messages/s", billingTenant, billingALimit)
	admittedA, refusedA := requireConservation(t, "billing-a", ra.sent, ca, func() int {
		return sinkA.count("Permissions Violation for Publish to", refusalA)
	})
	_, refusedB := requireConservation(t, "billing-b", rb.sent, cb, sinkB.total)
	if refusedA == 0 {
		t.Errorf("billing-a, at ten times its limit, was never refused by its client limit; its errors: %v", sinkA.all())
	}
	charged := metric(t, "weighstation_messages_accepted", labels) - charged0
	billingWithin(t, admittedA, ra.last.Sub(ra.first), refusedB, charged, wall)
	if !a.IsConnected() || !b.IsConnected() {
		t.Error("a refusal closed a connection; it must be non-fatal")
	}
}

// Two producers of one Kafka tenant, client.ids billing-a-… and billing-b-…, through the
// plaintext listener, each the client a user runs: Apache Kafka's Java producer and librdkafka.
// They do not retry (retries=0), so every refusal is reported in a delivery callback.
func TestKafkaClientOverItsLimitDoesNotStarveItsTenant(t *testing.T) {
	const window = 8 * time.Second
	type producer func(t *testing.T, topic, clientID string, rate float64) clientRun
	java := func(t *testing.T, topic, clientID string, rate float64) clientRun {
		props := map[string]string{"enable.idempotence": "false", "retries": "0"}
		return javaProducerWith(t, addr(ports.Kafka), props, topic, clientID, rate, window, 100)
	}
	librdkafka := func(t *testing.T, topic, clientID string, rate float64) clientRun {
		conf := map[string]string{"retries": "0"}
		return librdkafkaProducerWith(t, addr(ports.Kafka), conf, topic, clientID, rate, window, 100)
	}
	for _, c := range []struct {
		name string
		run  producer
	}{{"java", java}, {"librdkafka", librdkafka}} {
		t.Run(c.name, func(t *testing.T) {
			topic := fmt.Sprintf("billing-%s-%d", c.name, time.Now().UnixNano())
			idA, idB := "billing-a-"+c.name, "billing-b-"+c.name
			charged0 := metric(t, "weighstation_messages_accepted", kafkaLabels(billingTenant))
			start := time.Now()
			var ra, rb clientRun
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); ra = c.run(t, topic, idA, 10*billingALimit) }()
			go func() { defer wg.Done(); rb = c.run(t, topic, idB, billingBLimit/2) }()
			wg.Wait()
			wall := time.Since(start)
			var charged float64
			eventually(t, 5*time.Second, "the acknowledged records are charged", func() bool {
				charged = metric(t, "weighstation_messages_accepted", kafkaLabels(billingTenant)) - charged0
				return charged >= float64(ra.acked+rb.acked)
			})
			records := topicRecords(t, topic)
			storedA, storedB := recordsOf(records, idA), recordsOf(records, idB)
			t.Logf("billing-a: sent %d, acked %d, failed %d (%s), stored %d; billing-b: sent %d, acked %d, failed %d (%s), stored %d",
				ra.sent, ra.acked, ra.failed, orNone(ra.errors), storedA, rb.sent, rb.acked, rb.failed, orNone(rb.errors), storedB)
			if ra.failed == 0 || errorsOtherThan(ra.errors, []string{"ThrottlingQuotaExceededException", "THROTTLING_QUOTA_EXCEEDED"}) != "" {
				t.Errorf("billing-a, at ten times its limit: want its excess refused as THROTTLING_QUOTA_EXCEEDED, got %d failed (%s)\n%s",
					ra.failed, orNone(ra.errors), ra.log)
			}
			if ra.acked+ra.failed != ra.sent || storedA != ra.acked || rb.acked != rb.sent || storedB != rb.acked {
				t.Errorf("every record acknowledged is stored once and every other one reported refused: billing-a %d = %d + %d, stored %d; billing-b %d = %d, stored %d",
					ra.sent, ra.acked, ra.failed, storedA, rb.sent, rb.acked, storedB)
			}
			billingWithin(t, ra.acked, ra.ackSpan, rb.failed, charged, wall)
		})
	}
}
