package main

import (
	"fmt"
	"strings"
	"testing"
)

// floorCosts are one workload's tcp_proxy, gateway and no-op filters, each adding its own over
// tcp_proxy's 5 µs per message.
func floorCosts(d direction, bytes int, wasm, native float64) []cpuCost {
	sh := shape(d, 1, bytes)
	return []cpuCost{
		measured(sh, "gateway", 6, 1000), measured(sh, "tcp-proxy", 5, 1000),
		measured(sh, wasmNoop, 5+wasm, 1000), measured(sh, nativeNoop, 5+native, 1000),
	}
}

// The table has a row per workload measured through both floors, and the decision is taken
// at 16 KiB: go only where the native floor is under half the Wasm floor everywhere, and the
// Wasm floor is above tcp_proxy in every round.
func TestFloorTableAndDecision(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		pubNative, subNative, subWasm float64
		want                          string
	}{
		{"native well under Wasm", 0.1, 0.05, 0.4, "below half in every workload, so a native filter is worth pursuing"},
		{"native at half of Wasm on delivery", 0.1, 0.2, 0.4, "not below half in every workload, so a native filter is not pursued (stop)"},
		{"Wasm lost in the noise", 0.1, -0.2, -0.1, "(nats sub; the Wasm floor's rounds range from -0.100 to -0.100, within this run's noise): the Wasm floor is not told apart from tcp_proxy in every workload, so the native floor is not shown below half of it: a native filter is not pursued (stop)"},
	} {
		costs := append(floorCosts(natsPublish, 128, 0.2, 0.01), floorCosts(natsPublish, 16<<10, 0.6, tc.pubNative)...)
		costs = append(costs, floorCosts(natsDelivery, 16<<10, tc.subWasm, tc.subNative)...)
		costs = append(costs, measured(shape(natsPublish, 1, 1024), "tcp-proxy", 1, 1000)) // no floors: no row
		var b strings.Builder
		writeFloors(func(f string, a ...any) { b.WriteString(fmt.Sprintf(f, a...)) }, costs)
		md := b.String()
		for _, want := range []string{
			"| nats pub 128 B | 5.000 (5.000–5.000) | 0.200 (0.200–0.200) | 0.010 (0.010–0.010) | 1.000 (1.000–1.000) |",
			"at 16 KiB the native floor is " + fmt.Sprintf("%.3f", tc.pubNative) + " µs/msg against half the Wasm floor's 0.300 µs/msg (nats pub)",
			tc.want,
		} {
			if !strings.Contains(md, want) {
				t.Errorf("%s: lacks %q\n%s", tc.name, want, md)
			}
		}
		if strings.Contains(md, "nats pub 1 KiB") {
			t.Errorf("%s: a workload without floors has a row\n%s", tc.name, md)
		}
	}
}
