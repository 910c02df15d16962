package xds

import (
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
)

var serverFiles = tlssecrets.Files{CertFile: "s.crt", KeyFile: "s.key"}

func TestGatewayCheckNamesWhatATLSOptionNeeds(t *testing.T) {
	withCA := serverFiles
	withCA.ClientCAFile = "ca.crt"
	cases := []struct {
		name string
		g    Gateway
		want string // "" for a valid gateway
	}{
		{"plaintext", gateway, ""},
		{"tls nats without a certificate", Gateway{NATSTLSListen: ":4443", NATSTLS: TLS}, "--nats-tls-listen terminates TLS: it needs --tls-cert-file"},
		{"tls nats", Gateway{NATSTLSListen: ":4443", NATSTLS: TLS, TLSFiles: serverFiles}, ""},
		{"mtls without a client CA", Gateway{NATSTLSListen: ":4443", NATSTLS: MutualTLS, TLSFiles: serverFiles}, "needs --tls-client-ca-file"},
		{"mtls", Gateway{NATSTLSListen: ":4443", NATSTLS: MutualTLS, TLSFiles: withCA}, ""},
		{"broker upstream tls without a CA", Gateway{KafkaBrokers: []KafkaBroker{{Upstream: "b:9093", Listen: ":9093", UpstreamTLS: true}}}, "--kafka-broker b:9093=:9093 reaches the broker over TLS: it needs --upstream-tls-ca-file"},
		{"nats upstream tls without a CA", Gateway{NATSUpstreamTLS: true}, "--nats-upstream-tls reaches the broker over TLS"},
		{"key without certificate", Gateway{TLSFiles: tlssecrets.Files{KeyFile: "k"}}, "--tls-cert-file and --tls-key-file go together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.Check()
			if c.want == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func tlsGateway() Gateway {
	g := gateway
	g.NATSTLSListen, g.NATSTLS = "127.0.0.1:4443", MutualTLS
	g.TLSFiles = tlssecrets.Files{CertFile: "s.crt", KeyFile: "s.key", ClientCAFile: "ca.crt", UpstreamCAFile: "up.crt"}
	g.KafkaBrokers = []KafkaBroker{{Upstream: "kafka-0.kafka:9093", Listen: "127.0.0.1:9393", Downstream: TLS, UpstreamTLS: true}}
	return g
}

func downstreamContext(t *testing.T, fc *listenerv3.FilterChain) *tlsv3.DownstreamTlsContext {
	t.Helper()
	ctx := &tlsv3.DownstreamTlsContext{}
	if fc.TransportSocket == nil {
		t.Fatal("no transport socket")
	}
	if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// The TLS-first NATS listener sends TLS clients through the filter, and plaintext ones through a
// chain the filter knows by name (to refuse them); certificates come over SDS by name.
func TestTLSFirstNATSListener(t *testing.T) {
	res, err := Resources(tlsGateway(), examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	var l *listenerv3.Listener
	for _, r := range res[resourcev3.ListenerType] {
		if r.(*listenerv3.Listener).Name == "nats_tls" {
			l = r.(*listenerv3.Listener)
		}
	}
	if l == nil {
		t.Fatal("no nats_tls listener")
	}
	chain := l.FilterChains[0]
	if chain.FilterChainMatch.GetTransportProtocol() != "tls" || chain.Filters[0].Name != FilterName("nats") {
		t.Errorf("TLS chain: match %v, first filter %s", chain.FilterChainMatch, chain.Filters[0].Name)
	}
	ctx := downstreamContext(t, chain)
	if !ctx.RequireClientCertificate.GetValue() ||
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs[0].Name != tlssecrets.ServerCertificate ||
		ctx.CommonTlsContext.GetValidationContextSdsSecretConfig().GetName() != tlssecrets.ClientCA {
		t.Errorf("downstream TLS context %v", ctx)
	}
	if len(l.ListenerFilters) != 1 || !l.ContinueOnListenerFiltersTimeout {
		t.Errorf("listener filters %v, continue on timeout %v", l.ListenerFilters, l.ContinueOnListenerFiltersTimeout)
	}
	if d := l.DefaultFilterChain; d == nil || d.TransportSocket != nil || d.Name != PlaintextOnTLSFirstChain || d.Filters[0].Name != FilterName("nats") {
		t.Errorf("plaintext clients' chain %v", d)
	}
	if len(res[resourcev3.ExtensionConfigType]) != 2 {
		t.Errorf("%d filter configurations, want one per protocol", len(res[resourcev3.ExtensionConfigType]))
	}
}

// A broker reached over TLS must show a certificate for its own host, chained to the upstream CA.
func TestUpstreamTLSChecksTheBrokersName(t *testing.T) {
	res, err := Resources(tlsGateway(), examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[resourcev3.ClusterType] {
		c := r.(*clusterv3.Cluster)
		if c.Name != "kafka_broker_0" {
			if c.TransportSocket != nil {
				t.Errorf("cluster %s has TLS", c.Name)
			}
			continue
		}
		ctx := &tlsv3.UpstreamTlsContext{}
		if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(ctx); err != nil {
			t.Fatal(err)
		}
		v := ctx.CommonTlsContext.GetCombinedValidationContext()
		sans := v.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
		if ctx.Sni != "kafka-0.kafka" || len(sans) != 1 || sans[0].SanType != tlsv3.SubjectAltNameMatcher_DNS ||
			sans[0].Matcher.GetExact() != "kafka-0.kafka" || v.GetValidationContextSdsSecretConfig().GetName() != tlssecrets.UpstreamCA {
			t.Errorf("upstream TLS context %v", ctx)
		}
		if len(ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs) != 0 {
			t.Error("a client certificate without --upstream-tls-cert-file")
		}
		return
	}
	t.Fatal("no kafka_broker_0 cluster")
}

func writePair(t *testing.T, dir string, p devcerts.Pair) tlssecrets.Files {
	t.Helper()
	if err := p.Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	return tlssecrets.Files{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key")}
}

// A rotated certificate reaches Envoy as a new version of the secrets alone: the listeners keep
// their version, so Envoy leaves them and their connections be.
func TestRotationChangesOnlyTheSecrets(t *testing.T) {
	ca, err := devcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, _ := ca.Server("gateway", "127.0.0.1")
	files := writePair(t, dir, first)
	g := gateway
	g.NATSTLSListen, g.NATSTLS, g.TLSFiles = "127.0.0.1:4443", TLS, files
	s, _ := tlsServer(t, g, files)
	snap := func() (listeners, secrets string, serverCert []byte) {
		sn, err := s.cache.GetSnapshot(groupKey(0))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sn.GetResources(resourcev3.SecretType) {
			if sec := r.(*tlsv3.Secret); sec.Name == tlssecrets.ServerCertificate {
				serverCert = sec.GetTlsCertificate().CertificateChain.GetInlineBytes()
			}
		}
		return sn.GetVersion(resourcev3.ListenerType), sn.GetVersion(resourcev3.SecretType), serverCert
	}
	l1, s1, c1 := snap()
	second, _ := ca.Server("gateway", "127.0.0.1")
	writePair(t, dir, second)
	m2, err := files.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTLS(m2); err != nil {
		t.Fatal(err)
	}
	l2, s2, c2 := snap()
	if l1 != l2 || s1 == s2 || string(c1) != string(first.CertPEM) || string(c2) != string(second.CertPEM) {
		t.Errorf("listeners %s→%s, secrets %s→%s; certificate rotated: %v", l1, l2, s1, s2, string(c2) == string(second.CertPEM))
	}
}

// tlsServer is a server for g with the TLS material of files (returned) and the example
// policies published.
func tlsServer(t *testing.T, g Gateway, files tlssecrets.Files) (*Server, *tlssecrets.Material) {
	t.Helper()
	s := NewServer(g)
	m, err := files.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTLS(m); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(examples(t), "1-a"); err != nil {
		t.Fatal(err)
	}
	return s, m
}
