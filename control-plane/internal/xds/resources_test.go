package xds

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

var gateway = Gateway{
	NATSListen: "127.0.0.1:4222", NATSUpstream: "127.0.0.1:14222",
	KafkaListen: "127.0.0.1:9092", KafkaUpstream: "127.0.0.1:19092",
	BufferLimitBytes: 1 << 20, Wasm: WasmSource{File: "/x/filter.wasm"},
}

func examples(t *testing.T) *policy.Set {
	t.Helper()
	set, err := policy.LoadDir("../../../policies")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Each listener's first filter is discovered through ECDS under the name of an ECDS resource in
// the same snapshot, and tcp_proxy follows it.
func TestListenersUseECDSFilters(t *testing.T) {
	res, err := Resources(gateway, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]bool{}
	for _, r := range res[resourcev3.ExtensionConfigType] {
		ext[r.(*corev3.TypedExtensionConfig).Name] = true
	}
	if len(res[resourcev3.ListenerType]) != 2 || len(res[resourcev3.ClusterType]) != 2 {
		t.Fatalf("got %d listeners and %d clusters, want 2 and 2", len(res[resourcev3.ListenerType]), len(res[resourcev3.ClusterType]))
	}
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		filters := l.FilterChains[0].Filters
		if filters[0].GetConfigDiscovery() == nil || !ext[filters[0].Name] {
			t.Errorf("listener %s: first filter %q is not an ECDS filter served in the snapshot", l.Name, filters[0].Name)
		}
		if filters[1].Name != "envoy.filters.network.tcp_proxy" {
			t.Errorf("listener %s: second filter is %q", l.Name, filters[1].Name)
		}
		if l.PerConnectionBufferLimitBytes.GetValue() != 1<<20 {
			t.Errorf("listener %s buffer limit %d", l.Name, l.PerConnectionBufferLimitBytes.GetValue())
		}
	}
}

