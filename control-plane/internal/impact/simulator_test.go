package impact

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// module is the replay module `make wasm` builds.
func module(t *testing.T) *Simulator {
	t.Helper()
	root := os.Getenv("WEIGHSTATION_ROOT")
	if root == "" {
		root, _ = filepath.Abs("../../..")
	}
	path := filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_impact.wasm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not built: run make wasm (make test builds it first)", path)
	}
	s, err := Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func u64(v uint64) *uint64 { return &v }

// The module replays through the filter's GCRA: 300 messages in a second against 100/s with a
// burst of 10 admit the rate and the burst, once per call, the same every time.
func TestReplayRunsTheFiltersLimiter(t *testing.T) {
	s := module(t)
	trace := Trace{
		Limits: map[string]any{"messagesPerSecond": 100, "burstMessages": 10},
		Reject: true,
		Seconds: []Second{
			{StartMs: 1_000_000, Messages: 50, Bytes: 5000},
			{StartMs: 1_001_000, Messages: 300, Bytes: 30000},
		},
	}
	first, err := s.Replay(context.Background(), trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].Admitted != 50 || first[1].Admitted+first[1].RefusedRate != 300 ||
		first[1].Admitted < 100 || first[1].Admitted > 111 {
		t.Fatalf("outcomes %+v", first)
	}
	again, err := s.Replay(context.Background(), trace)
	if err != nil || again[1] != first[1] {
		t.Errorf("a second replay: %+v (%v), want %+v", again, err, first)
	}
	if _, err := s.Replay(context.Background(), Trace{Limits: "not limits"}); err == nil {
		t.Error("an unreadable trace is not an error")
	}
}
