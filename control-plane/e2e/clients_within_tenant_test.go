package e2e

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
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
	// The policy sets no burst: billing-a's is one second of its rate, at most a quarter of
	// the tenant's (one second of 300).
	billingABurst = int(billingTenantLimit / 4)
)

// billingWithin checks what a user of the tenant would see: billing-b never refused, billing-a
// admitted at its own limit within ±5% (rateA, once its burst was spent, over spanA), and the
// tenant charged no more than its limit allows over the run.
func billingWithin(t *testing.T, rateA float64, spanA time.Duration, refusedB int, charged float64, wall time.Duration) {
	t.Helper()
	t.Logf("billing-a admitted at %.1f/s over %s once its burst was spent (limit %.0f/s); billing-b refused %d; tenant charged %.0f in %s",
		rateA, spanA.Round(time.Millisecond), billingALimit, refusedB, charged, wall.Round(time.Millisecond))
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
	spanA := ra.last.Sub(ra.first)
	billingWithin(t, float64(admittedA-billingABurst)/spanA.Seconds(), spanA, refusedB, charged, wall)
	if !a.IsConnected() || !b.IsConnected() {
		t.Error("a refusal closed a connection; it must be non-fatal")
	}

	// The operator's view: the tenant's clients refused most over the last minute.
	var out []byte
	eventually(t, 5*time.Second, "weighstation top --tenant billing names billing-a", func() bool {
		var err error
		out, err = exec.Command(filepath.Join(root, ".tools/bin/weighstation"), "top", "--once", "--tenant", billingTenant,
			"--control-plane", "http://"+addr(ports.ControlPlane)).CombinedOutput()
		return err == nil && regexp.MustCompile(`nats\s+billing-a\s+\d+`).Match(out)
	})
	t.Logf("weighstation top --once --tenant %s:\n%s", billingTenant, out)
	if m := regexp.MustCompile(`nats\s+billing-a\s+(\d+)`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Errorf("top's client rows do not show billing-a's refusals")
	} else if n, _ := strconv.Atoi(string(m[1])); n > refusedA {
		t.Errorf("top shows %d refusals of billing-a; it was refused %d times", n, refusedA)
	}
	if strings.Contains(string(out), "billing-b") {
		t.Error("top lists billing-b, never refused, among the clients refused")
	}
}

// steadyRate is the rate the broker appended a topic's records at, from skip after its first
// append to its last: what a client backlogged at its limit was admitted at, its burst aside.
func steadyRate(batches []storedBatch, skip time.Duration) (float64, time.Duration) {
	if len(batches) == 0 {
		return 0, 0
	}
	sort.Slice(batches, func(i, j int) bool { return batches[i].appended.Before(batches[j].appended) })
	from, to := batches[0].appended.Add(skip), batches[len(batches)-1].appended
	n := 0
	for _, b := range batches {
		if b.appended.After(from) && !b.appended.After(to) {
			n += b.records
		}
	}
	if !to.After(from) {
		return 0, 0
	}
	return float64(n) / to.Sub(from).Seconds(), to.Sub(from)
}

