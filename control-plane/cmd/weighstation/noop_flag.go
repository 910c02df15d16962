package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// noopListenUsage is --noop-listen's syntax.
const noopListenUsage = "nats|kafka=ADDRESS,wasm|native=FILE"

// noopListeners collects repeated --noop-listen flags: benchmark baselines whose filter, a
// module that does nothing (a .wasm, or a dynamic module's .so), runs ahead of tcp_proxy.
type noopListeners struct{ list *[]xds.NoopListener }

func (n noopListeners) String() string {
	if n.list == nil {
		return ""
	}
	parts := make([]string, 0, len(*n.list))
	for _, l := range *n.list {
		parts = append(parts, fmt.Sprintf("%s=%s,%s=%s", l.Proto, l.Listen, l.Kind, l.File))
	}
	return strings.Join(parts, " ")
}

func (n noopListeners) Set(v string) error {
	listener, module, _ := strings.Cut(v, ",")
	proto, listen, okListen := strings.Cut(listener, "=")
	kind, file, okModule := strings.Cut(module, "=")
	if !okListen || !okModule || listen == "" || file == "" {
		return fmt.Errorf("%q is not %s", v, noopListenUsage)
	}
	l := xds.NoopListener{Proto: compile.Protocol(proto), Listen: listen, Kind: xds.NoopKind(kind)}
	if l.Proto != compile.NATS && l.Proto != compile.Kafka {
		return fmt.Errorf("%q: the protocol is %s or %s", v, compile.NATS, compile.Kafka)
	}
	if l.Kind != xds.NoopWasm && l.Kind != xds.NoopNative {
		return fmt.Errorf("%q: the module is %s or %s", v, xds.NoopWasm, xds.NoopNative)
	}
	// Envoy resolves the file from its own working directory, not ours.
	var err error
	if l.File, err = filepath.Abs(file); err != nil {
		return err
	}
	*n.list = append(*n.list, l)
	return nil
}
