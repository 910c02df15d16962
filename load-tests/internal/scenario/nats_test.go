package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/natsserver"
)

// Each NATS scenario completes every operation against a real nats-server, and its latencies
// are plausible for loopback.
func TestNATSScenariosAgainstNATSServer(t *testing.T) {
	server := natsserver.Start(t, "-js")
	for _, name := range []string{"nats-pubsub", "nats-request", "jetstream"} {
		t.Run(name, func(t *testing.T) {
			plan := engine.Plan{Rate: 500, Arrivals: "fixed", Duration: time.Second, Connections: 2, MaxInFlight: 10_000, Drain: 5 * time.Second}
			e, err := engine.New(plan, []string{"direct"})
			if err != nil {
				t.Fatal(err)
			}
			target, err := Open(name, Config{Connections: 2, Size: 64, Timeout: 5 * time.Second, RunID: "test"}, Endpoint{Name: "direct", NATS: server.Addr}, e)
			if err != nil {
				t.Fatal(err)
			}
			r := e.Run(context.Background(), []engine.Target{target}, nil)
			target.Close()
			tr := r.Targets[0]
			if tr.Sent != 500 || tr.Acked != 500 || tr.Failed+tr.Refused+tr.Timeouts != 0 {
				t.Fatalf("sent %d acked %d failed %d refused %d timeouts %d %q", tr.Sent, tr.Acked, tr.Failed, tr.Refused, tr.Timeouts, tr.ErrorSamples)
			}
			if p50 := tr.Latency.ValueAtQuantile(50); p50 > 50_000 {
				t.Errorf("p50 %d µs on loopback", p50)
			}
			if r.Stray != 0 {
				t.Errorf("%d stray completions", r.Stray)
			}
		})
	}
}

func TestOpenRefusesWhatCannotRun(t *testing.T) {
	if _, err := Open("mqtt", Config{Connections: 1, Size: 64}, Endpoint{}, nil); err == nil {
		t.Error("unknown scenario opened")
	}
	if _, err := Open("nats-pubsub", Config{Connections: 1, Size: 4}, Endpoint{}, nil); err == nil {
		t.Error("a 4-byte payload cannot carry the sequence number, yet opened")
	}
}
