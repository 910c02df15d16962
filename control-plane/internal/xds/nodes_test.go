package xds

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/weighstation/weighstation/control-plane/internal/tenantfeed"
)

// A node that reconnects already running the current version is sent nothing, so it never
// ACKs: the version its first request names counts as acknowledged. A NACK stands over an ACK
// of the version refused, and a later version clears it.
func TestNodeTrackerAcknowledgements(t *testing.T) {
	tr := newNodeTracker()
	node := &corev3.Node{Id: "envoy-a"}
	req := func(version, nonce string, nack bool) {
		r := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ExtensionConfigType, VersionInfo: version, ResponseNonce: nonce}
		if nack {
			r.ErrorDetail = &status.Status{Message: "refused"}
		}
		_ = tr.OnStreamRequest(1, r)
	}
	acked := func() NodeStatus { return tr.Nodes()[0] }
	req("3-abc"+gatewaySuffix+"f00", "", false)
	if n := acked(); n.AckedVersion != "3-abc" {
		t.Fatalf("a reconnecting node's version: %+v", n)
	}
	tr.OnStreamResponse(nil, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resourcev3.ExtensionConfigType, VersionInfo: "4-def" + gatewaySuffix + "f00", Nonce: "1"})
	req("3-abc"+gatewaySuffix+"f00", "1", true)
	req("4-def"+gatewaySuffix+"f00", "2", false) // Envoy's ACK of the version it refused, sent again
	if n := acked(); n.NackedVersion != "4-def" || n.AckedVersion != "4-def" {
		t.Errorf("a NACK then an ACK of one version: %+v", n)
	}
	req("5-ghi"+gatewaySuffix+"f00", "3", false)
	if n := acked(); n.NackedVersion != "" || n.AckedVersion != "5-ghi" {
		t.Errorf("a later version acknowledged: %+v", n)
	}
}

// A node's version moves with its workers' polls of the tenant feed once every live worker
// runs it; a worker that stopped polling no longer holds it back; views of the node from two
// control planes merge each worker's latest poll.
func TestWorkersPollsAcknowledgeTheFeedsVersions(t *testing.T) {
	tr := newNodeTracker()
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-a"},
		TypeUrl: resourcev3.ExtensionConfigType, VersionInfo: "3-abc" + gatewaySuffix + "f00"})
	acked := func() string { return tr.Nodes()[0].AckedVersion }
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "3-abc"})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "3-abc"})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "4-def"})
	if v := acked(); v != "3-abc" {
		t.Errorf("one worker of two on 4-def: acknowledged %s", v)
	}
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "4-def"})
	if v := acked(); v != "4-def" {
		t.Errorf("both workers on 4-def: acknowledged %s", v)
	}

	n := tr.Nodes()[0]
	n.Workers = append(n.Workers, Worker{Token: "3", Version: "5-ghi", Seen: time.Now().Add(-2 * workerLive)})
	if Settle(&n, time.Now()) || len(n.Workers) != 2 {
		t.Errorf("a worker gone silent counted: %+v", n)
	}
	peer := NodeStatus{ID: "envoy-a", Workers: []Worker{
		{Token: "1", Version: "6-jkl", Seen: time.Now()},
		{Token: "2", Version: "6-jkl", Seen: time.Now()},
	}}
	n.Workers = MergeWorkers(n.Workers, peer.Workers)
	if !Settle(&n, time.Now()) || n.AckedVersion != "6-jkl" {
		t.Errorf("workers' later polls at another control plane: %+v", n)
	}
}

// A node connected here that acknowledged a filter configuration a while ago but whose workers
// never polled the tenant feed is sent it again, at most nackResends times; one whose workers
// poll at another control plane (the merged view) is not.
func TestASilentNodeIsSentItsConfigurationAgain(t *testing.T) {
	s := NewServer(Gateway{Reports: &Reports{Address: "127.0.0.1:1"}})
	_ = s.nodes.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-a"},
		TypeUrl: resourcev3.ExtensionConfigType, VersionInfo: "3-abc" + gatewaySuffix + "f00"})
	s.nodes.nodes["envoy-a"].AckedAt = time.Now().Add(-2 * silentAfter)
	polled := []NodeStatus{{ID: "envoy-a", Workers: []Worker{{Token: "1", Version: "3-abc", Seen: time.Now()}}}}
	s.HealSilent(polled)
	if s.resent != 0 {
		t.Errorf("a node whose workers poll another replica was sent its configuration again")
	}
	for range nackResends + 2 {
		s.HealSilent([]NodeStatus{{ID: "envoy-a"}})
	}
	if s.resent != nackResends {
		t.Errorf("a silent node: sent again %d times, want %d", s.resent, nackResends)
	}
}
