package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// controlPlaneUp reports whether the control plane answers /healthz.
func controlPlaneUp() bool {
	c := http.Client{Timeout: 200 * time.Millisecond}
	resp, err := c.Get("http://" + addr(ports.ControlPlane) + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Killed (SIGKILL), the control plane takes nothing with it: Envoy keeps enforcing the policy
// it last acknowledged — old and new connections alike — and once the control plane is back
// (the stack starts it again, as its Deployment would) Envoy reconnects, acknowledges the
// active version and takes a policy written while it was down.
func TestEnvoyKeepsEnforcingWhileTheControlPlaneIsDown(t *testing.T) {
	restarts := stack.ControlPlane.Restarts()
	before := activeVersion(t)
	release, err := stack.ControlPlane.KillAndHold()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	eventually(t, 2*time.Second, "the control plane is down", func() bool { return !controlPlaneUp() })

	// While it is down: a new connection of a rate-reject tenant (burst 10) is still limited.
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-reject", sink)
	subject := uniqueSubject("cpdown")
	c := collect(t, subject)
	const sent = 60
	publishBurst(t, nc, subject, sent, "m")
	refusedWhileDown := 0
	eventually(t, 5*time.Second, "every message delivered or refused", func() bool {
		refusedWhileDown = sink.count("rate limit of tenant rate-reject")
		return c.delivered()+refusedWhileDown == sent
	})
	// And a policy written now is for the control plane that comes back.
	writePolicy(t, "cp-down.yaml", `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: written-while-down
spec:
  tenant: written-while-down
  identify:
    nats: { users: [written-while-down] }
  limits:
    rate: { messagesPerSecond: 5 }
`)
	t.Cleanup(func() { removePolicy(t, "cp-down.yaml") })
	t.Logf("control plane down: %d of %d refused on a new connection", refusedWhileDown, sent)
	if refusedWhileDown == 0 || c.delivered() > 20 {
		t.Errorf("without its control plane the gateway let %d of %d through (burst 10)", c.delivered(), sent)
	}
	if controlPlaneUp() {
		t.Fatal("the control plane came back while the test held it down: the checks above did not run without it")
	}
	release()

	took := eventually(t, 30*time.Second, "the control plane is back and every Envoy acknowledged a new version", func() bool {
		return controlPlaneUp() && activeVersion(t) != before && stack.WaitInSync(100*time.Millisecond) == nil
	})
	if stack.ControlPlane.Restarts() != restarts+1 {
		t.Errorf("the control plane was started again %d times", stack.ControlPlane.Restarts()-restarts)
	}
	st, err := stack.ControlPlaneStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if !n.Connected || n.AckedVersion != st.Active.Version {
			t.Errorf("node %s: connected %v, acknowledged %q, active %q", n.ID, n.Connected, n.AckedVersion, st.Active.Version)
		}
	}
	t.Logf("back and in sync %s after the kill, on version %s (was %s)", took.Round(time.Millisecond), st.Active.Version, before)
}

// Killed (SIGKILL) and started again, nats-server takes its clients' connections down with it:
// the gateway closes them and gives back their places in the tenant's connection count, and
// the clients reconnect through the gateway and publish again — nothing is leaked.
func TestNATSServerRestartReleasesAndReconnects(t *testing.T) {
	const tenant, n = "iso-a", 3
	labels := map[string]string{"protocol": "nats", "tenant": tenant}
	base := metric(t, "weighstation_connections_active", labels)
	var conns []*nats.Conn
	var reconnects atomic.Int64
	for range n {
		conns = append(conns, gatewayNATS(t, tenant, tenant+"-secret",
			nats.ReconnectWait(200*time.Millisecond), nats.MaxReconnects(-1),
			nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) })))
	}
	eventually(t, 5*time.Second, "the connections are counted", func() bool {
		return metric(t, "weighstation_connections_active", labels) == base+n
	})
	restarts := stack.NATSServer.Restarts()
	if err := stack.NATSServer.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 30*time.Second, "every client reconnected through the gateway", func() bool {
		return reconnects.Load() == n
	})
	eventually(t, 5*time.Second, "the tenant's connection count is its live connections", func() bool {
		return metric(t, "weighstation_connections_active", labels) == base+n
	})
	if stack.NATSServer.Restarts() != restarts+1 {
		t.Errorf("nats-server was started again %d times", stack.NATSServer.Restarts()-restarts)
	}
	for i, nc := range conns {
		publishAndReceive(t, nc, fmt.Sprintf("%s.%d", uniqueSubject("nats-restart"), i), 5)
	}
	t.Logf("nats-server killed: %d clients reconnected through the gateway in %s; connections counted %v", n,
		took.Round(time.Millisecond), metric(t, "weighstation_connections_active", labels)-base)
}

