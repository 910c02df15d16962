package e2e

import (
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// onSchedule calls send with n = 0, 1, 2, … at rate per second for d, each at its planned
// time whatever the previous call took (open loop), until d has passed or send returns false.
func onSchedule(rate float64, d time.Duration, send func(n int) bool) {
	start := time.Now()
	for n := 0; ; n++ {
		at := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
		if at.Sub(start) >= d {
			return
		}
		time.Sleep(time.Until(at))
		if !send(n) {
			return
		}
	}
}

// paced publishes at a fixed rate (open loop: the schedule never waits for the gateway) on
// conns connections for d, and returns how many messages it sent and the span from the first
// publish to the last as it happened (a loaded machine stretches the planned d). Payloads are
// padded to at least pad bytes.
func paced(t *testing.T, tenant, subject string, rate float64, conns int, d time.Duration, pad int, sink *errorSink) (int, time.Duration) {
	t.Helper()
	var ncs []*nats.Conn
	for i := 0; i < conns; i++ {
		ncs = append(ncs, tenantNATS(t, tenant, sink))
	}
	var wg sync.WaitGroup
	sent := make([]int, conns)
	first := make([]time.Time, conns)
	last := make([]time.Time, conns)
	perConn := rate / float64(conns)
	for i, nc := range ncs {
		wg.Add(1)
		go func(i int, nc *nats.Conn) {
			defer wg.Done()
			onSchedule(perConn, d, func(n int) bool {
				payload := []byte(strconv.Itoa(i) + "-" + strconv.Itoa(n) + "-")
				payload = append(payload, make([]byte, max(0, pad-len(payload)))...)
				if err := nc.Publish(subject, payload); err != nil {
					t.Errorf("publish: %v", err)
					return false
				}
				last[i] = time.Now()
				if n == 0 {
					first[i] = last[i]
				}
				sent[i]++
				return true
			})
			_ = nc.FlushTimeout(30 * time.Second)
		}(i, nc)
	}
	wg.Wait()
	total := 0
	from, to := first[0], last[0]
	for i, s := range sent {
		total += s
		from, to = minTime(from, first[i]), maxTime(to, last[i])
	}
	return total, to.Sub(from)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// restedSubject is a fresh subject with a direct subscriber counting it, after a pause that
// lets the tenant's bucket refill from earlier use.
func restedSubject(t *testing.T, prefix string) (string, *collector) {
	t.Helper()
	subject := uniqueSubject(prefix)
	c := collect(t, subject)
	time.Sleep(200 * time.Millisecond)
	return subject, c
}

// With Envoy on two workers and publishers spread over both, the delivered rate stays within
// ±5% of the configured rate at 2x and 10x overload: the bucket is shared, not per worker.
func TestNATSRateAccuracyAcrossWorkers(t *testing.T) {
	const limit, burst = 200.0, 10.0
	const window = 5 * time.Second
	for _, overload := range []float64{2, 10} {
		t.Run(strconv.Itoa(int(overload))+"x", func(t *testing.T) {
			sink := &errorSink{}
			subject, c := restedSubject(t, "accuracy")
			sent, span := paced(t, "rate-reject", subject, limit*overload, 4, window, 0, sink)
			d, _ := requireConservation(t, "accuracy", sent, c, func() int {
				return sink.count("rate limit of tenant rate-reject")
			})
			// Over the span the publishers actually took: the burst, then the rate.
			expected := limit*span.Seconds() + burst
			dev := (float64(d) - expected) / expected
			t.Logf("%.0fx overload: offered %d over %s (planned %s), delivered %d (%.1f msg/s), expected %.0f: %+.2f%%",
				overload, sent, span.Round(time.Millisecond), window, d, float64(d-int(burst))/span.Seconds(), expected, dev*100)
			if math.Abs(dev) > 0.05 {
				t.Fatalf("delivered %d, outside ±5%% of %.0f", d, expected)
			}
		})
	}
}

// In delay mode, publishers kept over the limit are slowed to it while the overload lasts, not
// held back and released in bursts: the rate delivered during the overload is the limit. 1 KiB
// messages fill the filter's carry and Envoy's buffer within a fraction of a second, so the
// connections spend the run at the bound where forwarding is hardest.
func TestNATSRateDelayAccuracyUnderSustainedOverload(t *testing.T) {
	const limit = 500.0
	const window = 4 * time.Second
	for _, overload := range []float64{2, 4} {
		t.Run(strconv.Itoa(int(overload))+"x", func(t *testing.T) {
			sink := &errorSink{}
			subject, c := restedSubject(t, "delayaccuracy")
			start := time.Now()
			sent, _ := paced(t, "delay-accuracy", subject, limit*overload, 4, window, 1024, sink)
			// The first second holds the burst; what follows is the sustained rate.
			from, to := start.Add(time.Second), start.Add(window)
			d, r := requireConservationWithin(t, "delay accuracy", sent, c, func() int {
				return sink.count("queue limit of tenant delay-accuracy")
			}, 20*time.Second)
			during := c.deliveredBetween(from, to)
			rate := float64(during) / to.Sub(from).Seconds()
			dev := (rate - limit) / limit
			t.Logf("%.0fx overload for %s: sent %d, delivered %d (refused %d); during the overload %.1f msg/s delivered: %+.2f%% of the limit",
				overload, window, sent, d, r, rate, dev*100)
			if math.Abs(dev) > 0.10 {
				t.Fatalf("delivered %.1f msg/s while held over the limit, want %.0f ±10%%", rate, limit)
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
	go func() { defer wg.Done(); sentA, _ = paced(t, "iso-a", subA, 100, 2, 3*time.Second, 0, sinkA) }()
	go func() { defer wg.Done(); sentB, _ = paced(t, "iso-b", subB, 1000, 2, 3*time.Second, 0, sinkB) }()
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
