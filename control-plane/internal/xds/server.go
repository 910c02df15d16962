package xds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/weighstation/weighstation/control-plane/internal/bootstrap"
	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
	"github.com/weighstation/weighstation/control-plane/internal/tenantfeed"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
)

// portOffset is how far an Envoy asks for its listeners to be moved up (bootstrap's
// ListenPortOffset): several Envoys on one host.
func portOffset(node *corev3.Node) int {
	return int(node.GetMetadata().GetFields()[bootstrap.PortOffsetKey].GetNumberValue())
}

// byPortOffset hashes Envoy nodes to one snapshot per port offset: all gateways run the same
// configuration, on their own ports.
type byPortOffset struct{}

func (byPortOffset) ID(node *corev3.Node) string { return groupKey(portOffset(node)) }

func groupKey(offset int) string { return "weighstation+" + strconv.Itoa(offset) }

// Server serves the policy to every connected Envoy over ADS and tracks their ACKs.
type Server struct {
	gateway     Gateway
	fingerprint string // of gateway (see gatewayFingerprint)
	// cache serves every type but secrets in ADS mode: a request naming some of the snapshot's
	// resources of a type waits until one names them all. The filter configurations (ECDS) all
	// come from the listeners, so Envoy names them all at once and gets them in one response.
	cache cachev3.SnapshotCache
	// secrets holds the same snapshots and serves the secrets alone, each request answered with
	// the secrets it names. Envoy names them in two steps: the clusters' (upstream TLS) while it
	// initialises the clusters, and the listeners' too once it has the listeners, which it asks
	// for only when the clusters are ready. In ADS mode the first request would wait for the
	// second, and every Envoy start would wait out its 15 s initial fetch timeout.
	secrets cachev3.SnapshotCache
	nodes   *nodeTracker
	// feed carries tenant-only changes and the replica count to the filters (nil without
	// reports: the filters reach the control plane through the reports cluster).
	feed *tenantfeed.Feed

	mu       sync.Mutex
	set      *policy.Set
	version  string
	tls      *tlssecrets.Material // the TLS material served over SDS; nil without any
	offsets  map[int]bool         // port offsets of the nodes seen
	replicas int                  // live replicas the published snapshots count
	// counted says replicas come from SetReplicas (every gateway pod, wherever its xDS stream
	// is), not from this control plane's own connections.
	counted bool
	// holdUntil: nothing is published before it (HoldUntil); held says a publish waits for it.
	holdUntil time.Time
	held      bool
	// frame identifies what the published filter configurations hold besides their tenants
	// (see frameOf): while a new set's is the same, the feed alone carries it. setFrame is the
	// current set's, computed once per set.
	frame, setFrame string
	// filtered are the protocols whose filter configurations are published.
	filtered []compile.Protocol
	// feedTenants are the current set's tenants as the feed sends them (with the feed).
	feedTenants feedTenants
	// resent counts the times the current snapshot was sent again under a new version after a
	// NACK (see resendSnapshot).
	resent int
}

func NewServer(g Gateway) *Server {
	s := &Server{
		gateway:     g,
		fingerprint: gatewayFingerprint(g),
		cache:       cachev3.NewSnapshotCache(true, byPortOffset{}, nil),
		secrets:     cachev3.NewSnapshotCache(false, byPortOffset{}, nil),
		nodes:       newNodeTracker(),
		offsets:     map[int]bool{0: true},
	}
	s.nodes.onConnected = s.nodesChanged
	s.nodes.onNack = s.resendSnapshot
	if g.Reports != nil && !g.NoTenantFeed {
		s.feed = tenantfeed.New()
	}
	return s
}

// Publish makes set the configuration every Envoy receives, as version. A set that differs
// from the published one in its tenants alone goes through the tenant feed; the filter
// configurations (ECDS) stay as they are, the base a starting worker catches up from.
func (s *Server) Publish(set *policy.Set, version string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.version = set, version
	if s.feed == nil {
		s.resent = 0
		return s.publishLocked()
	}
	frame, err := frameOf(set)
	if err != nil {
		return err
	}
	s.setFrame = frame
	if err := s.feedTenants.update(set); err != nil {
		return err
	}
	s.feed.Publish(version, s.feedTenants.encoded)
	if s.frame != "" && frame == s.frame {
		return nil
	}
	s.resent = 0
	return s.publishLocked()
}

