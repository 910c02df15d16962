package bench

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/natsserver"
	"github.com/weighstation/weighstation/load-tests/internal/scenario"
)

// The "Ctrl+Z test": publish at 1000 msg/s for 10 s to a nats-server that is stopped (SIGSTOP)
// for 1 s in the middle. Every message scheduled during the stall waits for its end, from 1 s
// down to 0, so 10% of all messages are delayed and the slowest 1% waited 0.9–1 s: an open-loop
// harness reports max ≥ 1 s and p99 ≈ 0.9 s. A closed-loop one would have stopped sending
// during the stall and report p99 near the normal sub-millisecond latency.
func TestStallCalibration(t *testing.T) {
	const (
		rate  = 1000
		stall = time.Second
	)
	server := natsserver.Start(t)
	plan := engine.Plan{
		Rate: rate, Arrivals: "fixed", Warmup: time.Second, Duration: 10 * time.Second,
		Connections: 2, MaxInFlight: 100_000, Drain: 5 * time.Second,
	}
	// The stall falls in the middle of the measured 10 s (which starts after the 1 s warm-up).
	go func() {
		time.Sleep(plan.Warmup + 4500*time.Millisecond)
		_ = server.Signal(syscall.SIGSTOP)
		time.Sleep(stall)
		_ = server.Signal(syscall.SIGCONT)
	}()
	s, err := Measure(context.Background(), Options{
		Scenario: "nats-pubsub", Plan: plan,
		Config:    scenario.Config{Connections: 2, Size: 64, Timeout: 5 * time.Second, RunID: "calibration"},
		Endpoints: []scenario.Endpoint{{Name: "direct", NATS: server.Addr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Targets[0]
	p := tr.LatencyMicros
	t.Logf("stall of %s at %d msg/s: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms; harness p99 lateness %.3f ms; %s",
		stall, rate, ms(p.P50), ms(p.P90), ms(p.P99), ms(p.P999), ms(p.Max), ms(s.Generator.LagMicros.P99), s.Machine)

	if tr.Sent != 10*rate || tr.Acked != tr.Sent {
		t.Fatalf("sent %d, delivered %d: want all %d (the harness must keep sending through the stall)", tr.Sent, tr.Acked, 10*rate)
	}
	// The figures must come from the stall, not from a harness that fell behind by itself.
	if lag := s.Generator.LagMicros.P99; lag > 100_000 {
		t.Fatalf("the harness itself was %.1f ms late at p99; this run cannot calibrate anything", ms(lag))
	}
	if p.Max < (stall - 50*time.Millisecond).Microseconds() {
		t.Errorf("max %.3f ms: the first message of the stall waited %s, and the harness does not show it", ms(p.Max), stall)
	}
	if p.P99 < 750_000 {
		t.Errorf("p99 %.3f ms, want ≈ 900 ms (≥ 750): the harness is omitting the messages scheduled during the stall", ms(p.P99))
	}
	if p.P99 > 1_500_000 || p.P50 > 50_000 {
		t.Errorf("p99 %.3f ms, p50 %.3f ms: beyond what a 1 s stall explains", ms(p.P99), ms(p.P50))
	}
}

func ms(us int64) float64 { return float64(us) / 1000 }
