package xds

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/tenantfeed"
)

// NodeStatus is what one Envoy node has done with the policy versions it was sent.
type NodeStatus struct {
	ID           string `json:"id"`
	Connected    bool   `json:"connected"`
	AckedVersion string `json:"ackedVersion,omitempty"`
	// AckedSnapshot is the acknowledged version with what else it depends on (the live replica
	// count, when a tenant's limits are global).
	AckedSnapshot string    `json:"ackedSnapshot,omitempty"`
	NackedVersion string    `json:"nackedVersion,omitempty"`
	NackReason    string    `json:"nackReason,omitempty"`
	LastSeen      time.Time `json:"lastSeen"`
	// AckedAt is when the node last acknowledged a filter configuration (ECDS).
	AckedAt time.Time `json:"ackedAt,omitzero"`
	// Workers are the node's filter workers that poll the tenant feed (internal/tenantfeed),
	// each with the version it runs: once every live one runs the same, that is AckedVersion.
	Workers []Worker `json:"workers,omitempty"`
}

// Worker is one filter worker's filter of one protocol, as its last poll of the tenant feed
// told. A worker runs a filter per protocol, each from its own filter configuration (ECDS).
type Worker struct {
	Token    string           `json:"token"`
	Protocol compile.Protocol `json:"protocol"`
	Version  string           `json:"version"`
	Replicas int              `json:"replicas"`
	// Seen is when its last poll began; Ended, when that poll ended (zero while it is held).
	Seen  time.Time `json:"seen"`
	Ended time.Time `json:"ended,omitzero"`
	// Told is the version that poll was answered with, and ToldReplicas its count (0: none).
	Told         string `json:"told,omitempty"`
	ToldReplicas int    `json:"toldReplicas,omitempty"`
}

// workerLive: a worker whose poll is held and began this long ago is gone (a poll is held at
// most tenantfeed.Hold).
const workerLive = tenantfeed.Hold + 15*time.Second

// repollWithin: a worker whose poll ended this long ago without a next one is gone. A live
// worker polls again at its next tick, once it has installed what it was answered; Envoy
// replaces the VMs of a pod starting (a replaced worker's poll answered just before, or
// cancelled: then it is gone at once, see PollEnded), and those must not hold the pod's
// acknowledgement back for workerLive.
const repollWithin = 10 * time.Second

// toldAfter: a worker answered with a delta this long ago that has not polled again counts
// as running what it was told. A live one installs it and polls again within a tick (200 ms),
// or, if it could not install it, 1 s later (feed.rs RETRY_NS) naming the version it still
// runs; one whose VM Envoy replaced as it was answered never does, and must not hold its
// node's acknowledgement back for repollWithin.
const toldAfter = 3 * time.Second

// running is the version and replica count the worker runs, by now.
func (w Worker) running(now time.Time) (string, int) {
	if w.Told != "" && !w.Ended.IsZero() && now.Sub(w.Ended) >= toldAfter {
		if w.ToldReplicas > 0 {
			return w.Told, w.ToldReplicas
		}
		return w.Told, w.Replicas
	}
	return w.Version, w.Replicas
}

// live says whether the worker still polls, by now.
func (w Worker) live(now time.Time) bool {
	if !w.Ended.IsZero() {
		return now.Sub(w.Ended) < repollWithin
	}
	return now.Sub(w.Seen) < workerLive
}

// Settle drops the workers gone by now and, if every live one runs the same policy content,
// makes its version the node's acknowledged one, and if they also run the same replica count,
// the snapshot that version with the count. It says whether that changed.
func Settle(n *NodeStatus, now time.Time) bool {
	live := make([]Worker, 0, len(n.Workers))
	for _, w := range n.Workers {
		if w.live(now) {
			live = append(live, w)
		}
	}
	n.Workers = live
	if len(live) == 0 {
		return false
	}
	v, replicas := live[0].running(now)
	for _, w := range live[1:] {
		wv, wr := w.running(now)
		if tenantfeed.ContentOf(wv) != tenantfeed.ContentOf(v) {
			return false
		}
		if wr != replicas {
			replicas = -1
		}
	}
	// The policy is acknowledged once every live worker runs it; the snapshot only once they
	// also divide by one count (while control plane replicas count the gateway apart, workers
	// told by each differ for a moment).
	snapshot := n.AckedSnapshot
	if replicas >= 0 {
		snapshot = v + replicasSuffix + strconv.Itoa(replicas)
	}
	if tenantfeed.ContentOf(n.AckedVersion) == tenantfeed.ContentOf(v) && n.AckedSnapshot == snapshot {
		return false
	}
	n.AckedVersion, n.AckedSnapshot = v, snapshot
	return true
}