// frameOf is what set's filter configurations hold besides the tenants, as a hash.
func frameOf(set *policy.Set) (string, error) {
	h := sha256.New()
	for _, p := range protocols {
		b, err := json.Marshal(compile.Frame(set, "", p, 0))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Feed is the tenant feed the filters poll (nil without reports).
func (s *Server) Feed() *tenantfeed.Feed { return s.feed }

// Polled records a filter worker's poll of the tenant feed (see NodeStatus.Workers).
func (s *Server) Polled(p tenantfeed.Poll) { s.nodes.Polled(p) }

// PollEnded records the end of a filter worker's poll of the tenant feed.
func (s *Server) PollEnded(p tenantfeed.Poll) { s.nodes.PollEnded(p) }

// SetTLS makes m the TLS material every Envoy receives (over SDS). Only the secrets' version
// changes: listeners, clusters and the filter configuration are untouched, so open connections
// stay as they are and the next handshake uses the new certificates.
func (s *Server) SetTLS(m *tlssecrets.Material) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tls = m
	return s.publishLocked()
}

// snapshotVersion is the policy version followed by what else Envoy's configuration depends
// on, which the tracker strips: the gateway's own configuration (fingerprint) and, when a
// global limit depends on it, the live replica count (a change in the count must reach every
// Envoy as a new version).
func snapshotVersion(set *policy.Set, version, fingerprint string, replicas int, feed bool) string {
	v := version + gatewaySuffix + fingerprint
	if set.QuotaService == nil || feed {
		return v
	}
	return v + replicasSuffix + strconv.Itoa(replicas)
}

const (
	gatewaySuffix  = "+gateway="
	replicasSuffix = "+replicas="
	resentSuffix   = "+resent="
)

// gatewayFingerprint identifies the listeners, clusters and filter module a Gateway gives
// Envoy, the module by its content. A restarted control plane counts versions from 1 again:
// were a version it sends equal to one an Envoy already holds from before the restart, Envoy
// would not be sent it, and a new module or listener would never reach that Envoy.
func gatewayFingerprint(g Gateway) string {
	h := sha256.New()
	b, _ := json.Marshal(g)
	h.Write(b)
	if g.Wasm.File != "" {
		module, err := os.ReadFile(g.Wasm.File)
		if err != nil {
			module = []byte(err.Error())
		}
		h.Write(module)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// HoldUntil publishes nothing before t. A control plane in front of a discovered Kafka cluster
// starts knowing no broker; were it to publish at once, every Envoy connected to it would lose
// the upstreams of the brokers it fronts until the filters' next reports named them again
// (internal/discovery). Reports come every second, so a few seconds' hold publishes them all.
func (s *Server) HoldUntil(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdUntil = t
}

// kafkaUpstreamLead is how long a discovered broker's upstream is published before the
// filter hands the broker out: Envoy applies the upstream (CDS) and the filter configuration
// (ECDS) of one snapshot independently, so a client told of the broker at once could connect
// before its upstream exists, and have its connection closed.
const kafkaUpstreamLead = time.Second

// SetKafkaNodes makes nodes (by filter chain, each node id's address) the Kafka brokers every
// Envoy has an upstream for at once, and hands them out to clients kafkaUpstreamLead later.
// While the start is held (HoldUntil) both happen together: the Envoys a restarted control
// plane meets already have those upstreams.
func (s *Server) SetKafkaNodes(nodes map[string]map[int32]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gateway.KafkaNodes = nodes
	if time.Now().Before(s.holdUntil) {
		s.gateway.KafkaFronted = nodes
	} else {
		time.AfterFunc(kafkaUpstreamLead, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.gateway.KafkaFronted = nodes
			s.fingerprint = gatewayFingerprint(s.gateway)
			if err := s.publishLocked(); err != nil {
				slog.Error("handing out discovered Kafka brokers", "err", err)
			}
		})
	}
	s.fingerprint = gatewayFingerprint(s.gateway)
	return s.publishLocked()
}

func (s *Server) publishLocked() error {
	if s.set == nil {
		return nil
	}
	if wait := time.Until(s.holdUntil); wait > 0 {
		if !s.held {
			s.held = true
			time.AfterFunc(wait, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.held = false
				if err := s.publishLocked(); err != nil {
					slog.Error("publishing after the hold", "err", err)
				}
			})
		}
		return nil
	}
	for offset := range s.offsets {
		g, err := s.gateway.WithPortOffset(offset)
		if err != nil {
			return err
		}
		g.Replicas, g.Rebuild = max(s.replicas, 1), s.resent
		res, err := Resources(g, s.set, s.version)
		if err != nil {
			return err
		}
		s.filtered = filteredProtocols(res[resourcev3.ExtensionConfigType])
		if s.tls != nil {
			res[resourcev3.SecretType] = s.tls.Secrets()
		}
		version := snapshotVersion(s.set, s.version, s.fingerprint, g.Replicas, s.feed != nil)
		if s.resent > 0 {
			version += resentSuffix + strconv.Itoa(s.resent)
		}
		snap, err := cachev3.NewSnapshot(version, res)
		if err != nil {
			return fmt.Errorf("building snapshot: %w", err)
		}
		if s.tls != nil {
			// Secrets are versioned by their content, apart from the policy: a rotation sends
			// Envoy the secrets alone, and a policy change does not resend them.
			snap.Resources[types.Secret].Version = s.tls.Version
		}
		if err := snap.Consistent(); err != nil {
			return fmt.Errorf("inconsistent snapshot: %w", err)
		}
		// Secrets first: when Envoy asks for the secrets a new listener or cluster names, they
		// are there.
		if err := s.secrets.SetSnapshot(context.Background(), groupKey(offset), snap); err != nil {
			return err
		}
		if err := s.cache.SetSnapshot(context.Background(), groupKey(offset), snap); err != nil {
			return err
		}
	}
	s.frame = s.setFrame
	return nil
}

// nackResends bounds how often one snapshot is sent again after NACKs, nackResendDelay the wait
// before the first (doubling after).
const (
	nackResends     = 3
	nackResendDelay = 2 * time.Second
)

// resendSnapshot sends the current snapshot again, under a new version and with filter
// configurations that differ in their Rebuild count, a while after an Envoy refused it or one
// of its filters was found not running (HealSilent). Envoy never applies a version it has
// refused, even sent again, and skips a filter configuration equal to the last it was sent,
// even one that failed; a failure can be passing — a filter whose module Envoy was still
// fetching fails to load. Before the tenant feed some later change soon brought a new version
// anyway; now one may not come for hours.
func (s *Server) resendSnapshot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resent >= nackResends {
		return
	}
	s.resent++
	n := s.resent
	time.AfterFunc(nackResendDelay<<(n-1), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.resent != n {
			return // published anew since
		}
		if err := s.publishLocked(); err != nil {
			slog.Error("sending the filter configuration again after a NACK", "err", err)
		}
	})
}

