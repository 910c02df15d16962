package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve runs Routes for b on addr (host:0) and returns its address.
func serve(t *testing.T, addr string, b *Book, relay *Relay) string {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	Routes(mux, b, Sinks{Relay: relay, Limits: func(_, _ string) (Limits, bool) { return Limits{}, false }})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String()
}

// A report an Envoy sends to one control plane reaches its peer.
func TestReportsReachEveryControlPlane(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	peerBook := New(10, DefaultMinutes, DefaultSeconds)
	// The peer listens on another loopback address than this host's own (127.0.0.1), as a
	// pod of the headless Service would.
	peer := serve(t, "127.0.0.2:0", peerBook, nil)
	host, port, _ := net.SplitHostPort(peer)
	p, _ := net.LookupPort("tcp", port)
	relay := &Relay{Peers: func(ctx context.Context) ([]string, error) { return Peers(ctx, host, p) }, Client: &http.Client{}, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go relay.Run(ctx)
	own := serve(t, "127.0.0.1:0", New(10, DefaultMinutes, DefaultSeconds), relay)

	body, _ := json.Marshal(Report{Replica: "envoy-a", Worker: 1, AtMs: 1000,
		Decisions: []Decision{{Tenant: "acme", Protocol: "nats", Limit: "rate", Decision: "refused", AtMs: time.Now().UnixMilli()}}})
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The relay resolves its peers when it starts: until then a report is not passed on.
		resp, err := http.Post("http://"+own+"/v1/report", "application/json", bytes.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("report: %v %v", err, resp)
		}
		resp.Body.Close()
		if got, _ := peerBook.Decisions(Filter{}, -1); len(got) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer never received the report")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
