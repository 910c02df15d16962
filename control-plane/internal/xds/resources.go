// Package xds builds the Envoy resources weighstation serves and runs the ADS server.
package xds

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
)

// Names shared with the Envoy bootstrap, the Wasm filter and the docs.
const (
	WasmRuntime = "envoy.wasm.runtime.v8"
	// NATSProxySeedEnv holds the nkey seed the filter signs NATS CONNECTs with (proxy_sig).
	NATSProxySeedEnv = "WEIGHSTATION_NATS_PROXY_SEED"
	VMID             = "weighstation"
	RootID           = "weighstation"
	wasmNetworkType  = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm"
	upstreamTimeout  = 5 * time.Second
	filterNamePrefix = "weighstation."
)

// FilterName is the listener filter (and ECDS resource) name for a protocol.
func FilterName(p compile.Protocol) string { return filterNamePrefix + string(p) }

// WasmSource says where Envoy loads the filter module from: a local file, or an HTTP URL pinned
// by its sha256 (as the Helm chart does).
type WasmSource struct {
	File   string
	URL    string
	SHA256 string
}

// Gateway is what the operator configures about the data path; policies are served beside it.
type Gateway struct {
	NATSListen   string // host:port; empty disables the listener
	NATSUpstream string // host:port of nats-server, or several comma-separated seed servers
	// NATSAdvertise and NATSTLSAdvertise are the gateway addresses (host:port) the clients of
	// NATSListen and NATSTLSListen are told in INFO, in place of the servers' (connect_urls: the
	// first is also host and port); none: INFO names the listener and no connect_urls.
	NATSAdvertise    []string
	NATSTLSAdvertise []string
	KafkaListen      string
	KafkaUpstream    string
	// KafkaTLS is how KafkaListen meets clients; KafkaUpstreamTLS, whether the gateway reaches
	// KafkaUpstream over TLS.
	KafkaTLS         Downstream
	KafkaUpstreamTLS bool
	// KafkaBrokers front brokers that advertise their own addresses: each gets a gateway
	// listener, and the filter rewrites the brokers' addresses to the gateway's.
	KafkaBrokers []KafkaBroker
	// KafkaClusters are the listener kinds of a Kafka cluster the gateway discovers;
	// KafkaNodes the brokers discovered so far, which have upstreams (by filter chain,
	// KafkaCluster.Chain, each node id's address: internal/discovery); KafkaFronted those the
	// filter hands out (Server.SetKafkaNodes).
	KafkaClusters []KafkaCluster
	KafkaNodes    map[string]map[int32]string
	KafkaFronted  map[string]map[int32]string
	// NATSPlainListen and KafkaPlainListen, if set, are a second NATS and Kafka listener with
	// tcp_proxy alone, and NoopListeners more with a filter that does nothing: the baselines
	// benchmarks compare the filter's overhead against (baseline.go).
	NATSPlainListen  string
	KafkaPlainListen string
	NoopListeners    []NoopListener
	// NATSTLSListen, if set, is a TLS-first NATS listener (NATSTLS: TLS or MutualTLS) beside
	// NATSListen, with the same filter configuration and upstream.
	NATSTLSListen string
	NATSTLS       Downstream
	// NATSUpstreamTLS: the gateway reaches nats-server over TLS from the first byte (the
	// server's `tls { handshake_first: true }`).
	NATSUpstreamTLS bool
	// UpstreamServerName, if set, is the name every broker's certificate must carry and the SNI
	// sent; by default each upstream's own host.
	UpstreamServerName string
	// TLSFiles says which TLS material is configured; its content reaches Envoy over SDS
	// (Server.SetTLS), so listeners refer to it by name and never change on rotation.
	TLSFiles         tlssecrets.Files
	BufferLimitBytes uint32 // per_connection_buffer_limit_bytes: where TCP backpressure starts
	// SlowConsumerDeadline: a client the filter owes BufferLimitBytes of its own answers and that
	// takes nothing for this long is closed (0: the filter's default, 10 s).
	SlowConsumerDeadline time.Duration
	Wasm                 WasmSource
	// Replicas is how many Envoys are connected: a global limit's fallback divides by it.
	Replicas int
	// Rebuild makes the filter configurations differ from those sent before (compile.FilterConfig).
	Rebuild int
	// Reports, when set, has the filter report usage and decisions to the control plane.
	Reports *Reports
	// NoTenantFeed sends every policy change whole by ECDS, as without reports
	// (internal/tenantfeed; the chart sets it for now).
	NoTenantFeed bool
	// kafkaAdvertisedAs is the address brokers advertise for KafkaListen when this gateway's
	// listeners were moved (WithPortOffset): responses naming it are rewritten to KafkaListen.
	kafkaAdvertisedAs string
}