// silentAfter is how long a node may have acknowledged a filter configuration without any of
// its workers polling the tenant feed before it is sent the configuration again.
const silentAfter = 10 * time.Second

// HealSilent sends the filter configurations again, under a new version, when a node connected
// here acknowledged them silentAfter ago and, for one of the protocols it filters, no worker of
// it polls the tenant feed (nodes: every control plane replica's view, merged): that filter is
// not running. Envoy accepts a filter whose remote module another filter was still fetching,
// and it fails closed; one protocol's can fail while the other's runs. Before the tenant feed a
// later change soon replaced it, now one may not come for hours.
func (s *Server) HealSilent(nodes []NodeStatus) {
	if s.feed == nil {
		return
	}
	here := map[string]bool{}
	for _, n := range s.nodes.Nodes() {
		if n.Connected && !n.AckedAt.IsZero() && time.Since(n.AckedAt) > silentAfter {
			here[n.ID] = true
		}
	}
	s.mu.Lock()
	filtered := s.filtered
	s.mu.Unlock()
	for _, n := range nodes {
		if !here[n.ID] {
			continue
		}
		for _, p := range filtered {
			if !slices.ContainsFunc(n.Workers, func(w Worker) bool { return w.Protocol == p && w.live(time.Now()) }) {
				slog.Warn("a gateway's filter runs no worker: sending its filter configurations again", "node", n.ID, "protocol", p)
				s.resendSnapshot()
				return
			}
		}
	}
}

