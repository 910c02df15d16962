package xds

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
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
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "3-abc", At: time.Now()})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "3-abc", At: time.Now()})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "4-def", At: time.Now()})
	if v := acked(); v != "3-abc" {
		t.Errorf("one worker of two on 4-def: acknowledged %s", v)
	}
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "4-def", At: time.Now()})
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

// Workers that run one policy but were told different replica counts (control plane replicas
// counting the gateway apart, for a moment) have acknowledged the policy, not the snapshot.
func TestWorkersOfOnePolicyAndTwoCountsAcknowledgeThePolicy(t *testing.T) {
	tr := newNodeTracker()
	now := time.Now()
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "3-abc", Replicas: 2, At: now.Add(1 * time.Millisecond)})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "3-abc", Replicas: 2, At: now.Add(2 * time.Millisecond)})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "4-def", Replicas: 3, At: now.Add(3 * time.Millisecond)})
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "4-def", Replicas: 2, At: now.Add(4 * time.Millisecond)})
	if n := tr.Nodes()[0]; n.AckedVersion != "4-def" || n.AckedSnapshot != "3-abc"+replicasSuffix+"2" {
		t.Errorf("one policy, two counts: acknowledged %s, snapshot %s", n.AckedVersion, n.AckedSnapshot)
	}
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "4-def", Replicas: 3, At: now.Add(5 * time.Millisecond)})
	if n := tr.Nodes()[0]; n.AckedSnapshot != "4-def"+replicasSuffix+"3" {
		t.Errorf("one policy, one count: snapshot %s", n.AckedSnapshot)
	}
}

// A worker whose poll ended is gone unless it polls again within repollWithin (Envoy replaced
// its VM); the end of a poll it had dropped for a newer one leaves it live.
func TestAWorkerThatDoesNotPollAgainIsSoonGone(t *testing.T) {
	tr := newNodeTracker()
	began := time.Now()
	first := tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "3-abc", At: began}
	tr.Polled(first)
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "3-abc", At: began})
	second := first
	second.At = began.Add(time.Millisecond)
	tr.Polled(second)
	tr.PollEnded(first)
	n := tr.Nodes()[0]
	Settle(&n, began.Add(repollWithin+time.Second))
	if len(n.Workers) != 2 {
		t.Errorf("the end of a dropped poll made its worker gone: %+v", n.Workers)
	}

	tr.PollEnded(tenantfeed.Poll{Node: "envoy-a", Worker: "2", At: began})
	n = tr.Nodes()[0]
	Settle(&n, time.Now().Add(repollWithin/2))
	if len(n.Workers) != 2 {
		t.Errorf("a worker answered a moment ago is gone: %+v", n.Workers)
	}
	Settle(&n, time.Now().Add(repollWithin+time.Second))
	if len(n.Workers) != 1 || n.Workers[0].Token != "1" {
		t.Errorf("a worker answered and silent since counted: %+v", n.Workers)
	}
}

// A worker that hung up unanswered (a short-lived instance on Envoy's main thread) is gone at
// once: the next change is acknowledged as soon as the workers that stay run it, not
// repollWithin later.
func TestAWorkerThatHungUpIsGoneAtOnce(t *testing.T) {
	tr := newNodeTracker()
	changes := 0
	tr.onChange = func() { changes++ }
	now := time.Now()
	checker := tenantfeed.Poll{Node: "envoy-a", Worker: "9", Protocol: compile.Kafka, Applied: "1-abc", Replicas: 1, At: now}
	tr.Polled(checker)
	for _, w := range []string{"1", "2"} {
		tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: w, Protocol: compile.Kafka, Applied: "2-def", Replicas: 1, At: now})
	}
	if n := tr.Nodes()[0]; n.AckedVersion != "1-abc" {
		t.Fatalf("workers on two policies: acknowledged %s, want the first's still", n.AckedVersion)
	}
	before := changes
	checker.Abandoned = true
	tr.PollEnded(checker)
	n := tr.Nodes()[0]
	if n.AckedVersion != "2-def" || len(n.Workers) != 2 {
		t.Errorf("after the checking instance hung up: acknowledged %s by %d workers, want 2-def by the 2 that stay", n.AckedVersion, len(n.Workers))
	}
	if changes == before {
		t.Error("the acknowledgement moved and nobody was told")
	}
}

