package xds

import (
	"testing"

	dynamicnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/dynamic_modules/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// The no-op baselines: the module, in a VM of its own or loaded from its file, then tcp_proxy
// to the protocol's cluster, no weighstation filter; moved with the other listeners.
func TestNoopListenersRunTheirModuleAheadOfTcpProxy(t *testing.T) {
	g := gateway
	g.NoopListeners = []NoopListener{
		{Proto: compile.NATS, Listen: "127.0.0.1:4230", Kind: NoopWasm, File: "/x/noop.wasm"},
		{Proto: compile.Kafka, Listen: "127.0.0.1:9130", Kind: NoopNative, File: "/x/libnoop.so"},
	}
	moved, err := g.WithPortOffset(1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resources(moved, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	listeners := listenersByName(res)
	for _, tc := range []struct {
		name, filter string
		port         uint32
	}{
		{"nats_noop_wasm", "envoy.filters.network.wasm", 4231},
		{"kafka_noop_native", "envoy.filters.network.dynamic_modules", 9131},
	} {
		l, ok := listeners[tc.name]
		if !ok {
			t.Errorf("no %s listener", tc.name)
			continue
		}
		if port := l.Address.GetSocketAddress().GetPortValue(); port != tc.port {
			t.Errorf("%s on %d, want %d", tc.name, port, tc.port)
		}
		filters := l.FilterChains[0].Filters
		if len(filters) != 2 || filters[0].Name != tc.filter || filters[1].Name != "envoy.filters.network.tcp_proxy" {
			t.Errorf("%s filters: %v", tc.name, filters)
		}
	}
	var wasm wasmnetv3.Wasm
	if err := listeners["nats_noop_wasm"].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&wasm); err != nil {
		t.Fatal(err)
	}
	if vm := wasm.GetConfig().GetVmConfig(); vm.GetVmId() != noopVMID || vm.GetCode().GetLocal().GetFilename() != "/x/noop.wasm" {
		t.Errorf("no-op Wasm VM %v", vm)
	}
	var native dynamicnetv3.DynamicModuleNetworkFilter
	if err := listeners["kafka_noop_native"].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&native); err != nil {
		t.Fatal(err)
	}
	if file := native.GetDynamicModuleConfig().GetModule().GetLocal().GetFilename(); file != "/x/libnoop.so" {
		t.Errorf("no-op dynamic module loaded from %q", file)
	}
}
