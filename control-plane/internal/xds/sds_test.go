package xds

import (
	"context"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
)

// tlsFiles writes every kind of TLS material the gateway can have into a fresh directory.
func tlsFiles(t *testing.T) tlssecrets.Files {
	t.Helper()
	dir := t.TempDir()
	ca, err := devcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Server("gateway", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client(pkix.Name{CommonName: "gateway-client"})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	if err := client.Write(dir, "client"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	return tlssecrets.Files{
		CertFile: p("server.crt"), KeyFile: p("server.key"), ClientCAFile: p("ca.crt"),
		UpstreamCAFile: p("ca.crt"), UpstreamCertFile: p("client.crt"), UpstreamKeyFile: p("client.key"),
	}
}

// adsClient is one Envoy's ADS stream to a Server.
type adsClient struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resps  chan *discoveryv3.DiscoveryResponse
	node   *corev3.Node
}

func serveADS(t *testing.T, s *Server) *adsClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); s.Serve(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); conn.Close(); <-served })
	c := &adsClient{t: t, stream: stream, resps: make(chan *discoveryv3.DiscoveryResponse, 16), node: &corev3.Node{Id: "envoy-1", Cluster: "weighstation"}}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(c.resps)
				return
			}
			c.resps <- r
		}
	}()
	return c
}

func (c *adsClient) send(req *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	if c.node != nil { // Envoy's set_node_on_first_message_only
		req.Node, c.node = c.node, nil
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits for the next response, which must be of typeURL.
func (c *adsClient) recv(typeURL, waitingFor string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	select {
	case r, ok := <-c.resps:
		if !ok {
			c.t.Fatalf("stream closed while waiting for %s", waitingFor)
		}
		if r.TypeUrl != typeURL {
			c.t.Fatalf("got a %s response while waiting for %s", r.TypeUrl, waitingFor)
		}
		return r
	case <-time.After(3 * time.Second):
		c.t.Fatalf("no answer to %s: Envoy waits out its initial fetch timeout (15 s) before it goes on", waitingFor)
	}
	return nil
}

func (c *adsClient) quiet(d time.Duration) {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response version %s", r.TypeUrl, r.VersionInfo)
	case <-time.After(d):
	}
}

func secretNames(t *testing.T, r *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	var names []string
	for _, a := range r.Resources {
		s := &tlsv3.Secret{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// Envoy asks for secrets in two steps over the one ADS stream: the clusters' (upstream TLS)
// while it initialises them, and only after that, when the listeners arrive, the listeners'
// too. Each step must be answered at once: the listeners are not requested before the clusters
// have their secrets, so a control plane that waits for a request naming every secret it has
// leaves Envoy to time the first one out (15 s at every start).
func TestSecretsAreAnsweredAsEnvoyAsksForThem(t *testing.T) {
	files := tlsFiles(t)
	g := gateway
	g.NATSTLSListen, g.NATSTLS, g.TLSFiles = "127.0.0.1:4443", MutualTLS, files
	g.KafkaBrokers = []KafkaBroker{{Upstream: "127.0.0.1:19096", Listen: "127.0.0.1:9292", Downstream: MutualTLS, UpstreamTLS: true}}
	s, m := tlsServer(t, g, files)
	c := serveADS(t, s)

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	cds := c.recv(resourcev3.ClusterType, "the clusters request")
	// Initialising the clusters, Envoy subscribes to their secrets before it ACKs them.
	upstream := []string{tlssecrets.UpstreamCA, tlssecrets.UpstreamCertificate}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: upstream})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: cds.VersionInfo, ResponseNonce: cds.Nonce})
	sec := c.recv(resourcev3.SecretType, "the clusters' secrets "+strings.Join(upstream, ", "))
	if got, want := secretNames(t, sec), tlssecrets.UpstreamCA+" "+tlssecrets.UpstreamCertificate; got != want {
		t.Errorf("clusters' secrets: got %q, want %q", got, want)
	}
	if sec.VersionInfo != m.Version {
		t.Errorf("secrets version %q, want the material's %q", sec.VersionInfo, m.Version)
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: upstream, VersionInfo: sec.VersionInfo, ResponseNonce: sec.Nonce})

	// The clusters are ready: Envoy asks for the listeners, and then for their secrets as well,
	// at the version it already has.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	lds := c.recv(resourcev3.ListenerType, "the listeners request")
	all := []string{tlssecrets.ClientCA, tlssecrets.ServerCertificate, tlssecrets.UpstreamCA, tlssecrets.UpstreamCertificate}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: all, VersionInfo: sec.VersionInfo, ResponseNonce: sec.Nonce})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, VersionInfo: lds.VersionInfo, ResponseNonce: lds.Nonce})
	sec = c.recv(resourcev3.SecretType, "the listeners' secrets")
	if got := secretNames(t, sec); !strings.Contains(got, tlssecrets.ServerCertificate) || !strings.Contains(got, tlssecrets.ClientCA) {
		t.Errorf("listeners' secrets: got %q", got)
	}
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: all, VersionInfo: sec.VersionInfo, ResponseNonce: sec.Nonce})
	c.quiet(200 * time.Millisecond)

	// A rotation reaches Envoy as the secrets alone, every one it asked for.
	rotated := files
	ca, err := devcerts.NewCA("rotated")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rotated.ClientCAFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := rotated.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTLS(m2); err != nil {
		t.Fatal(err)
	}
	sec = c.recv(resourcev3.SecretType, "the rotated secrets")
	if got := secretNames(t, sec); got != strings.Join(all, " ") || sec.VersionInfo != m2.Version {
		t.Errorf("after rotation: secrets %q version %q, want %q version %q", got, sec.VersionInfo, strings.Join(all, " "), m2.Version)
	}
	c.quiet(200 * time.Millisecond)
}