// A worker answered with a delta and silent since counts, after toldAfter, as running what it
// was told: one whose VM Envoy replaced as it was answered does not hold the node's
// acknowledgement back.
func TestAWorkerAnsweredCountsAsRunningWhatItWasTold(t *testing.T) {
	tr := newNodeTracker()
	now := time.Now()
	stale := tenantfeed.Poll{Node: "envoy-a", Worker: "1", Applied: "1-abc", Replicas: 1, At: now}
	tr.Polled(stale)
	tr.Polled(tenantfeed.Poll{Node: "envoy-a", Worker: "2", Applied: "2-def", Replicas: 3, At: now})
	if n := tr.Nodes()[0]; n.AckedVersion != "1-abc" {
		t.Fatalf("a second worker on another policy: acknowledged %s, want the first's still", n.AckedVersion)
	}
	stale.Told.Version, stale.Told.Replicas = "2-def", 3
	tr.PollEnded(stale)
	if n := tr.Nodes()[0]; n.AckedVersion != "1-abc" {
		t.Errorf("the stale worker told 2-def a moment ago: acknowledged %s, want 1-abc until it installed it", n.AckedVersion)
	}
	n := tr.Nodes()[0]
	if !Settle(&n, time.Now().Add(toldAfter)) || n.AckedVersion != "2-def" || n.AckedSnapshot != "2-def"+replicasSuffix+"3" {
		t.Errorf("the stale worker told 2-def and silent since: acknowledged %s, snapshot %s", n.AckedVersion, n.AckedSnapshot)
	}
}

// A node connected here that acknowledged its filter configurations a while ago but for one
// of whose protocols no worker polls the tenant feed (that filter failed to load) is sent them
// again, at most nackResends times; one whose workers of every protocol poll, at another control
// plane too (the merged view), is not.
func TestASilentFilterIsSentItsConfigurationAgain(t *testing.T) {
	s := NewServer(Gateway{Reports: &Reports{Address: "127.0.0.1:1"}})
	s.filtered = []compile.Protocol{compile.NATS, compile.Kafka}
	_ = s.nodes.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-a"},
		TypeUrl: resourcev3.ExtensionConfigType, VersionInfo: "3-abc" + gatewaySuffix + "f00"})
	s.nodes.nodes["envoy-a"].AckedAt = time.Now().Add(-2 * silentAfter)
	worker := func(p compile.Protocol, seen time.Time) Worker {
		return Worker{Token: "1", Protocol: p, Version: "3-abc", Seen: seen}
	}
	s.HealSilent([]NodeStatus{{ID: "envoy-a", Workers: []Worker{worker(compile.NATS, time.Now()), worker(compile.Kafka, time.Now())}}})
	if s.resent != 0 {
		t.Errorf("a node whose workers of both protocols poll another replica was sent its configuration again")
	}
	for _, tc := range []struct {
		name    string
		workers []Worker
	}{
		{"no worker polls", nil},
		{"no Kafka worker polls", []Worker{worker(compile.NATS, time.Now())}},
		{"the Kafka worker went silent", []Worker{worker(compile.NATS, time.Now()), worker(compile.Kafka, time.Now().Add(-2*workerLive))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.resent = 0
			for range nackResends + 2 {
				s.HealSilent([]NodeStatus{{ID: "envoy-a", Workers: tc.workers}})
			}
			if s.resent != nackResends {
				t.Errorf("sent again %d times, want %d", s.resent, nackResends)
			}
		})
	}
}

// A configuration sent again differs from the one before in its filter configurations' bytes,
// not only in its version: Envoy skips a filter configuration equal to the last it was sent,
// even one that failed to load, and would leave that filter failed.
func TestAConfigurationSentAgainIsBuiltAnew(t *testing.T) {
	g := gateway
	g.Reports = &Reports{Address: "127.0.0.1:1"}
	s := NewServer(g)
	if err := s.Publish(examples(t), "1-abc"); err != nil {
		t.Fatal(err)
	}
	filters := func() (string, map[string]string) {
		sn, err := s.cache.GetSnapshot(groupKey(0))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for name, r := range sn.GetResources(resourcev3.ExtensionConfigType) {
			out[name] = r.(*corev3.TypedExtensionConfig).GetTypedConfig().String()
		}
		return sn.GetVersion(resourcev3.ExtensionConfigType), out
	}
	v1, before := filters()
	s.mu.Lock()
	s.resent = 1
	err := s.publishLocked()
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	v2, after := filters()
	if v1 == v2 || len(before) == 0 {
		t.Fatalf("versions %s → %s, %d filter configurations", v1, v2, len(before))
	}
	for name := range before {
		if before[name] == after[name] {
			t.Errorf("%s sent again unchanged: Envoy would skip it", name)
		}
	}
}
