package main

import (
	"math"
	"testing"
)

// measured is a cost whose three rounds each saw Envoy spend micros µs per message at rate.
func measured(shape workloadShape, target string, micros, rate float64) cpuCost {
	c := cpuCost{Workload: shape.name(), workloadShape: shape, Target: target}
	for round := 1; round <= 3; round++ {
		// A million messages: Envoy's seconds are its µs per message.
		c.Runs = append(c.Runs, cpuRun{Round: round, Messages: 1_000_000, Rate: rate, EnvoyCPU: micros})
	}
	return c
}

func shape(d direction, records, bytes int) workloadShape {
	return workloadShape{Direction: d, Bytes: bytes, Records: records}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestFitLine(t *testing.T) {
	for _, tc := range []struct {
		name             string
		xs, ys           []float64
		slope, intercept float64
	}{
		{"two points", []float64{0, 1}, []float64{1, 3}, 2, 1},
		{"on a line", []float64{0.125, 1, 16, 64}, []float64{0.25 + 0.5*0.125, 0.75, 8.25, 32.25}, 0.5, 0.25},
		{"scattered evenly about a line", []float64{0, 0, 2, 2}, []float64{0, 2, 4, 6}, 2, 1},
		{"flat", []float64{1, 2, 3}, []float64{7, 7, 7}, 0, 7},
	} {
		slope, intercept := fitLine(tc.xs, tc.ys)
		if !near(slope, tc.slope) || !near(intercept, tc.intercept) {
			t.Errorf("%s: slope %v intercept %v, want %v and %v", tc.name, slope, intercept, tc.slope, tc.intercept)
		}
	}
}

// Each workload's gateway is held to its direction's goal over tcp_proxy, throughput from
// 1 KiB; the other comparisons have no goal.
func TestCPUVerdictGoals(t *testing.T) {
	for _, tc := range []struct {
		name            string
		shape           workloadShape
		target, against string
		over, share     float64 // target's µs/msg more, and its share of the baseline's rate
		maxOver, minShr float64
		met             bool
	}{
		{"publish, small: CPU alone", shape(natsPublish, 1, 128), "gateway", "tcp-proxy", 0.15, 0.5, 0.2, 0, true},
		{"publish over the CPU goal", shape(natsPublish, 1, 1024), "gateway", "tcp-proxy", 0.25, 1, 0.2, 0.9, false},
		{"publish under the throughput goal", shape(natsPublish, 1, 16<<10), "gateway", "tcp-proxy", 0.1, 0.85, 0.2, 0.9, false},
		{"delivery", shape(natsDelivery, 1, 64<<10), "gateway", "tcp-proxy", 0.05, 0.95, 0.1, 0.9, true},
		{"delivery over the CPU goal", shape(natsDelivery, 1, 128), "gateway", "tcp-proxy", 0.15, 1, 0.1, 0, false},
		{"produce, per request", shape(kafkaProduce, 1000, 100), "gateway", "tcp-proxy", 4, 0.5, 5, 0, true},
		{"TLS over plaintext", shape(natsPublish, 1, 1024), "gateway-tls", "gateway", 3, 0.5, 0, 0, true},
		{"Kafka's producer over the broker", shape(kafkaProducerPerf, 1, 128), "gateway", "direct", 3, 0.5, 0, 0, true},
	} {
		costs := []cpuCost{measured(tc.shape, tc.against, 1, 1000), measured(tc.shape, tc.target, 1+tc.over, 1000*tc.share)}
		vs := cpuVerdicts(costs)
		if len(vs) != 1 {
			t.Fatalf("%s: %d verdicts", tc.name, len(vs))
		}
		v := vs[0]
		if v.Baseline != tc.against || !near(v.OverMicros.Median, tc.over) || !near(v.Share.Median, tc.share) {
			t.Errorf("%s: %s over %s: %v µs more, share %v", tc.name, v.Target, v.Baseline, v.OverMicros.Median, v.Share.Median)
		}
		if v.MaxOverMicros != tc.maxOver || v.MinShare != tc.minShr || v.met() != tc.met {
			t.Errorf("%s: goal ≤ %v µs, ≥ %v share, met %v; want %v, %v, %v", tc.name, v.MaxOverMicros, v.MinShare, v.met(), tc.maxOver, tc.minShr, tc.met)
		}
	}
}

// The per-record cost compares batches with single records of the same size; the per-KiB cost
// is the slope over the single-record sizes.
func TestProduceScaling(t *testing.T) {
	// µs the gateway adds per request: 4 and 0.03 per KiB of record, and per more record 0.01
	// at 100 B in batches of 100, 0.06 in batches of 1000, 0.02 at 1 KiB in batches of 10.
	single := func(bytes int) float64 { return 4 + 0.03*float64(bytes)/1024 }
	added := map[[2]int]float64{ // by {records, bytes}
		{1, 100}: single(100), {1, 1024}: single(1024), {1, 16 << 10}: single(16 << 10), {1, 64 << 10}: single(64 << 10),
		{100, 100}: single(100) + 99*0.01, {1000, 100}: single(100) + 999*0.06, {10, 1024}: single(1024) + 9*0.02,
	}
	var costs []cpuCost
	for rb, over := range added {
		s := shape(kafkaProduce, rb[0], rb[1])
		costs = append(costs, measured(s, "tcp-proxy", 10, 1000), measured(s, "gateway", 10+over, 1000))
	}
	got := map[string]scalingVerdict{}
	for _, s := range produceScaling(cpuVerdicts(costs)) {
		got[s.What] = s
	}
	for what, want := range map[string]struct {
		micros float64
		met    bool
	}{
		"each more record: 100 vs 1 record of 100 B per request":         {0.01, true},
		"each more record: 1000 vs 1 record of 100 B per request":        {0.06, false},
		"each more record: 10 vs 1 record of 1 KiB per request":          {0.02, true},
		"each more KiB of record: 1 record per request, 100 B to 64 KiB": {0.03, false},
	} {
		s, ok := got[what]
		if !ok {
			t.Errorf("no %q among %v", what, got)
			continue
		}
		if math.Abs(s.Micros-want.micros) > 1e-6 || s.met() != want.met {
			t.Errorf("%s: %v µs (met %v), want %v (met %v)", what, s.Micros, s.met(), want.micros, want.met)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d scaling verdicts: %v", len(got), got)
	}
}

// Every direction measured at several sizes gets a line per target through Envoy; batches,
// single sizes and direct do not.
func TestSizeSlopes(t *testing.T) {
	var costs []cpuCost
	for _, size := range []int{128, 1024, 16 << 10, 64 << 10} {
		kib := float64(size) / 1024
		costs = append(costs,
			measured(shape(natsPublish, 1, size), "gateway", 0.2+0.5*kib, 1000),
			measured(shape(natsPublish, 1, size), "tcp-proxy", 0.1+0.25*kib, 1000),
			measured(shape(natsPublish, 1, size), "direct", 0, 1000))
	}
	costs = append(costs,
		measured(shape(kafkaProduce, 100, 100), "gateway", 50, 1000),
		measured(shape(kafkaProduce, 1, 100), "gateway", 40, 1000),
		measured(shape(kafkaProducerPerf, 1, 128), "gateway", 1, 1000))
	slopes := sizeSlopes(costs)
	want := []sizeSlope{
		{natsPublish, "gateway", 128, 64 << 10, 0.2, 0.5},
		{natsPublish, "tcp-proxy", 128, 64 << 10, 0.1, 0.25},
	}
	if len(slopes) != len(want) {
		t.Fatalf("slopes %+v, want %+v", slopes, want)
	}
	for i, w := range want {
		s := slopes[i]
		if s.Direction != w.Direction || s.Target != w.Target || s.From != w.From || s.To != w.To ||
			!near(s.FixedMicros, w.FixedMicros) || !near(s.PerKiBMicros, w.PerKiBMicros) {
			t.Errorf("slope %+v, want %+v", s, w)
		}
	}
}
