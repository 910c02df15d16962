package main

import (
	"fmt"
	"sort"
)

// The goals for what the filter adds to Envoy's tcp_proxy alone.
var addedMicrosGoal = map[direction]float64{
	natsPublish:  0.2, // µs of Envoy CPU per message published
	natsDelivery: 0.1, // µs per message delivered
	kafkaProduce: 5,   // µs per Produce request
}

const (
	// throughputShareGoal is the gateway's least throughput as a share of tcp_proxy's, at every
	// size from throughputGoalFromBytes.
	throughputShareGoal     = 0.9
	throughputGoalFromBytes = 1 << 10
	// perRecordMicrosGoal: what each more record in a Produce request's batch may add.
	perRecordMicrosGoal = 0.05
	// perKiBMicrosGoal: "flat in record size", what each KiB of record may add to a Produce
	// request (0.02 µs/KiB is 1.3 µs at 64 KiB).
	perKiBMicrosGoal = 0.02
	// manyTenantsGoal: what 10,000 more tenants may add to a message's cost, as a share of it.
	manyTenantsGoal = 0.05
)

// cpuVerdict compares a target with its baseline in one workload, round by round.
type cpuVerdict struct {
	Workload string
	workloadShape
	Target, Baseline string
	// OverMicros is the target's Envoy CPU per message less the baseline's; Share the
	// target's throughput over the baseline's.
	OverMicros, Share spread
	// The goal for the workload, where it has one: at most MaxOverMicros (if not 0) and at
	// least MinShare (if not 0).
	MaxOverMicros, MinShare float64
}

func (v cpuVerdict) hasGoal() bool { return v.MaxOverMicros > 0 || v.MinShare > 0 }

func (v cpuVerdict) met() bool {
	return (v.MaxOverMicros == 0 || v.OverMicros.Median <= v.MaxOverMicros) && (v.MinShare == 0 || v.Share.Median >= v.MinShare)
}

// cpuVerdicts: the gateway against tcp_proxy (the goals) or, for Kafka's own producer, against
// the broker direct (no goal: there Envoy does no work at all without the gateway); TLS against
// the same gateway in plaintext.
func cpuVerdicts(costs []cpuCost) []cpuVerdict {
	byTarget := map[[2]string]cpuCost{}
	for _, c := range costs {
		byTarget[[2]string{c.Workload, c.Target}] = c
	}
	// What each target is compared with, in order of preference.
	baselines := map[string][]string{"gateway": {"tcp-proxy", "direct"}, "gateway-tls": {"gateway"}, "gateway-unlimited": {"tcp-proxy"},
		"gateway-open": {"tcp-proxy"}, "gateway-10k-tenants": {"gateway"}, wasmNoop: {"tcp-proxy"}, nativeNoop: {"tcp-proxy"}}
	var out []cpuVerdict
	for _, c := range costs {
		var b cpuCost
		baseline, ok := "", false
		for _, name := range baselines[c.Target] {
			if b, ok = byTarget[[2]string{c.Workload, name}]; ok {
				baseline = name
				break
			}
		}
		if !ok {
			continue
		}
		var over, share []float64
		for i := range min(len(c.Runs), len(b.Runs)) {
			over = append(over, c.Runs[i].micros()-b.Runs[i].micros())
			share = append(share, c.Runs[i].Rate/b.Runs[i].Rate)
		}
		v := cpuVerdict{Workload: c.Workload, workloadShape: c.workloadShape, Target: c.Target, Baseline: baseline,
			OverMicros: spreadOf(over), Share: spreadOf(share)}
		if c.Target == "gateway-10k-tenants" {
			// The goal: a message costs the same, within 5%, whatever the tenant count.
			v.MaxOverMicros = manyTenantsGoal * b.micros().Median
		}
		if c.Target == "gateway" && baseline == "tcp-proxy" {
			v.MaxOverMicros = addedMicrosGoal[c.Direction]
			if c.Bytes >= throughputGoalFromBytes {
				v.MinShare = throughputShareGoal
			}
		}
		out = append(out, v)
	}
	return out
}

