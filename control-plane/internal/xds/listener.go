package xds

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// listener builds a listener whose filter chain is the protocol's Wasm filter (unless plain)
// followed by tcp_proxy to the cluster, behind TLS when the listener terminates it.
func listener(l listenerSpec, g Gateway) (*listenerv3.Listener, error) {
	addr, err := socketAddress(l.listen)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", l.name, err)
	}
	filters, err := chainFilters(l, l.downstream != Plaintext)
	if err != nil {
		return nil, err
	}
	out := &listenerv3.Listener{
		Name:                          l.name,
		Address:                       addr,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(g.BufferLimitBytes),
		FilterChains:                  []*listenerv3.FilterChain{{Filters: filters}},
	}
	if !l.plain {
		out.FilterChains[0].Name = l.chain
		out.SocketOptions = slowConsumerTimeout(g.SlowConsumerDeadline)
	}
	if l.downstream == Plaintext {
		return out, nil
	}
	if out.FilterChains[0].TransportSocket, err = downstreamTransportSocket(l.downstream, g.TLSFiles); err != nil {
		return nil, err
	}
	if l.proto == compile.NATS {
		plaintext, err := chainFilters(l, false)
		if err != nil {
			return nil, err
		}
		if err := tlsFirstInspector(out, plaintext); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chainFilters are the protocol's Wasm filter (unless the listener is plain) and tcp_proxy.
// Behind TLS the broker is dialled once the client's handshake is done: the filter sees a
// verified certificate from the first byte, and a failed handshake costs the broker nothing.
func chainFilters(l listenerSpec, afterHandshake bool) ([]*listenerv3.Filter, error) {
	proxy := &tcpproxyv3.TcpProxy{
		StatPrefix:       l.name,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: l.cluster},
	}
	if l.retries {
		proxy.MaxConnectAttempts = wrapperspb.UInt32(seedConnectAttempts)
	}
	if afterHandshake {
		proxy.UpstreamConnectMode = tcpproxyv3.UpstreamConnectMode_ON_DOWNSTREAM_TLS_HANDSHAKE
		proxy.MaxEarlyDataBytes = wrapperspb.UInt32(0)
	}
	tcp, err := mustAny(proxy)
	if err != nil {
		return nil, err
	}
	var filters []*listenerv3.Filter
	if l.noop != nil {
		f, err := l.noop.filter()
		if err != nil {
			return nil, err
		}
		filters = append(filters, f)
	}
	if !l.plain {
		// The filter's configuration arrives separately through ECDS, so a policy change never
		// rebuilds this listener or drains its connections.
		filters = append(filters, &listenerv3.Filter{
			Name: FilterName(l.proto),
			ConfigType: &listenerv3.Filter_ConfigDiscovery{ConfigDiscovery: &corev3.ExtensionConfigSource{
				ConfigSource: adsSource(),
				TypeUrls:     []string{wasmNetworkType},
			}},
		})
	}
	return append(filters, &listenerv3.Filter{
		Name:       "envoy.filters.network.tcp_proxy",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tcp},
	}), nil
}