// filteredProtocols are the protocols of the filter configurations exts (see FilterName).
func filteredProtocols(exts []types.Resource) []compile.Protocol {
	var out []compile.Protocol
	for _, r := range exts {
		if c, ok := r.(*corev3.TypedExtensionConfig); ok {
			if p, ok := strings.CutPrefix(c.GetName(), filterNamePrefix); ok {
				out = append(out, compile.Protocol(p))
			}
		}
	}
	return out
}

// nodesChanged republishes when an Envoy with new ports appears or the count of connected Envoys
// changes (global limits fall back to limit ÷ that count). Called before the node's request is
// answered, so a new port offset has its snapshot in time.
func (s *Server) nodesChanged(connected int, offset int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offsets[offset] && s.replicas == connected {
		return
	}
	known := s.offsets[offset]
	s.offsets[offset] = true
	if !s.counted {
		s.replicas = connected
	}
	if s.feed != nil {
		s.feed.SetReplicas(s.replicas) // 0: counted elsewhere, not yet (the workers keep theirs)
		if known {
			return
		}
	}
	if err := s.publishLocked(); err != nil {
		slog.Error("republishing for a changed set of Envoys", "err", err)
	}
}

// SetReplicas sets the live replica count from outside: with several control planes each sees
// only the Envoys connected to it, so the chart counts the gateway's ready pods instead. n < 1
// says the count comes from outside but is not known yet.
func (s *Server) SetReplicas(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counted = true
	if n < 1 || n == s.replicas {
		return
	}
	s.replicas = n
	if s.feed != nil {
		s.feed.SetReplicas(n)
		return
	}
	if err := s.publishLocked(); err != nil {
		slog.Error("republishing for a changed replica count", "err", err)
	}
}

// Published is the policy set Envoys are being sent (nil before the first).
func (s *Server) Published() *policy.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// QuotaService is the quota service of the published policy and the count of connected Envoys
// the filters were given; an empty address when no tenant is global.
func (s *Server) QuotaService() (address string, timeout time.Duration, replicas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil || s.set.QuotaService == nil {
		return "", 0, 0
	}
	return s.set.QuotaService.Address, s.set.QuotaService.Timeout, max(s.replicas, 1)
}

// Nodes reports each Envoy node's ACKed or NACKed policy version.
func (s *Server) Nodes() []NodeStatus { return s.nodes.Nodes() }

// OnVersionSeen registers a function told each policy version a node or one of its workers
// says it runs (see controller.Witness).
func (s *Server) OnVersionSeen(f func(version string)) {
	s.nodes.mu.Lock()
	s.nodes.onVersion = f
	s.nodes.mu.Unlock()
}

// OnNodeChange registers a function called after any ACK or NACK (used for metrics).
func (s *Server) OnNodeChange(f func()) { s.nodes.mu.Lock(); s.nodes.onChange = f; s.nodes.mu.Unlock() }

// Serve runs the ADS gRPC server on lis until ctx ends.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, s.watcher(), s.nodes))
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	return gs.Serve(lis)
}

// watcher sends secret requests to the secrets cache and every other request to the ADS cache.
func (s *Server) watcher() cachev3.Cache {
	const ads, secrets = "ads", "secrets"
	classify := func(typeURL string) string {
		if typeURL == resourcev3.SecretType {
			return secrets
		}
		return ads
	}
	return &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return classify(r.GetTypeUrl()) },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return classify(r.GetTypeUrl()) },
		Caches:        map[string]cachev3.Cache{ads: s.cache, secrets: s.secrets},
	}
}
