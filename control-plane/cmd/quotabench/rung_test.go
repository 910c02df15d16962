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

func TestGrowthIsOverTheFirstSustainedRung(t *testing.T) {
	at := func(limits int, cpu time.Duration, failed int) rung {
		return rung{limits: limits, window: time.Second,
			load: loadResult{scheduled: 100, answered: 100, failed: failed, latencies: []time.Duration{time.Millisecond}},
			cost: usage{quotaCPU: cpu}}
	}
	for _, tc := range []struct {
		name  string
		rungs []rung
		want  float64
	}{
		// 100 µs per limit, then 150 µs; the unsustained rung is left out.
		{"grows", []rung{at(10, 100*time.Millisecond, 0), at(100, 1500*time.Millisecond, 0), at(1000, 90*time.Second, 50)}, 1.5},
		// 200 µs per limit, then 50 µs: a fixed cost per report shared by more limits.
		{"falls", []rung{at(10, 200*time.Millisecond, 0), at(1000, 5*time.Second, 0)}, 1},
		{"one rung", []rung{at(10, 100*time.Millisecond, 0)}, 1},
	} {
		if got := growth(tc.rungs); got != tc.want {
			t.Errorf("%s: growth %v, want %v", tc.name, got, tc.want)
		}
	}
}
