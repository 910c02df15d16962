// Package impact answers "whom will this policy change hurt?" before it rolls out: it replays
// recorded per-second usage (`weighstation usage export --resolution 1s`) against proposed
// policies and reports, per tenant, what would have been delayed or refused, when, and by which
// limit.
//
// The replay runs the filter's own limiter: weighstation_core::impact, built as a small Wasm
// module (wasm-filter/impact) and run here with wazero. A Go port would be a second limiter to
// keep exactly equal to the first (GCRA rounding, burst depth, the order of checks) forever,
// checked only as far as shared test vectors reach; cgo would make the control plane binary
// depend on a native library per platform. The Wasm module is the same source compiled for the
// same target as the filter, needs nothing from the host, and costs ~100 KiB.
package impact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Simulator runs the replay module.
type Simulator struct {
	runtime wazero.Runtime
	module  api.Module
	alloc   api.Function
	free    api.Function
	replay  api.Function
}

// Load compiles the module at path (weighstation_impact.wasm).
func Load(ctx context.Context, path string) (*Simulator, error) {
	code, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the replay module: %w (built by `make control-plane` beside the weighstation binary)", err)
	}
	rt := wazero.NewRuntime(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("the replay module %s: %w", path, err)
	}
	s := &Simulator{runtime: rt, module: mod, alloc: mod.ExportedFunction("impact_alloc"),
		free: mod.ExportedFunction("impact_free"), replay: mod.ExportedFunction("impact_replay")}
	if s.alloc == nil || s.free == nil || s.replay == nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("%s is not weighstation's replay module (no impact_replay)", path)
	}
	return s, nil
}

func (s *Simulator) Close(ctx context.Context) error { return s.runtime.Close(ctx) }

// Trace is one tenant's recorded traffic and the limits to replay it against (the filter's
// resolved limits: control-plane/internal/compile).
type Trace struct {
	Limits  any      `json:"limits"`
	Reject  bool     `json:"reject"`
	Seconds []Second `json:"seconds"`
	// Clients are the tenant's client buckets with the traffic recorded of their clients (part
	// of Seconds).
	Clients []ClientTrace `json:"clients,omitempty"`
}

// ClientTrace is one client bucket's limits and its clients' recorded traffic.
type ClientTrace struct {
	Limits  any      `json:"limits"`
	Seconds []Second `json:"seconds"`
}

type Second struct {
	StartMs  int64  `json:"startMs"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// Consumed is what the tenant's consumers received (the read side).
	Consumed uint64 `json:"consumed"`
}

// Outcome is what the limits did to one second's messages.
type Outcome struct {
	StartMs      int64  `json:"startMs"`
	Offered      uint64 `json:"offered"`
	Admitted     uint64 `json:"admitted"`
	RefusedSize  uint64 `json:"refusedSize"`
	RefusedRate  uint64 `json:"refusedRate"`
	RefusedQueue uint64 `json:"refusedQueue"`
	// RefusedClient are refused by a client's bucket: its rate or its share of the queue.
	RefusedClient uint64 `json:"refusedClient"`
	Delayed       uint64 `json:"delayed"`
	MaxDelayMs    uint64 `json:"maxDelayMs"`
	Consumed      uint64 `json:"consumed"`
	// ReadLagMs is how far behind the proposed consume limit leaves the tenant's consumers at
	// the second's end: they receive the same bytes, that much later.
	ReadLagMs uint64 `json:"readLagMs"`
}

// Replay runs one trace through the filter's limiter.
func (s *Simulator) Replay(ctx context.Context, t Trace) ([]Outcome, error) {
	in, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	res, err := s.alloc.Call(ctx, uint64(len(in)))
	if err != nil {
		return nil, err
	}
	ptr := uint32(res[0])
	if !s.module.Memory().Write(ptr, in) {
		_, _ = s.free.Call(ctx, uint64(ptr), uint64(len(in)))
		return nil, errors.New("replay module: input out of its memory")
	}
	res, err = s.replay.Call(ctx, uint64(ptr), uint64(len(in)))
	if err != nil {
		return nil, err
	}
	outPtr, outLen := uint32(res[0]>>32), uint32(res[0])
	raw, ok := s.module.Memory().Read(outPtr, outLen)
	if !ok {
		return nil, errors.New("replay module: answer out of its memory")
	}
	answer := append([]byte(nil), raw...)
	if _, err := s.free.Call(ctx, uint64(outPtr), uint64(outLen)); err != nil {
		return nil, err
	}
	var failed struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(answer, &failed) == nil && failed.Error != "" {
		return nil, fmt.Errorf("replay module: %s", failed.Error)
	}
	var out []Outcome
	return out, json.Unmarshal(answer, &out)
}