// MergeWorkers is the workers of two views of one node, each as of its latest poll in either.
func MergeWorkers(a, b []Worker) []Worker {
	out := append([]Worker(nil), a...)
	for _, w := range b {
		i := slices.IndexFunc(out, func(o Worker) bool { return o.Token == w.Token && o.Protocol == w.Protocol })
		switch {
		case i < 0:
			out = append(out, w)
		case w.Seen.After(out[i].Seen):
			out[i] = w
		}
	}
	return out
}

// nodeTracker follows ACKs and NACKs of the policy-carrying type (ECDS) per Envoy node.
// An ACK is a request with a nonce and no error; a NACK carries error_detail and the nonce of
// the response it rejects, whose version we remember from OnStreamResponse.
type nodeTracker struct {
	mu            sync.Mutex
	streams       map[int64]string            // stream id -> node id
	nonceVersions map[int64]map[string]string // stream id -> nonce -> version sent
	nodes         map[string]*NodeStatus
	onChange      func()
	// onConnected is told the count of connected nodes and the port offset of the node that
	// just spoke, before its request is answered.
	onConnected func(connected, offset int)
	// onNack is told of every NACK.
	onNack func()
	// onVersion is told each policy version a node or worker says it runs.
	onVersion func(version string)
}

func newNodeTracker() *nodeTracker {
	return &nodeTracker{
		streams:       map[int64]string{},
		nonceVersions: map[int64]map[string]string{},
		nodes:         map[string]*NodeStatus{},
	}
}

func (t *nodeTracker) OnStreamOpen(context.Context, int64, string) error { return nil }

func (t *nodeTracker) OnStreamClosed(id int64, node *corev3.Node) {
	t.mu.Lock()
	if n, ok := t.nodes[t.streams[id]]; ok {
		n.Connected = false
	}
	delete(t.streams, id)
	delete(t.nonceVersions, id)
	connected, cb := t.connectedLocked(), t.onConnected
	t.mu.Unlock()
	if cb != nil {
		cb(connected, portOffset(node))
	}
}

func (t *nodeTracker) connectedLocked() int {
	n := 0
	for _, s := range t.nodes {
		if s.Connected {
			n++
		}
	}
	return n
}

// policyVersion is a snapshot version without the gateway's fingerprint and the replica count
// (see snapshotVersion).
func policyVersion(v string) string {
	p, _, _ := strings.Cut(v, gatewaySuffix)
	p, _, _ = strings.Cut(p, replicasSuffix)
	return p
}

func (t *nodeTracker) OnStreamRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	t.mu.Lock()
	nodeID := req.GetNode().GetId()
	if nodeID == "" {
		nodeID = t.streams[id]
	}
	t.streams[id] = nodeID
	n, ok := t.nodes[nodeID]
	if !ok {
		n = &NodeStatus{ID: nodeID}
		t.nodes[nodeID] = n
	}
	n.Connected = true
	n.LastSeen = time.Now()
	changed, nacked := false, false
	if req.GetTypeUrl() == resourcev3.ExtensionConfigType && req.GetResponseNonce() == "" && req.GetVersionInfo() != "" {
		// A node (re)connecting names the version it runs. When that is the current snapshot's
		// (the same policy, gateway and module: see snapshotVersion), no response follows and
		// so no ACK: this is its acknowledgement. Otherwise the response's ACK follows.
		n.AckedVersion = policyVersion(req.GetVersionInfo())
		n.AckedSnapshot = req.GetVersionInfo()
		n.AckedAt = time.Now()
		changed = true
	}
	if req.GetTypeUrl() == resourcev3.ExtensionConfigType && req.GetResponseNonce() != "" {
		if req.GetErrorDetail() != nil {
			n.NackedVersion = policyVersion(t.nonceVersions[id][req.GetResponseNonce()])
			n.NackReason = req.GetErrorDetail().GetMessage()
			nacked = true
		} else {
			n.AckedVersion = policyVersion(req.GetVersionInfo())
			n.AckedSnapshot = req.GetVersionInfo()
			n.AckedAt = time.Now()
			// Only a later version clears a NACK. Envoy acknowledges a version it refused when
			// it is sent again (the control plane answers a NACK by resending): its extension
			// config provider skips a configuration it already has seen, refused or not, and
			// keeps running the previous one.
			if n.NackedVersion != "" && n.NackedVersion != n.AckedVersion {
				n.NackedVersion, n.NackReason = "", ""
			}
		}
		changed = true
	}
	cb, connectedCb, connected, nackCb, seen := t.onChange, t.onConnected, t.connectedLocked(), t.onNack, t.onVersion
	t.mu.Unlock()
	if seen != nil && req.GetTypeUrl() == resourcev3.ExtensionConfigType && req.GetVersionInfo() != "" {
		seen(policyVersion(req.GetVersionInfo()))
	}
	if nacked && nackCb != nil {
		nackCb()
	}
	if connectedCb != nil {
		connectedCb(connected, portOffset(req.GetNode()))
	}
	if changed && cb != nil {
		cb()
	}
	return nil
}