// Two producers of one Kafka tenant, client.ids billing-a-… and billing-b-…, through the
// plaintext listener, each the client a user runs: Apache Kafka's Java producer and librdkafka.
// They do not retry (retries=0), so every refusal is reported in a delivery callback. Each
// writes its own topic, whose records carry the broker's append time: billing-a's admitted rate
// is measured at the broker, once its burst is spent. A batch is admitted whole, so any window
// may hold one batch more than its rate (docs/policy-reference.md, the window bound): batches
// of at most ~13 records (batch.size 1600) keep that within 1.5% of a 6 s window.
func TestKafkaClientOverItsLimitDoesNotStarveItsTenant(t *testing.T) {
	const window = 8 * time.Second
	type producer func(t *testing.T, topic, clientID string, rate float64) clientRun
	java := func(t *testing.T, topic, clientID string, rate float64) clientRun {
		props := map[string]string{"enable.idempotence": "false", "retries": "0", "batch.size": "1600"}
		return javaProducerWith(t, addr(ports.Kafka), props, topic, clientID, rate, window, 100)
	}
	librdkafka := func(t *testing.T, topic, clientID string, rate float64) clientRun {
		conf := map[string]string{"retries": "0", "batch.size": "1600"}
		return librdkafkaProducerWith(t, addr(ports.Kafka), conf, topic, clientID, rate, window, 100)
	}
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, c := range []struct {
		name string
		run  producer
	}{{"java", java}, {"librdkafka", librdkafka}} {
		t.Run(c.name, func(t *testing.T) {
			idA, idB := "billing-a-"+c.name, "billing-b-"+c.name
			topicA, topicB := fmt.Sprintf("%s-%d", idA, time.Now().UnixNano()), fmt.Sprintf("%s-%d", idB, time.Now().UnixNano())
			createLogAppendTopic(t, cl, topicA)
			createLogAppendTopic(t, cl, topicB)
			charged0 := metric(t, "weighstation_messages_accepted", kafkaLabels(billingTenant))
			start := time.Now()
			var ra, rb clientRun
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); ra = c.run(t, topicA, idA, 10*billingALimit) }()
			go func() { defer wg.Done(); rb = c.run(t, topicB, idB, billingBLimit/2) }()
			wg.Wait()
			wall := time.Since(start)
			var charged float64
			eventually(t, 5*time.Second, "the acknowledged records are charged", func() bool {
				charged = metric(t, "weighstation_messages_accepted", kafkaLabels(billingTenant)) - charged0
				return charged >= float64(ra.acked+rb.acked)
			})
			storedA, storedB := recordsOf(topicRecords(t, topicA), idA), recordsOf(topicRecords(t, topicB), idB)
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
			rate, span := steadyRate(storedBatches(t, cl, topicA), 2*time.Second)
			billingWithin(t, rate, span, rb.failed, charged, wall)
		})
	}
}