// Reports is where the filter reports usage and decisions: this control plane's HTTP listener
// as Envoy reaches it, and how decisions are sampled.
type Reports struct {
	Address            string // host:port
	DecisionsPerSecond uint32
	DelayThreshold     time.Duration
}

// backlog is the filter's per-client bound on what it owes: the same budget as Envoy's own
// per-connection buffer.
func (g Gateway) backlog() *compile.Backlog {
	if g.BufferLimitBytes == 0 && g.SlowConsumerDeadline == 0 {
		return nil
	}
	b := &compile.Backlog{MaxBytes: g.BufferLimitBytes, DeadlineMs: g.SlowConsumerDeadline.Milliseconds()}
	if b.MaxBytes == 0 {
		b.MaxBytes = 32 << 10
	}
	if b.DeadlineMs == 0 {
		b.DeadlineMs = 10_000
	}
	return b
}

func (r *Reports) filter() *compile.Reports {
	if r == nil {
		return nil
	}
	return &compile.Reports{
		Cluster:            compile.ReportsCluster,
		Authority:          r.Address,
		DecisionsPerSecond: r.DecisionsPerSecond,
		DelayThresholdMs:   uint64(r.DelayThreshold.Milliseconds()),
	}
}

// WithPortOffset moves every listener's port up by offset: several Envoys on one host (the
// local stack's GATEWAY_REPLICAS) each listen on their own consecutive ports, and clients that
// bootstrap through one stay on it.
func (g Gateway) WithPortOffset(offset int) (Gateway, error) {
	if offset == 0 {
		return g, nil
	}
	move := func(hp string) (string, error) {
		if hp == "" {
			return "", nil
		}
		host, port, err := splitHostPort(hp)
		if err != nil {
			return "", err
		}
		if int(port)+offset > 65535 {
			return "", fmt.Errorf("address %q moved by %d is past port 65535", hp, offset)
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port)+offset)), nil
	}
	out := g
	out.KafkaBrokers = append([]KafkaBroker(nil), g.KafkaBrokers...)
	out.kafkaAdvertisedAs = g.KafkaListen
	var err error
	for _, a := range []*string{&out.NATSListen, &out.KafkaListen, &out.NATSPlainListen, &out.KafkaPlainListen, &out.NATSTLSListen} {
		if *a, err = move(*a); err != nil {
			return g, err
		}
	}
	if out.NoopListeners, err = movedNoops(g.NoopListeners, move); err != nil {
		return g, err
	}
	out.KafkaClusters = append([]KafkaCluster(nil), g.KafkaClusters...)
	for i := range out.KafkaClusters {
		if out.KafkaClusters[i], err = out.KafkaClusters[i].moved(move); err != nil {
			return g, err
		}
	}
	for i := range out.KafkaBrokers {
		b := &out.KafkaBrokers[i]
		if b.Advertise == "" {
			b.Advertise = b.Listen
		}
		if b.Listen, err = move(b.Listen); err != nil {
			return g, err
		}
		if b.Advertise, err = move(b.Advertise); err != nil {
			return g, err
		}
	}
	return out, nil
}

// KafkaBroker is one broker of an existing cluster: the address it advertises (and is reached
// at), the gateway listener for it, and the address clients are told (defaults to Listen).
type KafkaBroker struct {
	Upstream  string
	Listen    string
	Advertise string
	// Downstream is how the listener meets clients; UpstreamTLS, whether the gateway reaches
	// the broker over TLS.
	Downstream  Downstream
	UpstreamTLS bool
}

