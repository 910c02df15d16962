package main

import (
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// --noop-listen takes a protocol's listener and a module, with the module's path made absolute
// (Envoy resolves it from its own working directory); anything else is refused.
func TestNoopListenFlag(t *testing.T) {
	var list []xds.NoopListener
	f := noopListeners{&list}
	if err := f.Set("kafka=127.0.0.1:9130,native=/m/libnoop.so"); err != nil {
		t.Fatal(err)
	}
	if err := f.Set("nats=127.0.0.1:4230,wasm=noop.wasm"); err != nil {
		t.Fatal(err)
	}
	want := xds.NoopListener{Proto: compile.Kafka, Listen: "127.0.0.1:9130", Kind: xds.NoopNative, File: "/m/libnoop.so"}
	if len(list) != 2 || list[0] != want || list[1].Kind != xds.NoopWasm || list[1].File[0] != '/' {
		t.Errorf("parsed %+v", list)
	}
	for _, bad := range []string{"", "nats=127.0.0.1:4230", "nats=127.0.0.1:4230,lua=x.lua", "http=127.0.0.1:80,wasm=x.wasm", "nats=,wasm=x.wasm", "nats=127.0.0.1:4230,wasm="} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
