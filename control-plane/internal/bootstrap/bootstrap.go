// Package bootstrap renders the Envoy bootstrap that points Envoy at the control plane. The local
// stack and the Helm chart both use this output (`weighstation bootstrap`), so they cannot drift.
package bootstrap

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	"net"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Options are the deployment-specific parts of the bootstrap.
type Options struct {
	NodeID   string
	XDS      string // host:port of the control plane's ADS server
	Admin    string // host:port of Envoy's admin listener
	WasmHost string // optional host:port serving the .wasm (for a remote code source)
	// Metrics is an optional host:port for a listener that exposes only the admin's
	// /stats/prometheus and /ready, so the admin itself can stay on localhost (as in the chart).
	Metrics string
	// WaitForXDS keeps Envoy initializing (and /ready failing) until the control plane has sent
	// its clusters and listeners, instead of going live without them after Envoy's default 15s
	// initial fetch timeout: a pod must not become ready with no client listeners.
	WaitForXDS bool
	// ListenPortOffset moves every listener the control plane sends this Envoy up by that many
	// ports (several Envoys on one host, as the local stack's GATEWAY_REPLICAS runs them).
	ListenPortOffset int
}

// PortOffsetKey is the node metadata field that carries ListenPortOffset to the control plane.
const PortOffsetKey = "weighstation.io/listen-port-offset"

const (
	xdsCluster    = "weighstation_xds"
	adminCluster  = "weighstation_admin"
	metricsName   = "weighstation_metrics"
	MetricsPath   = "/stats/prometheus"
	ReadinessPath = "/ready"
	// LivenessPath answers from the admin's /server_info: 200 while Envoy's main thread serves
	// the admin, whatever the server's state. /ready would fail a pod that waits for the control
	// plane or drains, and the kubelet would restart it for that.
	LivenessPath    = "/live"
	livenessOfAdmin = "/server_info"
	routerFilter    = "envoy.filters.http.router"
	hcmFilter       = "envoy.filters.network.http_connection_manager"
)

// StatsTags turn the filter's metric names into Prometheus labels: the filter defines
// `weighstation_<metric>.protocol.<p>[.reason.<r>].tenant.<t>` (under Envoy's `wasmcustom.`
// namespace) and these regexes move each `.key.value` part into a tag.
var StatsTags = []*metricsv3.TagSpecifier{
	tag("protocol", `^wasmcustom\.weighstation_\w+(\.protocol\.([a-z]+))`),
	tag("reason", `^wasmcustom\.weighstation_\w+\.protocol\.[a-z]+(\.reason\.([a-z_]+))`),
	tag("tenant", `^wasmcustom\.weighstation_\w+\..*(\.tenant\.([a-z0-9-]+))$`),
}

func tag(name, regex string) *metricsv3.TagSpecifier {
	return &metricsv3.TagSpecifier{TagName: name, TagValue: &metricsv3.TagSpecifier_Regex{Regex: regex}}
}

func staticCluster(name, hostPort string, http2 bool) (*clusterv3.Cluster, error) {
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("%s address %q: %w", name, hostPort, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%s address %q: bad port", name, hostPort)
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(2 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
					}}},
				}},
			}}}},
		},
	}
	if http2 {
		opts, err := anypb.New(&upstreamhttpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
					},
				},
			},
		})
		if err != nil {
			return nil, err
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts}
	}
	return c, nil
}

// xdsReconnect is how often Envoy tries the control plane again while it is unreachable: at
// most every second, not Envoy's default backoff up to 30s, so that a policy changed while no
// control plane ran is in force within about a second of one being back (the attempts cost
// nothing while it is down).
var xdsReconnect = &corev3.RetryPolicy{RetryBackOff: &corev3.BackoffStrategy{
	BaseInterval: durationpb.New(250 * time.Millisecond),
	MaxInterval:  durationpb.New(time.Second),
}}

// Render returns the bootstrap as JSON (which Envoy reads as YAML too).
func Render(o Options) ([]byte, error) {
	adminHost, adminPortStr, err := net.SplitHostPort(o.Admin)
	if err != nil {
		return nil, fmt.Errorf("admin address %q: %w", o.Admin, err)
	}
	adminPort, err := strconv.ParseUint(adminPortStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("admin address %q: bad port", o.Admin)
	}
	xds, err := staticCluster(xdsCluster, o.XDS, true)
	if err != nil {
		return nil, err
	}
	clusters := []*clusterv3.Cluster{xds}
	if o.WasmHost != "" {
		wasm, err := staticCluster("weighstation_wasm", o.WasmHost, false)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, wasm)
	}
	var listeners []*listenerv3.Listener
	if o.Metrics != "" {
		admin, err := staticCluster(adminCluster, o.Admin, false)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, admin)
		l, err := metricsListener(o.Metrics)
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
	}
	ads := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	if o.WaitForXDS {
		ads.InitialFetchTimeout = durationpb.New(0)
	}
	b := &bootstrapv3.Bootstrap{
		Node: node(o),
		Admin: &bootstrapv3.Admin{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: adminHost, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(adminPort)},
		}}}},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{Clusters: clusters, Listeners: listeners},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             corev3.ApiConfigSource_GRPC,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsCluster, RetryPolicy: xdsReconnect},
				}}},
				SetNodeOnFirstMessageOnly: true,
			},
			LdsConfig: ads,
			CdsConfig: ads,
		},
		StatsConfig: &metricsv3.StatsConfig{StatsTags: StatsTags},
	}
	return protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(b)
}

// metricsListener serves GET /stats/prometheus, /ready and /live (the admin's /server_info) from
// the admin (through the weighstation_admin cluster) and answers 404 to everything else: scrapers
// and kubelet probes reach it, while the admin's mutating endpoints stay on localhost.
func metricsListener(hostPort string) (*listenerv3.Listener, error) {
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", hostPort, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: bad port", hostPort)
	}
	toAdmin := func(path, adminPath string) *routev3.Route {
		return &routev3.Route{
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Path{Path: path},
				Headers: []*routev3.HeaderMatcher{{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}},
				}}},
			},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: adminCluster},
				PrefixRewrite:    adminPath,
			}},
		}
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: metricsName,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: metricsName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    metricsName,
				Domains: []string{"*"},
				Routes: []*routev3.Route{
					toAdmin(MetricsPath, MetricsPath),
					toAdmin(ReadinessPath, ReadinessPath),
					toAdmin(LivenessPath, livenessOfAdmin),
					{
						Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
						Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404}},
					},
				},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name: metricsName,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: hcmFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}, nil
}

func node(o Options) *corev3.Node {
	n := &corev3.Node{Id: o.NodeID, Cluster: "weighstation"}
	if o.ListenPortOffset != 0 {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			PortOffsetKey: structpb.NewNumberValue(float64(o.ListenPortOffset)),
		}}
	}
	return n
}
