package main

import (
	"strings"
	"testing"
	"time"
)

func TestWhyNotSustained(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		load loadResult
		want string // "" or a word the reason must hold
	}{
		{"all answered in time", loadResult{scheduled: 3, answered: 3, latencies: ms(5, 6, 7)}, ""},
		{"one failure in a hundred", loadResult{scheduled: 100, failed: 1, latencies: ms(5)}, ""},
		{"two failures in a hundred", loadResult{scheduled: 100, failed: 2, firstError: "503", latencies: ms(5)}, "failed"},
		{"replicas behind", loadResult{scheduled: 100, late: 2, latencies: ms(5)}, "behind"},
		{"slow answers", loadResult{scheduled: 2, latencies: ms(5, 1500)}, "p99"},
		{"nothing due", loadResult{}, "no report"},
	} {
		got := rung{load: tc.load}.whyNotSustained()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	var l loadResult
	for i := 100; i >= 1; i-- {
		l.latencies = append(l.latencies, time.Duration(i)*time.Millisecond)
	}
	r := rung{load: l}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := r.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %s, want %s", tc.q, got, tc.want)
		}
	}
}

func TestFlatnessCountsSustainedRungsOnly(t *testing.T) {
	at := func(limits, answered int, cpu time.Duration, failed int) rung {
		return rung{limits: limits, window: time.Second,
			load: loadResult{scheduled: answered, answered: answered, failed: failed, latencies: []time.Duration{time.Millisecond}},
			cost: usage{quotaCPU: cpu}}
	}
	rungs := []rung{
		at(10, 100, 100*time.Millisecond, 0),   // 100 µs per limit
		at(100, 100, 1500*time.Millisecond, 0), // 150 µs per limit
		at(1000, 100, 90*time.Second, 50),      // not sustained: left out
	}
	if got := flatness(rungs); got != 1.5 {
		t.Errorf("flatness %v, want 1.5", got)
	}
}
