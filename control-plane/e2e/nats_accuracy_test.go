package e2e

import (
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// paced publishes at a fixed rate (open loop: the schedule never waits for the gateway) on
// conns connections for d, and returns how many messages it sent.
func paced(t *testing.T, tenant, subject string, rate float64, conns int, d time.Duration, sink *errorSink) int {
	t.Helper()
	var ncs []*nats.Conn
	for i := 0; i < conns; i++ {
		ncs = append(ncs, tenantNATS(t, tenant, sink))
	}
	var wg sync.WaitGroup
	sent := make([]int, conns)
	perConn := rate / float64(conns)
	for i, nc := range ncs {
		wg.Add(1)
		go func(i int, nc *nats.Conn) {
			defer wg.Done()
			start := time.Now()
			for n := 0; ; n++ {
				at := start.Add(time.Duration(float64(n) / perConn * float64(time.Second)))
				if at.Sub(start) >= d {
					break
				}
				time.Sleep(time.Until(at))
				if err := nc.Publish(subject, []byte(strconv.Itoa(i)+"-"+strconv.Itoa(n))); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				sent[i]++
			}
			_ = nc.FlushTimeout(30 * time.Second)
		}(i, nc)
	}
	wg.Wait()
	total := 0
	for _, s := range sent {
		total += s
	}
	return total
}

// With Envoy on two workers and publishers spread over both, the delivered rate stays within
// ±5% of the configured rate at 2x and 10x overload: the bucket is shared, not per worker.
func TestNATSRateAccuracyAcrossWorkers(t *testing.T) {
	const limit, burst = 200.0, 10.0
	const window = 5 * time.Second
	for _, overload := range []float64{2, 10} {
		t.Run(strconv.Itoa(int(overload))+"x", func(t *testing.T) {
			sink := &errorSink{}
			subject := uniqueSubject("accuracy")
			c := collect(t, subject)
			time.Sleep(200 * time.Millisecond) // let the bucket refill from earlier use
			sent := paced(t, "rate-reject", subject, limit*overload, 4, window, sink)
			d, _ := requireConservation(t, "accuracy", sent, c, func() int {
				return sink.count("rate limit of tenant rate-reject")
			})
			expected := limit*window.Seconds() + burst
			dev := (float64(d) - expected) / expected
			t.Logf("%.0fx overload: offered %d over %s, delivered %d (%.1f msg/s), expected %.0f: %+.2f%%",
				overload, sent, window, d, float64(d-int(burst))/window.Seconds(), expected, dev*100)
			if math.Abs(dev) > 0.05 {
				t.Fatalf("delivered %d, outside ±5%% of %.0f", d, expected)
			}
		})
	}
}

// Tenant B flooding at 10x its limit does not cost tenant A (within its limit) a single message.
func TestNATSNoisyNeighbourIsolation(t *testing.T) {
	sinkA, sinkB := &errorSink{}, &errorSink{}
	subA, subB := uniqueSubject("iso.a"), uniqueSubject("iso.b")
	ca, cb := collect(t, subA), collect(t, subB)
	var wg sync.WaitGroup
	var sentA, sentB int
	wg.Add(2)
	go func() { defer wg.Done(); sentA = paced(t, "iso-a", subA, 100, 2, 3*time.Second, sinkA) }()
	go func() { defer wg.Done(); sentB = paced(t, "iso-b", subB, 1000, 2, 3*time.Second, sinkB) }()
	wg.Wait()
	requireConservation(t, "tenant A", sentA, ca, func() int { return sinkA.total() })
	_, refusedB := requireConservation(t, "tenant B", sentB, cb, func() int { return sinkB.count("rate limit of tenant iso-b") })
	if sinkA.total() != 0 || ca.delivered() != sentA {
		t.Fatalf("tenant A lost messages to B's flood: sent %d, delivered %d, errors %d", sentA, ca.delivered(), sinkA.total())
	}
	if refusedB == 0 {
		t.Fatal("tenant B was not limited")
	}
	t.Logf("A: %d/%d delivered; B at 10x: %d delivered, %d refused", ca.delivered(), sentA, cb.delivered(), refusedB)
}