// A policy change alters only the plugin configuration: the VM settings stay identical, which is
// what lets Envoy reuse each worker's VM so open connections see the new policy.
func TestPolicyVersionsShareTheVMConfig(t *testing.T) {
	set := examples(t)
	vm := func(version string) *wasmnetv3.Wasm {
		res, err := Resources(gateway, set, version)
		if err != nil {
			t.Fatal(err)
		}
		w := &wasmnetv3.Wasm{}
		if err := res[resourcev3.ExtensionConfigType][0].(*corev3.TypedExtensionConfig).TypedConfig.UnmarshalTo(w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	a, b := vm("1-a"), vm("2-b")
	if !proto.Equal(a.Config.GetVmConfig(), b.Config.GetVmConfig()) {
		t.Error("the VM config changed with the policy version")
	}
	if proto.Equal(a.Config.Configuration, b.Config.Configuration) {
		t.Error("the plugin configuration did not change with the policy version")
	}
	if a.Config.GetVmConfig().Runtime != "envoy.wasm.runtime.v8" {
		t.Errorf("runtime %q", a.Config.GetVmConfig().Runtime)
	}
}

func TestBadAddressesAreReported(t *testing.T) {
	g := gateway
	g.NATSUpstream = "nats-without-port"
	if _, err := Resources(g, examples(t), "1"); err == nil {
		t.Fatal("an upstream without a port was accepted")
	}
}

// The optional benchmark baselines: a NATS and a Kafka listener with tcp_proxy alone, no
// filter, to the same cluster as the protocol's filtered listener.
func TestPlainListenersHaveNoFilter(t *testing.T) {
	g := gateway
	g.NATSPlainListen = "127.0.0.1:4223"
	g.KafkaPlainListen = "127.0.0.1:9095"
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	listeners := listenersByName(res)
	for _, tc := range []struct{ name, cluster string }{
		{"nats_plain", "nats_upstream"},
		{"kafka_plain", "kafka_upstream"},
	} {
		l, ok := listeners[tc.name]
		if !ok {
			t.Errorf("no %s listener", tc.name)
			continue
		}
		filters := l.FilterChains[0].Filters
		if len(filters) != 1 || filters[0].Name != "envoy.filters.network.tcp_proxy" {
			t.Errorf("%s filters: %v", tc.name, filters)
			continue
		}
		var proxy tcpproxyv3.TcpProxy
		if err := filters[0].GetTypedConfig().UnmarshalTo(&proxy); err != nil {
			t.Fatal(err)
		}
		if proxy.GetCluster() != tc.cluster {
			t.Errorf("%s forwards to %q, want %q", tc.name, proxy.GetCluster(), tc.cluster)
		}
	}
}

func TestSeveralUpstreamSeedsAreAllEndpoints(t *testing.T) {
	g := gateway
	g.NATSUpstream = "nats-0.nats:4222, nats-1.nats:4222,nats-2.nats:4222"
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[resourcev3.ClusterType] {
		c := r.(*clusterv3.Cluster)
		if c.Name == "nats_upstream" && len(c.LoadAssignment.Endpoints[0].LbEndpoints) != 3 {
			t.Fatalf("nats_upstream has %d endpoints, want 3", len(c.LoadAssignment.Endpoints[0].LbEndpoints))
		}
	}
}

// A second Envoy on the same host (offset 1) listens one port up everywhere, and Kafka
// responses that name the first Envoy's listener name its own instead.
func TestPortOffsetMovesListenersAndRewritesTheAdvertisedListener(t *testing.T) {
	g := gateway
	g.KafkaBrokers = []KafkaBroker{{Upstream: "127.0.0.1:19094", Listen: "127.0.0.1:9093"}}
	g.KafkaPlainListen = "127.0.0.1:9095"
	moved, err := g.WithPortOffset(1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resources(moved, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]uint32{}
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		ports[l.Name] = l.Address.GetSocketAddress().GetPortValue()
	}
	want := map[string]uint32{"nats": 4223, "kafka": 9093, "kafka_broker_0": 9094, "kafka_plain": 9096}
	for name, port := range want {
		if ports[name] != port {
			t.Errorf("listener %s on %d, want %d (all: %v)", name, ports[name], port, ports)
		}
	}
	fc := kafkaFilterConfig(t, res)
	routes := map[string]string{}
	for _, r := range fc.BrokerRoutes {
		routes[r.Upstream] = r.Advertise
	}
	if routes["127.0.0.1:19094"] != "127.0.0.1:9094" || routes["127.0.0.1:9092"] != "127.0.0.1:9093" {
		t.Errorf("broker routes %v", routes)
	}
}

// A policy with global tenants brings the quota service's cluster and tells the filter where
// it is and how many replicas are live.
func TestQuotaServiceClusterAndReplicas(t *testing.T) {
	set := examples(t)
	set.QuotaService = &policy.QuotaService{Address: "quota.weighstation:8081", Timeout: 300 * time.Millisecond}
	g := gateway
	g.Replicas = 3
	res, err := Resources(g, set, "1-a")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range res[resourcev3.ClusterType] {
		found = found || r.(*clusterv3.Cluster).Name == compile.QuotaCluster
	}
	if !found {
		t.Error("no quota cluster")
	}
	q := kafkaFilterConfig(t, res).Quota
	if q == nil || *q != (compile.Quota{Cluster: compile.QuotaCluster, Authority: "quota.weighstation:8081", Replicas: 3, TimeoutMs: 300}) {
		t.Errorf("filter quota %+v", q)
	}
	if v := snapshotVersion(set, "4-abc", "f00", 3, false); policyVersion(v) != "4-abc" || !strings.HasSuffix(v, "+replicas=3") {
		t.Errorf("snapshot version %q", v)
	}
}

func kafkaFilterConfig(t *testing.T, res map[resourcev3.Type][]types.Resource) compile.FilterConfig {
	t.Helper()
	return filterConfigFor(t, res, compile.Kafka)
}

func filterConfigFor(t *testing.T, res map[resourcev3.Type][]types.Resource, p compile.Protocol) compile.FilterConfig {
	t.Helper()
	for _, r := range res[resourcev3.ExtensionConfigType] {
		ext := r.(*corev3.TypedExtensionConfig)
		if ext.Name != FilterName(p) {
			continue
		}
		var w wasmnetv3.Wasm
		if err := ext.TypedConfig.UnmarshalTo(&w); err != nil {
			t.Fatal(err)
		}
		var sv wrapperspb.StringValue
		if err := w.Config.Configuration.UnmarshalTo(&sv); err != nil {
			t.Fatal(err)
		}
		var fc compile.FilterConfig
		if err := json.Unmarshal([]byte(sv.Value), &fc); err != nil {
			t.Fatal(err)
		}
		return fc
	}
	t.Fatalf("no %s filter config", p)
	return compile.FilterConfig{}
}

// A restarted control plane counts policy versions from 1 again: the snapshot version must
// still differ when the module (same path, new content) or a listener differs, or Envoy, which
// holds that version from before, would not be sent the new configuration.
func TestSnapshotVersionCarriesTheGatewayAndItsModule(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(dir, "filter.wasm")
	write := func(b string) {
		if err := os.WriteFile(module, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("module one")
	g := Gateway{NATSListen: "127.0.0.1:4222", Wasm: WasmSource{File: module}}
	one := gatewayFingerprint(g)
	if again := gatewayFingerprint(g); again != one {
		t.Fatalf("one gateway, two fingerprints: %s %s", one, again)
	}
	write("module two")
	if two := gatewayFingerprint(g); two == one {
		t.Error("another module at the same path gave the same fingerprint")
	}
	g.NATSListen = "127.0.0.1:4223"
	if other := gatewayFingerprint(g); other == one {
		t.Error("another listener gave the same fingerprint")
	}
}

// A client that reads nothing: the filter owes it at most Envoy's own per-connection buffer, and
// the client listeners (not the plain baselines) have the kernel abort a connection that
// acknowledges nothing for twice the slow-consumer deadline.
func TestClientListenersBoundWhatAClientThatDoesNotReadCosts(t *testing.T) {
	g := gateway
	g.NATSPlainListen = "127.0.0.1:4223"
	g.SlowConsumerDeadline = 7 * time.Second
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []compile.Protocol{compile.NATS, compile.Kafka} {
		want := compile.Backlog{MaxBytes: 1 << 20, DeadlineMs: 7000}
		if got := filterConfigFor(t, res, p).Backlog; got == nil || *got != want {
			t.Errorf("%s filter backlog %+v, want %+v", p, got, want)
		}
	}
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		opts := l.GetSocketOptions()
		if l.Name == "nats_plain" {
			if len(opts) != 0 {
				t.Errorf("the plain baseline has socket options %v", opts)
			}
			continue
		}
		if len(opts) != 1 || opts[0].GetLevel() != 6 || opts[0].GetName() != 18 || opts[0].GetIntValue() != 14000 {
			t.Errorf("listener %s socket options %v, want TCP_USER_TIMEOUT 14000 ms", l.Name, opts)
		}
	}
}

// listenersByName are the listeners among res, by name.
func listenersByName(res map[resourcev3.Type][]types.Resource) map[string]*listenerv3.Listener {
	out := map[string]*listenerv3.Listener{}
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		out[l.Name] = l
	}
	return out
}
