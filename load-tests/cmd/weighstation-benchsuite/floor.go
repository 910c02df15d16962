package main

import "fmt"

// The floors: what a network filter that does nothing costs a message over tcp_proxy, as a
// proxy-wasm module in V8 (the filter's SDK and runtime) and as a native Envoy dynamic module
// (wasm-filter/noop and native-noop, on the stack's NATS_NOOP_*_PORT and KAFKA_NOOP_*_PORT
// listeners). Issue 45 measures them before deciding whether to move the filter out of Wasm:
// a native filter is worth building only if its floor is well under Wasm's.
const (
	wasmNoop   = "wasm-noop"
	nativeNoop = "native-noop"
)

// floorTargets are alternated with the others in the workloads that measure the floors.
var floorTargets = []string{wasmNoop, nativeNoop}

// floorDecisionBytes is the message size the decision is taken at: large enough that a
// message takes several reads, as the messages that cost the filter most do.
const floorDecisionBytes = 16 << 10

// floorRow is one workload's tcp_proxy cost and what each filter adds to it, round by round.
type floorRow struct {
	Workload string
	workloadShape
	TCPProxy             spread // tcp_proxy's Envoy CPU µs per message
	Wasm, Native, Filter spread // what each adds over tcp_proxy, µs per message
	HasFilter            bool   // whether the workload measured the gateway too
}

// floorRows are the workloads measured through both no-op filters, in the order measured.
func floorRows(costs []cpuCost) []floorRow {
	over := map[[2]string]cpuVerdict{}
	for _, v := range cpuVerdicts(costs) {
		if v.Baseline == "tcp-proxy" {
			over[[2]string{v.Workload, v.Target}] = v
		}
	}
	var rows []floorRow
	for _, c := range costs {
		wasm, hasWasm := over[[2]string{c.Workload, wasmNoop}]
		native, hasNative := over[[2]string{c.Workload, nativeNoop}]
		if c.Target != "tcp-proxy" || !hasWasm || !hasNative {
			continue
		}
		filter, hasFilter := over[[2]string{c.Workload, "gateway"}]
		rows = append(rows, floorRow{Workload: c.Workload, workloadShape: c.workloadShape, TCPProxy: c.micros(),
			Wasm: wasm.OverMicros, Native: native.OverMicros, Filter: filter.OverMicros, HasFilter: hasFilter})
	}
	return rows
}

// floorDecision is issue 45's test at floorDecisionBytes: a native filter is pursued only if
// its floor (what the no-op native filter adds over tcp_proxy, median) is shown below half the
// Wasm floor's, in every workload of that size measured (NATS publish and delivery). Shown: a
// Wasm floor whose rounds straddle zero is not told apart from tcp_proxy by the run, and half of
// it is no bar to clear.
type floorDecision struct {
	Rows       []floorRow // the workloads at floorDecisionBytes
	Unresolved bool       // some Wasm floor's rounds straddle zero
	Go         bool
}

func decideFloor(rows []floorRow) floorDecision {
	var d floorDecision
	for _, r := range rows {
		if r.Bytes == floorDecisionBytes && r.Records == 1 {
			d.Rows = append(d.Rows, r)
		}
	}
	below := len(d.Rows) > 0
	for _, r := range d.Rows {
		below = below && r.Native.Median < r.Wasm.Median/2
		d.Unresolved = d.Unresolved || r.Wasm.Min <= 0
	}
	d.Go = below && !d.Unresolved
	return d
}

// writeFloors is the floors' table and the decision, in the CPU section.
func writeFloors(p func(string, ...any), costs []cpuCost) {
	rows := floorRows(costs)
	if len(rows) == 0 {
		return
	}
	p("\n### Floor over tcp_proxy\n\n")
	p("What a network filter that does nothing adds to Envoy's CPU per message over tcp_proxy alone: *Wasm no-op* is a proxy-wasm module (wasm-filter/noop) in V8 through the filter's own SDK, *native no-op* an Envoy dynamic module (wasm-filter/native-noop), each continuing at once on every event, on listeners of their own to the same upstream as tcp_proxy's; *filter* is the gateway. ")
	p("Each is the median (lowest–highest) of the round-by-round differences with tcp_proxy, the targets alternated in one run (µs of Envoy CPU per message, per Produce request for Kafka).\n\n")
	p("| workload | tcp_proxy µs/msg | Wasm no-op added | native no-op added | filter added |\n|---|---:|---:|---:|---:|\n")
	cell := func(s spread, ok bool) string {
		if !ok {
			return "—"
		}
		return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Median, s.Min, s.Max)
	}
	for _, r := range rows {
		p("| %s | %s | %s | %s | %s |\n", r.Workload, cell(r.TCPProxy, true), cell(r.Wasm, true), cell(r.Native, true), cell(r.Filter, r.HasFilter))
	}
	d := decideFloor(rows)
	if len(d.Rows) == 0 {
		return
	}
	p("\n**Decision (issue 45, step 1):** at %s the native floor ", sizeName(floorDecisionBytes))
	for i, r := range d.Rows {
		if i > 0 {
			p("; ")
		}
		p("is %.3f µs/msg against half the Wasm floor's %.3f µs/msg (%s", r.Native.Median, r.Wasm.Median/2, r.Direction)
		if r.Wasm.Min <= 0 {
			p("; the Wasm floor's rounds range from %.3f to %.3f, within this run's noise", r.Wasm.Min, r.Wasm.Max)
		}
		p(")")
	}
	switch {
	case d.Go:
		p(": below half in every workload, so a native filter is worth pursuing.\n")
	case d.Unresolved:
		p(": the Wasm floor is not told apart from tcp_proxy in every workload, so the native floor is not shown below half of it: a native filter is not pursued (stop).\n")
	default:
		p(": not below half in every workload, so a native filter is not pursued (stop).\n")
	}
}
