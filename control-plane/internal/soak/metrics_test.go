package soak

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A counter that reads lower than before was reset by an Envoy restart: what it had counted is
// kept, so the soak's total spans every Envoy it ran. A gauge is its latest value.
func TestScraperKeepsCountsAcrossEnvoyRestarts(t *testing.T) {
	readings := []struct{ refused, depth int }{{10, 4}, {15, 2}, {3, 0}, {5, 1}}
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := readings[i]
		fmt.Fprintf(w, "# TYPE weighstation_messages_refused counter\n")
		fmt.Fprintf(w, "weighstation_messages_refused{protocol=\"nats\",reason=\"rate\",tenant=\"a\"} %d\n", r.refused)
		fmt.Fprintf(w, "weighstation_messages_refused{protocol=\"nats\",reason=\"queue\",tenant=\"a\"} 1\n")
		fmt.Fprintf(w, "weighstation_queue_depth{protocol=\"nats\",tenant=\"a\"} %d\n", r.depth)
		fmt.Fprintf(w, "envoy_server_uptime 12\n")
	}))
	defer srv.Close()
	s := NewScraper(srv.Listener.Addr().(*net.TCPAddr).Port)
	for i = range readings {
		if err := s.Scrape(); err != nil {
			t.Fatal(err)
		}
	}
	// 10 → 15 (+1 by reason queue each time), reset, 3 → 5: 16 before the restart, 6 after.
	if got := s.Total("weighstation_messages_refused", "nats", "a"); got != 22 {
		t.Errorf("refused over the run: %v, want 22", got)
	}
	if got := s.Total("weighstation_queue_depth", "nats", "a"); got != 1 {
		t.Errorf("queue depth: %v, want the latest, 1", got)
	}
	if got := s.Sum("weighstation_queue_depth"); got != 1 {
		t.Errorf("queue depth summed: %v", got)
	}
}