func (t *nodeTracker) OnStreamResponse(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	if resp.GetTypeUrl() != resourcev3.ExtensionConfigType {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.nonceVersions[id]
	if m == nil {
		m = map[string]string{}
		t.nonceVersions[id] = m
	}
	m[resp.GetNonce()] = resp.GetVersionInfo()
}

func (t *nodeTracker) OnFetchRequest(context.Context, *discoveryv3.DiscoveryRequest) error {
	return nil
}
func (t *nodeTracker) OnFetchResponse(*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse) {
}
func (t *nodeTracker) OnDeltaStreamOpen(context.Context, int64, string) error { return nil }
func (t *nodeTracker) OnDeltaStreamClosed(int64, *corev3.Node)                {}
func (t *nodeTracker) OnStreamDeltaRequest(int64, *discoveryv3.DeltaDiscoveryRequest) error {
	return nil
}
func (t *nodeTracker) OnStreamDeltaResponse(int64, *discoveryv3.DeltaDiscoveryRequest, *discoveryv3.DeltaDiscoveryResponse) {
}

// Polled records a filter worker's poll of the tenant feed: the version it runs.
func (t *nodeTracker) Polled(p tenantfeed.Poll) {
	if p.Node == "" || p.Worker == "" {
		return
	}
	t.mu.Lock()
	n, ok := t.nodes[p.Node]
	if !ok {
		n = &NodeStatus{ID: p.Node}
		t.nodes[p.Node] = n
	}
	n.Workers = MergeWorkers(n.Workers, []Worker{{Token: p.Worker, Protocol: p.Protocol, Version: p.Applied, Replicas: p.Replicas, Seen: p.At}})
	changed := Settle(n, time.Now())
	cb, seen := t.onChange, t.onVersion
	t.mu.Unlock()
	if seen != nil {
		seen(p.Applied)
	}
	if changed && cb != nil {
		cb()
	}
}

// PollEnded records that a worker's poll ended, and what it was told, if it is the worker's
// latest: it must poll again within repollWithin to stay live. An earlier poll ending (Envoy
// configured the worker anew, so it dropped that poll and began another) says nothing. A
// worker that hung up unanswered is gone at once (until it polls again): a short-lived instance
// Envoy makes on its main thread for a filter configuration sent again polls once and is
// dropped, and its version must not hold the node's acknowledgement of the next change back
// for repollWithin.
func (t *nodeTracker) PollEnded(p tenantfeed.Poll) {
	t.mu.Lock()
	n, ok := t.nodes[p.Node]
	i := -1
	if ok {
		i = slices.IndexFunc(n.Workers, func(w Worker) bool {
			return w.Token == p.Worker && w.Protocol == p.Protocol && w.Seen.Equal(p.At)
		})
	}
	changed := false
	switch {
	case i < 0:
	case p.Abandoned:
		n.Workers = slices.Delete(n.Workers, i, i+1)
		changed = Settle(n, time.Now())
	default:
		n.Workers[i].Ended = time.Now()
		n.Workers[i].Told, n.Workers[i].ToldReplicas = p.Told.Version, p.Told.Replicas
	}
	cb := t.onChange
	t.mu.Unlock()
	if changed && cb != nil {
		cb()
	}
}

// Nodes returns every node seen, sorted by id, each settled by now (a worker's silence moves
// its node's acknowledgement with no poll to tell it).
func (t *nodeTracker) Nodes() []NodeStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	out := make([]NodeStatus, 0, len(t.nodes))
	for _, n := range t.nodes {
		Settle(n, now)
		c := *n
		c.Workers = slices.Clone(n.Workers) // PollEnded writes the tracker's in place
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
