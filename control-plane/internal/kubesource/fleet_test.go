package kubesource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// The replica writing status counts the gateways of every replica it can reach over HTTP, as
// each serves them at GatewaysPath; a gateway connected anywhere is connected.
func TestFleetCountsEveryReplicasGateways(t *testing.T) {
	own := []xds.NodeStatus{{ID: "envoy-a", Connected: true, AckedVersion: "3-h3"}, {ID: "envoy-b", Connected: false, AckedVersion: "1-h1"}}
	peer := httptest.NewServer(GatewaysHandler(func() []xds.NodeStatus {
		return []xds.NodeStatus{{ID: "envoy-b", Connected: true, AckedVersion: "2-h2"}, {ID: "envoy-c", Connected: true, AckedVersion: "3-h3"}}
	}))
	defer peer.Close()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer silent.Close()
	f := &Fleet{
		Own:     func() []xds.NodeStatus { return own },
		Peers:   func(context.Context) ([]string, error) { return []string{hostPort(peer), hostPort(silent)}, nil },
		Client:  &http.Client{},
		Timeout: 200 * time.Millisecond,
	}
	start := time.Now()
	nodes, err := f.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a silent peer held the count up for %s", took)
	}
	got := map[string]xds.NodeStatus{}
	for _, n := range nodes {
		got[n.ID] = n
	}
	if len(nodes) != 3 || !got["envoy-b"].Connected || got["envoy-b"].AckedVersion != "2-h2" || !got["envoy-c"].Connected {
		t.Errorf("merged gateways: %+v", nodes)
	}
	c := programmed(verdict{Generation: 1, Reason: ReasonAccepted, InForce: 1}, []string{"h3"}, nodes, 1)
	if c.Message != "2/3 gateways" {
		t.Errorf("Programmed over the fleet: %q, want 2/3 gateways (envoy-b, on the peer, has not acknowledged version 3)", c.Message)
	}
}

func hostPort(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