// Check reports a configuration Envoy would refuse or that would not do what it says.
func (g Gateway) Check() error {
	if err := g.TLSFiles.Check(); err != nil {
		return err
	}
	if err := checkAdvertised("--nats-advertise", g.NATSAdvertise); err != nil {
		return err
	}
	if err := checkAdvertised("--nats-tls-advertise", g.NATSTLSAdvertise); err != nil {
		return err
	}
	type use struct {
		what        string
		downstream  Downstream
		upstreamTLS bool
	}
	uses := []use{{"--nats-upstream-tls", Plaintext, g.NATSUpstreamTLS}}
	if g.NATSTLSListen != "" {
		uses = append(uses, use{"--nats-tls-listen", g.NATSTLS, false})
	}
	if g.KafkaListen != "" {
		uses = append(uses, use{"--kafka-listen", g.KafkaTLS, g.KafkaUpstreamTLS})
	}
	for _, b := range g.KafkaBrokers {
		uses = append(uses, use{"--kafka-broker " + b.Upstream + "=" + b.Listen, b.Downstream, b.UpstreamTLS})
	}
	if err := checkKafkaClusters(g.KafkaClusters); err != nil {
		return err
	}
	for _, c := range g.KafkaClusters {
		uses = append(uses, use{"--kafka-cluster " + c.Name, c.Downstream, c.UpstreamTLS})
	}
	for _, u := range uses {
		switch {
		case u.downstream != Plaintext && !g.TLSFiles.Server():
			return fmt.Errorf("%s terminates TLS: it needs --tls-cert-file and --tls-key-file", u.what)
		case u.downstream == MutualTLS && !g.TLSFiles.ClientCAs():
			return fmt.Errorf("%s requires client certificates: it needs --tls-client-ca-file to verify them", u.what)
		case u.upstreamTLS && !g.TLSFiles.Upstream():
			return fmt.Errorf("%s reaches the broker over TLS: it needs --upstream-tls-ca-file to verify the broker", u.what)
		}
	}
	return nil
}

// listenerSpec is one gateway listener and the cluster it forwards to.
type listenerSpec struct {
	proto      compile.Protocol
	name       string
	listen     string
	cluster    string
	downstream Downstream
	// plain listeners run tcp_proxy alone, without the filter (a benchmark baseline); noop, if
	// set, ahead of it a filter that does nothing (baseline.go).
	plain bool
	noop  *NoopListener
	// chain names the filter chain, by which the filter knows the listener (NATS: its INFO;
	// Kafka: its discovered cluster).
	chain string
	// retries: a failed connect is tried again on another upstream endpoint (seed servers).
	retries bool
}

// clusterSpec is one upstream: a broker, or the seed servers of a NATS cluster.
type clusterSpec struct {
	name     string
	upstream string
	tls      bool
	// nats: the seed servers of a NATS cluster, health-checked and balanced (nats.go).
	nats bool
	// seeds: brokers a Kafka bootstrap listener balances, health-checked by a connect.
	seeds bool
}

