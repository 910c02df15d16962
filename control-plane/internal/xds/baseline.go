package xds

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	dynamicmodulesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/dynamic_modules/v3"
	dynamicnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/dynamic_modules/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// Baseline listeners are for benchmarks only: in plaintext, to the same upstream as the
// protocol's gateway listener, with tcp_proxy alone (NATSPlainListen, KafkaPlainListen) or behind
// a network filter that does nothing (NoopListeners). Against the gateway they tell what Envoy
// costs without the filter, and what merely having a filter costs, Wasm or native, apart from
// what the filter does.

// NoopKind is how a no-op filter runs.
type NoopKind string

const (
	// NoopWasm is a proxy-wasm module in the filter's own runtime (V8).
	NoopWasm NoopKind = "wasm"
	// NoopNative is an Envoy dynamic module: a shared object Envoy loads into its own process.
	NoopNative NoopKind = "native"
)

// NoopListener is a baseline listener whose filter (a module that continues at once on every
// event) runs ahead of tcp_proxy.
type NoopListener struct {
	Proto  compile.Protocol
	Listen string // host:port
	Kind   NoopKind
	// File is the module: a .wasm, or a .so built for this Envoy's dynamic module ABI (loaded
	// from this path, so Envoy needs no ENVOY_DYNAMIC_MODULES_SEARCH_PATH).
	File string
}

// baselineListeners are the plain and no-op listeners of the protocols whose gateway listener
// is on: their upstream cluster exists only then.
func (g Gateway) baselineListeners() []listenerSpec {
	on := map[compile.Protocol]bool{compile.NATS: g.NATSListen != "", compile.Kafka: g.KafkaListen != ""}
	var out []listenerSpec
	plain := []struct {
		proto  compile.Protocol
		listen string
	}{{compile.NATS, g.NATSPlainListen}, {compile.Kafka, g.KafkaPlainListen}}
	for _, p := range plain {
		if p.listen != "" && on[p.proto] {
			out = append(out, listenerSpec{proto: p.proto, name: string(p.proto) + "_plain", listen: p.listen, cluster: clusterName(p.proto), plain: true})
		}
	}
	for _, n := range g.NoopListeners {
		if on[n.Proto] {
			out = append(out, listenerSpec{proto: n.Proto, name: fmt.Sprintf("%s_noop_%s", n.Proto, n.Kind), listen: n.Listen,
				cluster: clusterName(n.Proto), plain: true, noop: &n})
		}
	}
	return out
}

// movedNoops are the no-op listeners with their ports moved (Gateway.WithPortOffset).
func movedNoops(ns []NoopListener, move func(string) (string, error)) ([]NoopListener, error) {
	out := append([]NoopListener(nil), ns...)
	for i := range out {
		var err error
		if out[i].Listen, err = move(out[i].Listen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// noopVMID keeps the no-op Wasm module in a VM of its own, apart from the filter's.
const noopVMID = "weighstation-noop"

// filter is the listener filter that runs the no-op module.
func (n NoopListener) filter() (*listenerv3.Filter, error) {
	var name string
	var config proto.Message
	switch n.Kind {
	case NoopWasm:
		name = "envoy.filters.network.wasm"
		config = &wasmnetv3.Wasm{Config: &wasmv3.PluginConfig{
			Name: "weighstation.noop",
			Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: &wasmv3.VmConfig{
				VmId: noopVMID, Runtime: WasmRuntime, Code: codeSource(WasmSource{File: n.File}),
			}},
		}}
	case NoopNative:
		name = "envoy.filters.network.dynamic_modules"
		config = &dynamicnetv3.DynamicModuleNetworkFilter{
			DynamicModuleConfig: &dynamicmodulesv3.DynamicModuleConfig{Module: codeSource(WasmSource{File: n.File})},
			FilterName:          "noop",
		}
	default:
		return nil, fmt.Errorf("no-op listener %s: kind %q is neither %q nor %q", n.Listen, n.Kind, NoopWasm, NoopNative)
	}
	typed, err := mustAny(config)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: typed}}, nil
}
