package xds

import (
	"fmt"
	"net"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
)

// Downstream is how a gateway listener meets its clients.
type Downstream int

const (
	Plaintext Downstream = iota
	// TLS terminates TLS; a client certificate, when presented, is verified against the client
	// CA (and then identifies the client).
	TLS
	// MutualTLS terminates TLS and requires a client certificate the client CA verifies.
	MutualTLS
)

func (d Downstream) String() string {
	return [...]string{"plaintext", "tls", "mtls"}[d]
}

// ParseDownstream reads a listener option: "tls" or "mtls".
func ParseDownstream(s string) (Downstream, bool) {
	switch s {
	case "tls":
		return TLS, true
	case "mtls":
		return MutualTLS, true
	}
	return Plaintext, false
}

// tlsInspectTimeout is how long the TLS-first NATS listener waits for a client's first bytes
// before deciding it is a plaintext client waiting for INFO: a TLS client sends its ClientHello
// at once, and nats.go gives up a connection after 2 s.
const tlsInspectTimeout = time.Second

// PlaintextOnTLSFirstChain names the filter chain of plaintext clients on the TLS-first NATS
// listener (the classic upgrade, which Envoy cannot do mid-stream for a Wasm filter). The filter
// recognises it by this name (shared with wasm-filter/envoy/src/trust.rs): it answers the
// client's CONNECT with an error naming the option to set, and never forwards it.
const PlaintextOnTLSFirstChain = "weighstation-plaintext-on-tls-first"

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func sdsSecret(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: adsSource()}
}

// downstreamTransportSocket terminates TLS with the gateway's certificate, verifying client
// certificates when a client CA is configured. Every secret comes over SDS: a rotated one is used
// by the next handshake.
func downstreamTransportSocket(d Downstream, files tlssecrets.Files) (*corev3.TransportSocket, error) {
	common := &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(tlssecrets.ServerCertificate)},
	}
	if files.ClientCAs() {
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: sdsSecret(tlssecrets.ClientCA),
		}
	}
	ctx, err := mustAny(&tlsv3.DownstreamTlsContext{
		CommonTlsContext:         common,
		RequireClientCertificate: wrapperspb.Bool(d == MutualTLS),
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// upstreamTransportSocket originates TLS to a broker: its certificate must chain to the upstream
// CA and name one of hosts (or serverName, when set); SNI is serverName, or the host when there
// is one DNS name to send. The gateway shows its own client certificate when one is configured.
func upstreamTransportSocket(upstream, serverName string, files tlssecrets.Files) (*corev3.TransportSocket, error) {
	var hosts []string
	if serverName != "" {
		hosts = []string{serverName}
	} else {
		for _, hp := range strings.Split(upstream, ",") {
			host, _, err := net.SplitHostPort(strings.TrimSpace(hp))
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", hp, err)
			}
			hosts = append(hosts, host)
		}
	}
	var sans []*tlsv3.SubjectAltNameMatcher
	sni := ""
	for _, h := range hosts {
		kind := tlsv3.SubjectAltNameMatcher_DNS
		if net.ParseIP(h) != nil {
			kind = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
		} else if len(hosts) == 1 {
			sni = h
		}
		sans = append(sans, &tlsv3.SubjectAltNameMatcher{SanType: kind, Matcher: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h},
		}})
	}
	common := &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
				ValidationContextSdsSecretConfig: sdsSecret(tlssecrets.UpstreamCA),
			},
		},
	}
	if files.UpstreamClient() {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sdsSecret(tlssecrets.UpstreamCertificate)}
	}
	ctx, err := mustAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: sni})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// tlsFirstInspector tells TLS clients from plaintext ones on the TLS-first NATS listener: a
// client that sends nothing within tlsInspectTimeout is waiting for a plaintext INFO, and goes
// through the filter without TLS, to be told what to set.
func tlsFirstInspector(l *listenerv3.Listener, plaintextFilters []*listenerv3.Filter) error {
	inspector, err := mustAny(&tlsinspectorv3.TlsInspector{})
	if err != nil {
		return err
	}
	l.ListenerFilters = []*listenerv3.ListenerFilter{{
		Name:       "envoy.filters.listener.tls_inspector",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
	}}
	l.ListenerFiltersTimeout = durationpb.New(tlsInspectTimeout)
	l.ContinueOnListenerFiltersTimeout = true
	l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{TransportProtocol: "tls"}
	l.DefaultFilterChain = &listenerv3.FilterChain{
		Name:    PlaintextOnTLSFirstChain,
		Filters: plaintextFilters,
	}
	return nil
}
