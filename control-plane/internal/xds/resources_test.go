package xds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

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

// The optional benchmark baseline: a NATS listener with tcp_proxy alone, no filter.
func TestPlainNATSListenerHasNoFilter(t *testing.T) {
	g := gateway
	g.NATSPlainListen = "127.0.0.1:4223"
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		if l.Name != "nats_plain" {
			continue
		}
		found = true
		filters := l.FilterChains[0].Filters
		if len(filters) != 1 || filters[0].Name != "envoy.filters.network.tcp_proxy" {
			t.Errorf("nats_plain filters: %v", filters)
		}
	}
	if !found {
		t.Fatal("no nats_plain listener")
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