// Resources returns every resource of one snapshot: clusters, listeners and the filter
// configurations (ECDS). Only the ECDS resources change when policies change, so a reload is a
// configuration-only update that Envoy applies without touching listeners or connections.
func Resources(g Gateway, set *policy.Set, version string) (map[resourcev3.Type][]types.Resource, error) {
	res := map[resourcev3.Type][]types.Resource{}
	var routes []compile.BrokerRoute
	for _, b := range g.KafkaBrokers {
		adv := b.Advertise
		if adv == "" {
			adv = b.Listen
		}
		routes = append(routes, compile.BrokerRoute{Upstream: b.Upstream, Advertise: adv})
	}
	if g.kafkaAdvertisedAs != "" && g.KafkaListen != "" {
		routes = append(routes, compile.BrokerRoute{Upstream: g.kafkaAdvertisedAs, Advertise: g.KafkaListen})
	}
	var clusters []clusterSpec
	var listeners []listenerSpec
	if q := set.QuotaService; q != nil {
		clusters = append(clusters, clusterSpec{name: compile.QuotaCluster, upstream: q.Address})
	}
	if g.Reports != nil {
		clusters = append(clusters, clusterSpec{name: compile.ReportsCluster, upstream: g.Reports.Address})
	}
	if g.NATSListen != "" || g.NATSTLSListen != "" {
		clusters = append(clusters, clusterSpec{name: clusterName(compile.NATS), upstream: g.NATSUpstream, tls: g.NATSUpstreamTLS, nats: true})
	}
	if g.NATSListen != "" {
		listeners = append(listeners, listenerSpec{proto: compile.NATS, name: string(compile.NATS), listen: g.NATSListen,
			cluster: clusterName(compile.NATS), chain: natsChain(string(compile.NATS)), retries: true})
	}
	if g.NATSTLSListen != "" {
		listeners = append(listeners, listenerSpec{proto: compile.NATS, name: natsTLSListenerName, listen: g.NATSTLSListen,
			cluster: clusterName(compile.NATS), downstream: g.NATSTLS, chain: natsChain(natsTLSListenerName), retries: true})
	}
	if g.KafkaListen != "" {
		clusters = append(clusters, clusterSpec{name: clusterName(compile.Kafka), upstream: g.KafkaUpstream, tls: g.KafkaUpstreamTLS})
		listeners = append(listeners, listenerSpec{proto: compile.Kafka, name: string(compile.Kafka), listen: g.KafkaListen, cluster: clusterName(compile.Kafka), downstream: g.KafkaTLS})
	}
	for i, b := range g.KafkaBrokers {
		name := fmt.Sprintf("kafka_broker_%d", i)
		clusters = append(clusters, clusterSpec{name: name, upstream: b.Upstream, tls: b.UpstreamTLS})
		listeners = append(listeners, listenerSpec{proto: compile.Kafka, name: name, listen: b.Listen, cluster: name, downstream: b.Downstream})
	}
	var kafkaClusters []compile.KafkaCluster
	for _, c := range g.KafkaClusters {
		fronted := g.KafkaNodes[c.Chain()]
		ls, cs, err := c.specs(fronted)
		if err != nil {
			return nil, err
		}
		listeners, clusters = append(listeners, ls...), append(clusters, cs...)
		fc, err := c.filter(fronted, g.KafkaFronted[c.Chain()])
		if err != nil {
			return nil, err
		}
		kafkaClusters = append(kafkaClusters, fc)
	}
	listeners = append(listeners, g.baselineListeners()...)
	for _, c := range clusters {
		cl, err := cluster(c, g)
		if err != nil {
			return nil, err
		}
		res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], cl)
	}
	filters := map[compile.Protocol]bool{}
	for _, l := range listeners {
		lis, err := listener(l, g)
		if err != nil {
			return nil, err
		}
		res[resourcev3.ListenerType] = append(res[resourcev3.ListenerType], lis)
		if l.plain || filters[l.proto] {
			continue
		}
		// One filter configuration per protocol, shared by all its listeners.
		filters[l.proto] = true
		fc := compile.Filter(set, version, l.proto, g.Replicas)
		if l.proto == compile.Kafka {
			fc.BrokerRoutes, fc.KafkaClusters = routes, kafkaClusters
		}
		if l.proto == compile.NATS {
			if fc.NATSListeners, err = natsListeners(g); err != nil {
				return nil, err
			}
		}
		fc.Reports = g.Reports.filter()
		fc.Feed = g.Reports != nil && !g.NoTenantFeed
		fc.Backlog = g.backlog()
		fc.Rebuild = g.Rebuild
		ext, err := filterConfig(l.proto, g.Wasm, fc)
		if err != nil {
			return nil, err
		}
		res[resourcev3.ExtensionConfigType] = append(res[resourcev3.ExtensionConfigType], ext)
	}
	return res, nil
}

func splitHostPort(hp string) (string, uint32, error) {
	host, portStr, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", hp, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: bad port", hp)
	}
	return host, uint32(port), nil
}

func socketAddress(hp string) (*corev3.Address, error) {
	host, port, err := splitHostPort(hp)
	if err != nil {
		return nil, err
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}, nil
}

func clusterName(p compile.Protocol) string { return string(p) + "_upstream" }