// scalingVerdict is a goal on how the filter's cost grows from one Produce workload to another.
type scalingVerdict struct {
	What        string
	Micros, Max float64
}

func (v scalingVerdict) met() bool { return v.Micros <= v.Max }

// produceScaling derives, from the medians of what the gateway adds over tcp_proxy to a Produce
// request, the cost of each more record in a batch — (added(R) − added(1)) / (R − 1) at the
// same record size — and of each more KiB of record at one record per request, fitted over
// the sizes.
func produceScaling(verdicts []cpuVerdict) []scalingVerdict {
	single := map[int]cpuVerdict{} // one record per request, by record size
	var batched []cpuVerdict
	for _, v := range verdicts {
		if v.Direction != kafkaProduce || v.Target != "gateway" || v.Baseline != "tcp-proxy" {
			continue
		}
		if v.Records == 1 {
			single[v.Bytes] = v
		} else {
			batched = append(batched, v)
		}
	}
	var out []scalingVerdict
	for _, v := range batched {
		one, ok := single[v.Bytes]
		if !ok {
			continue
		}
		out = append(out, scalingVerdict{
			What:   fmt.Sprintf("each more record: %d vs 1 record of %s per request", v.Records, sizeName(v.Bytes)),
			Micros: (v.OverMicros.Median - one.OverMicros.Median) / float64(v.Records-1),
			Max:    perRecordMicrosGoal,
		})
	}
	var sizes []int
	for size := range single {
		sizes = append(sizes, size)
	}
	sort.Ints(sizes)
	if len(sizes) >= 2 {
		var kib, added []float64
		for _, size := range sizes {
			kib = append(kib, float64(size)/1024)
			added = append(added, single[size].OverMicros.Median)
		}
		slope, _ := fitLine(kib, added)
		out = append(out, scalingVerdict{
			What:   fmt.Sprintf("each more KiB of record: 1 record per request, %s to %s", sizeName(sizes[0]), sizeName(sizes[len(sizes)-1])),
			Micros: slope,
			Max:    perKiBMicrosGoal,
		})
	}
	return out
}

// sizeSlope is a line fitted to one target's Envoy CPU per message (the medians) over the
// sizes of one direction's single-record messages: a fixed cost and a cost per KiB.
type sizeSlope struct {
	Direction                 direction
	Target                    string
	From, To                  int // the smallest and largest size
	FixedMicros, PerKiBMicros float64
}

// sizeSlopes fits every direction measured at more than one size, for every target through
// Envoy (direct leaves Envoy idle).
func sizeSlopes(costs []cpuCost) []sizeSlope {
	type key struct {
		direction direction
		target    string
	}
	points := map[key][]cpuCost{}
	var order []key
	for _, c := range costs {
		if c.Records != 1 || c.Target == "direct" {
			continue
		}
		k := key{c.Direction, c.Target}
		if _, ok := points[k]; !ok {
			order = append(order, k)
		}
		points[k] = append(points[k], c)
	}
	var out []sizeSlope
	for _, k := range order {
		cs := points[k]
		if len(cs) < 2 {
			continue
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].Bytes < cs[j].Bytes })
		var kib, micros []float64
		for _, c := range cs {
			kib = append(kib, float64(c.Bytes)/1024)
			micros = append(micros, c.micros().Median)
		}
		slope, intercept := fitLine(kib, micros)
		out = append(out, sizeSlope{Direction: k.direction, Target: k.target, From: cs[0].Bytes, To: cs[len(cs)-1].Bytes,
			FixedMicros: intercept, PerKiBMicros: slope})
	}
	return out
}

// fitLine is the least-squares line through the points (xs[i], ys[i]): at least two, not all
// at one x.
func fitLine(xs, ys []float64) (slope, intercept float64) {
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	slope = sxy / sxx
	return slope, my - slope*mx
}