// Killed (SIGKILL) and started again, the Kafka broker drops every connection: the gateway
// releases them (connection count, in-flight requests), and producers sending through the
// gateway reconnect and deliver every record once the broker is back: an idempotent producer
// (franz-go's default) and an acks=1 one, both with kgo.AlwaysRetryEOF, which docs/kafka.md tells
// franz-go users to set. (Without it franz-go takes the EOF of a connection Envoy accepted while
// the broker was down for a misconfiguration and fails the records: 138 of 150 here.)
func TestKafkaBrokerRestartLosesNothing(t *testing.T) {
	const tenant = "iso-b"
	labels := map[string]string{"protocol": "kafka", "tenant": tenant}
	base := metric(t, "weighstation_connections_active", labels)
	type producer struct {
		name, topic   string
		cl            *kgo.Client
		acked, failed atomic.Int64
		idempotent    bool
		lastFailure   atomic.Value
	}
	common := func(topic string) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(addr(ports.Kafka)), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.RecordDeliveryTimeout(90 * time.Second), kgo.MetadataMinAge(250 * time.Millisecond)}
	}
	producers := []*producer{
		{name: "idempotent", topic: "broker-restart", idempotent: true},
		{name: "acks=1", topic: "broker-restart-acks1"},
	}
	for _, p := range producers {
		opts := append(common(p.topic), kgo.ClientID(tenant+"-restart-"+strconv.FormatBool(p.idempotent)), kgo.AlwaysRetryEOF())
		if !p.idempotent {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		p.cl = cl
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(n int) {
		for range n {
			for _, p := range producers {
				p.cl.Produce(context.Background(), &kgo.Record{Value: []byte("x")}, func(_ *kgo.Record, err error) {
					if err != nil {
						p.failed.Add(1)
						p.lastFailure.Store(err.Error())
					} else {
						p.acked.Add(1)
					}
				})
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	restarts := stack.Kafka.Restarts()
	produce(50)
	if err := stack.Kafka.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	produce(100) // into the outage: buffered by the client, retried
	start := time.Now()
	for _, p := range producers {
		if err := p.cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("Kafka killed: %s producer: %d records acknowledged, %d failed (%v); flushed %s after the outage began",
			p.name, p.acked.Load(), p.failed.Load(), p.lastFailure.Load(), time.Since(start).Round(time.Millisecond))
		if p.acked.Load() != 150 || p.failed.Load() != 0 {
			t.Errorf("%s: of 150 records %d acknowledged, %d failed", p.name, p.acked.Load(), p.failed.Load())
		}
		p.cl.Close()
	}
	if stack.Kafka.Restarts() != restarts+1 {
		t.Errorf("Kafka was started again %d times", stack.Kafka.Restarts()-restarts)
	}
	if stored := countRecords(t, "broker-restart", 151); stored != 151 {
		t.Errorf("the idempotent producer's topic holds %d records, want the warm-up and the 150, once each", stored)
	}
	// acks=1 is at-least-once: a retry of a request the broker had stored before it died is
	// stored again.
	if stored := countRecords(t, "broker-restart-acks1", 151); stored < 151 {
		t.Errorf("the acks=1 producer's topic holds %d records, want at least the warm-up and the 150", stored)
	} else {
		t.Logf("the acks=1 topic holds %d records for 151 sent (%d duplicates)", stored, stored-151)
	}
	eventually(t, 10*time.Second, "the tenant's connections and in-flight requests are released", func() bool {
		return metric(t, "weighstation_connections_active", labels) == base && metric(t, "weighstation_in_flight", labels) == 0
	})
}

// countRecords reads topic from its start, directly from the broker, until it has want records
// and a further half second brings no more (or 15 s have passed), and returns how many it read.
func countRecords(t *testing.T, topic string, want int) int {
	t.Helper()
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		wait := time.Second
		if n >= want {
			wait = 500 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		fetches := cl.PollFetches(ctx)
		cancel()
		got := fetches.NumRecords()
		n += got
		if n >= want && got == 0 {
			break
		}
	}
	return n
}

// The clients Kafka users run most, Apache Kafka's Java producer (idempotent, acks=all) and
// librdkafka (acks=all), ride through a broker restart behind the gateway with their default
// settings: a connection Envoy accepted while the broker was down, and closed, is to them a
// disconnect like any other. Every record is acknowledged once the broker is back and stored.
func TestKafkaJavaAndLibrdkafkaRideThroughABrokerRestart(t *testing.T) {
	const rate, d, size = 20.0, 20 * time.Second, 100
	type result struct {
		name, topic string
		run         clientRun
	}
	results := make(chan result, 2)
	go func() {
		results <- result{"java", "restart-java", javaProducer(t, "restart-java", "size-dry-restart-java", rate, d, size)}
	}()
	go func() {
		// librdkafka's message.timeout.ms left at a default-like 2 min (the probe's is 15 s).
		run := librdkafkaProducerWith(t, addr(ports.Kafka), map[string]string{"message.timeout.ms": "120000"},
			"restart-librdkafka", "size-dry-restart-rdkafka", rate, d, size)
		results <- result{"librdkafka", "restart-librdkafka", run}
	}()
	restarts := stack.Kafka.Restarts()
	time.Sleep(5 * time.Second) // both producing
	if err := stack.Kafka.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var r result
		select {
		case r = <-results:
		case <-time.After(3 * time.Minute): // a probe that failed to run ends its goroutine
			t.Fatal("a producer probe did not report")
		}
		t.Logf("%s across a broker restart: sent %d, acknowledged %d, failed %d %s", r.name, r.run.sent, r.run.acked, r.run.failed, r.run.errors)
		if r.run.sent == 0 || r.run.acked != r.run.sent || r.run.failed != 0 {
			t.Errorf("%s: of %d records %d acknowledged, %d failed (%s)", r.name, r.run.sent, r.run.acked, r.run.failed, r.run.errors)
		}
		// The Java producer is idempotent: each record once. librdkafka is not by default: a
		// retry of a request the broker stored before it died is stored again.
		stored := countRecords(t, r.topic, r.run.sent)
		t.Logf("%s: the topic holds %d records", r.name, stored)
		if stored < r.run.sent || (r.name == "java" && stored != r.run.sent) {
			t.Errorf("%s: the topic holds %d records of %d sent", r.name, stored, r.run.sent)
		}
	}
	if stack.Kafka.Restarts() != restarts+1 {
		t.Errorf("Kafka was started again %d times", stack.Kafka.Restarts()-restarts)
	}
}

// A client that announces a 2 GiB payload and streams it regardless is closed as soon as
// nats-server has refused the size: the filter forwards none of the payload, and the gateway
// does not go on reading it for as long as the client cares to send.
func TestNATSClientStreamingAnOversizedPayloadIsClosed(t *testing.T) {
	raw := dialRawNATS(t, `{"verbose":false,"user":"size-enforce","pass":"size-enforce-secret"}`)
	raw.send("PUB size.stream 2147483648\r\n")
	chunk := make([]byte, 64<<10)
	written := 0
	start := time.Now()
	var werr error
	for time.Since(start) < 10*time.Second {
		_ = raw.conn.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := raw.conn.Write(chunk)
		written += n
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue // pushed back, not closed
		}
		if err != nil {
			werr = err
			break
		}
	}
	t.Logf("the gateway stopped a 2 GiB stream after %d bytes, %s: %v", written, time.Since(start).Round(time.Millisecond), werr)
	if werr == nil {
		t.Fatalf("10 s and %d bytes into a refused 2 GiB payload, the gateway still reads it", written)
	}
}