// Tenant crowd (delay, a queue of 2) gives each client 20 messages/s and one place of the
// queue. A runaway client on four connections, each at five times its limit, holds one place:
// its other connections' messages are refused at once, naming the client's share, and a steady
// client over its own bucket for a moment still finds a place and loses nothing. Without
// client queues the runaway would hold both places and the steady client's held message would
// be refused.
func TestNATSClientHoldsOnlyItsShareOfTheQueue(t *testing.T) {
	const tenant = "crowd"
	connect := func(name string, sink *errorSink) *nats.Conn {
		return gatewayNATS(t, tenant, tenant+"-secret", nats.Name(name),
			nats.ErrorHandler(sink.handler), nats.FlusherTimeout(30*time.Second))
	}
	runawaySink, steadySink := &errorSink{}, &errorSink{}
	subject, steadySubject := uniqueSubject("crowd.runaway"), uniqueSubject("crowd.steady")
	c, cs := collect(t, subject), collect(t, steadySubject)
	var wg sync.WaitGroup
	sent := make([]int, 4)
	for i := range sent {
		nc := connect("runaway", runawaySink)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A held connection's backlog is admitted at the client's 20/s: 200 at most, 10 s.
			onSchedule(100, 2*time.Second, func(n int) bool {
				if err := nc.Publish(subject, []byte(fmt.Sprintf("%d-%d", i, n))); err != nil {
					return false
				}
				sent[i]++
				return true
			})
			_ = nc.FlushTimeout(30 * time.Second)
		}()
	}
	// While the runaway is held: 30 messages at once, 10 more than the steady client's burst.
	time.Sleep(time.Second)
	steady := connect("steady", steadySink)
	publishBurst(t, steady, steadySubject, 30, "s")
	if err := steady.FlushTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	total := sent[0] + sent[1] + sent[2] + sent[3]
	share := fmt.Sprintf("queue limit of client runaway of tenant %s: 1 messages already held", tenant)
	_, refused := requireConservationWithin(t, "runaway", total, c, runawaySink.total, 15*time.Second)
	if n := runawaySink.count(share); n == 0 {
		t.Errorf("the runaway's connections beyond its one place were never refused for its share of the queue (%d refusals: %v)", refused, first(runawaySink.all(), 3))
	}
	requireConservation(t, "steady", 30, cs, steadySink.total)
	if n := steadySink.total(); n != 0 {
		t.Errorf("the steady client was refused %d times: %v", n, first(steadySink.all(), 3))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// Each client of tenant crowd has at most 2 requests awaiting a reply: six concurrent requests
// of one client reach the responder two at a time (the rest held, then answered), and another
// client's requests go on beside them under their own bound.
func TestNATSClientInFlightIsItsOwn(t *testing.T) {
	const tenant, perClient = "crowd", 6
	responder := directNATS(t)
	prefix := uniqueSubject("crowd.svc")
	var mu sync.Mutex
	busy, peak := map[string]int{}, map[string]int{}
	if _, err := responder.Subscribe(prefix+".*", func(m *nats.Msg) {
		go func() {
			mu.Lock()
			busy[m.Subject]++
			peak[m.Subject] = max(peak[m.Subject], busy[m.Subject])
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			busy[m.Subject]--
			mu.Unlock()
			_ = m.Respond([]byte("ok"))
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failures sync.Map
	for _, name := range []string{"caller-a", "caller-b"} {
		nc := gatewayNATS(t, tenant, tenant+"-secret", nats.Name(name))
		for i := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := nc.Request(prefix+"."+name, []byte(strconv.Itoa(i)), 10*time.Second); err != nil {
					failures.Store(name+"-"+strconv.Itoa(i), err.Error())
				}
			}()
		}
	}
	wg.Wait()
	failures.Range(func(k, v any) bool {
		t.Errorf("request %v: %v", k, v)
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("requests at the responder at once, per client: %v", peak)
	for _, name := range []string{"caller-a", "caller-b"} {
		if p := peak[prefix+"."+name]; p != 2 {
			t.Errorf("%s had %d requests at the responder at once: want its inFlight of 2", name, p)
		}
	}
}

// Client pinned of tenant crowd may hold 2 connections: its third is refused as the tenant's
// connection limit refuses one, naming the client, while other clients of the tenant connect;
// a freed place admits a new connection. On Kafka, a connection whose requests name the client
// is closed when the client has no place left.
func TestClientConnectionLimitIsItsOwn(t *testing.T) {
	const tenant = "crowd"
	connect := func(name string) (*nats.Conn, error) {
		return nats.Connect("nats://"+addr(ports.NATS), nats.UserInfo(tenant, tenant+"-secret"), nats.Name(name), nats.Timeout(5*time.Second))
	}
	var pinned []*nats.Conn
	for range 2 {
		nc, err := connect("pinned")
		if err != nil {
			t.Fatalf("pinned's connections within its limit: %v", err)
		}
		defer nc.Close()
		pinned = append(pinned, nc)
	}
	_, err := connect("pinned")
	if want := "maximum connections exceeded (connections limit of client pinned of tenant crowd: 2)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("pinned's third connection: %v, want %q", err, want)
	}
	other, err := connect("other")
	if err != nil {
		t.Fatalf("another client of the tenant meanwhile: %v", err)
	}
	other.Close()
	pinned[0].Close()
	eventually(t, 5*time.Second, "a freed place admits pinned's new connection", func() bool {
		nc, err := connect("pinned")
		if err != nil {
			return false
		}
		nc.Close()
		return true
	})

	// Kafka: connections whose requests name client.id crowd-pinned, each kept open.
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := strings.ReplaceAll(uniqueSubject("crowd-pinned"), ".", "-")
	createLogAppendTopic(t, cl, topic)
	produce := func() (string, error) {
		c, err := net.Dial("tcp", addr(ports.Kafka))
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(produceAs("crowd-pinned", 1, topic)); err != nil {
			return "", err
		}
		frame, err := readKafkaFrame(bufio.NewReader(c))
		if err != nil {
			return "", err
		}
		return produceOutcome(frame), nil
	}
	for i := range 2 {
		if outcome, err := produce(); err != nil || outcome != "ok" {
			t.Fatalf("crowd-pinned's connection %d within its limit: %s %v", i, outcome, err)
		}
	}
	if outcome, err := produce(); err == nil {
		t.Errorf("crowd-pinned's third connection was answered (%s): want it closed", outcome)
	} else {
		t.Logf("crowd-pinned's third connection: %v", err)
	}
}