// cluster routes to the upstream, which may list several comma-separated host:port endpoints
// (the seed servers of a NATS cluster, say): Envoy balances new connections across them.
func cluster(c clusterSpec, g Gateway) (*clusterv3.Cluster, error) {
	var endpoints []*endpointv3.LbEndpoint
	for _, hp := range strings.Split(c.upstream, ",") {
		addr, err := socketAddress(strings.TrimSpace(hp))
		if err != nil {
			return nil, fmt.Errorf("%s upstream: %w", c.name, err)
		}
		endpoints = append(endpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
		})
	}
	out := &clusterv3.Cluster{
		Name:                 c.name,
		ConnectTimeout:       durationpb.New(upstreamTimeout),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: c.name,
			Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: endpoints}},
		},
	}
	switch {
	case c.nats:
		withSeedHealth(out, []byte("INFO"))
	case c.seeds:
		withSeedHealth(out, nil)
	}
	if c.tls {
		ts, err := upstreamTransportSocket(c.upstream, g.UpstreamServerName, g.TLSFiles)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		out.TransportSocket = ts
	}
	return out, nil
}

// Linux's TCP_USER_TIMEOUT (IPPROTO_TCP 6, option 18), in milliseconds.
const (
	ipprotoTCP     = 6
	tcpUserTimeout = 18
)

// slowConsumerTimeout has the kernel abort a client connection that acknowledges nothing the
// gateway sends it for twice the slow-consumer deadline (a zero window counts since Linux 5.11).
// The filter's own slow-consumer close waits for Envoy's buffer toward the client to flush, which
// a client that reads nothing never lets happen; this completes it, and ends alike a client that
// leaves the broker's own bytes unread (docs/security.md). Twice: the filter decides first (its
// deadline starts once the client is held, a little after its window closed), so it is the one
// that names and counts the slow consumer. Accepted sockets inherit it.
func slowConsumerTimeout(deadline time.Duration) []*corev3.SocketOption {
	if deadline <= 0 {
		return nil
	}
	return []*corev3.SocketOption{{
		Description: "TCP_USER_TIMEOUT: twice the slow-consumer deadline",
		Level:       ipprotoTCP,
		Name:        tcpUserTimeout,
		Value:       &corev3.SocketOption_IntValue{IntValue: 2 * deadline.Milliseconds()},
		State:       corev3.SocketOption_STATE_PREBIND,
	}}
}

func mustAny(m proto.Message) (*anypb.Any, error) { return anypb.New(m) }

func codeSource(w WasmSource) *corev3.AsyncDataSource {
	if w.URL != "" {
		return &corev3.AsyncDataSource{Specifier: &corev3.AsyncDataSource_Remote{Remote: &corev3.RemoteDataSource{
			HttpUri: &corev3.HttpUri{
				Uri:              w.URL,
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "weighstation_wasm"},
				Timeout:          durationpb.New(10 * time.Second),
			},
			Sha256: w.SHA256,
		}}}
	}
	return &corev3.AsyncDataSource{Specifier: &corev3.AsyncDataSource_Local{Local: &corev3.DataSource{
		Specifier: &corev3.DataSource_Filename{Filename: w.File},
	}}}
}

// filterConfig is the ECDS resource carrying the Wasm network filter and its policy JSON. The VM
// settings stay byte-identical across policy versions, so Envoy reuses each worker's VM and only
// calls on_configure on a new root context: live connections keep running in the same VM.
func filterConfig(p compile.Protocol, w WasmSource, fc compile.FilterConfig) (types.Resource, error) {
	vmConfig, err := mustAny(wrapperspb.String(""))
	if err != nil {
		return nil, err
	}
	pluginConfig, err := mustAny(wrapperspb.String(fc.JSON()))
	if err != nil {
		return nil, err
	}
	wasm, err := mustAny(&wasmnetv3.Wasm{Config: &wasmv3.PluginConfig{
		Name:   FilterName(p),
		RootId: RootID,
		Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: &wasmv3.VmConfig{
			VmId:          VMID,
			Runtime:       WasmRuntime,
			Code:          codeSource(w),
			Configuration: vmConfig,
			// The gateway's NATS proxy nkey seed reaches the VM from Envoy's environment (a
			// Kubernetes Secret), never through xDS, where /config_dump would show it.
			EnvironmentVariables: &wasmv3.EnvironmentVariables{HostEnvKeys: []string{NATSProxySeedEnv}},
		}},
		Configuration: pluginConfig,
	}})
	if err != nil {
		return nil, err
	}
	return &corev3.TypedExtensionConfig{Name: FilterName(p), TypedConfig: wasm}, nil
}
