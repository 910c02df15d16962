package xds

import (
	"context"
	"fmt"
	"net"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// allNodes hashes every Envoy node to one snapshot: all gateways run the same configuration.
type allNodes struct{}

func (allNodes) ID(*corev3.Node) string { return "weighstation" }

// Server serves one snapshot to every connected Envoy over ADS and tracks their ACKs.
type Server struct {
	gateway Gateway
	cache   cachev3.SnapshotCache
	nodes   *nodeTracker
}

func NewServer(g Gateway) *Server {
	return &Server{gateway: g, cache: cachev3.NewSnapshotCache(true, allNodes{}, nil), nodes: newNodeTracker()}
}

// Publish makes set the configuration every Envoy receives, as version.
func (s *Server) Publish(set *policy.Set, version string) error {
	res, err := Resources(s.gateway, set, version)
	if err != nil {
		return err
	}
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		return fmt.Errorf("building snapshot: %w", err)
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("inconsistent snapshot: %w", err)
	}
	return s.cache.SetSnapshot(context.Background(), allNodes{}.ID(nil), snap)
}

// Nodes reports each Envoy node's ACKed or NACKed policy version.
func (s *Server) Nodes() []NodeStatus { return s.nodes.Nodes() }

// OnNodeChange registers a function called after any ACK or NACK (used for metrics).
func (s *Server) OnNodeChange(f func()) { s.nodes.mu.Lock(); s.nodes.onChange = f; s.nodes.mu.Unlock() }

// Serve runs the ADS gRPC server on lis until ctx ends.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, s.cache, s.nodes))
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	return gs.Serve(lis)
}
