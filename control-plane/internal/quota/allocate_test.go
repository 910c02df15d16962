package quota

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestAllocate(t *testing.T) {
	const limit = 1000.0
	tests := []struct {
		name    string
		reports []Report
		want    map[string]float64
	}{
		{
			name:    "one replica gets the whole limit",
			reports: []Report{{Replica: "a", Demand: 10}},
			want:    map[string]float64{"a": 1},
		},
		{
			name: "replicas wanting more than their parts share by connections, 1:2:7",
			reports: []Report{
				{Replica: "a", Demand: 133, Connections: 1},
				{Replica: "b", Demand: 267, Connections: 2},
				{Replica: "c", Demand: 933, Connections: 7},
			},
			want: map[string]float64{"a": 0.1, "b": 0.2, "c": 0.7},
		},
		{
			name: "demands that fit are met; what nobody wants is spread by connections",
			reports: []Report{
				{Replica: "a", Demand: 100, Connections: 1},
				{Replica: "b", Demand: 500, Connections: 3},
			},
			want: map[string]float64{"a": 0.2, "b": 0.8},
		},
		{
			name: "a replica whose connection stalls gets nothing; the busy ones the limit",
			reports: []Report{
				{Replica: "stalled", Demand: 0, Connections: 1, Saturated: true},
				{Replica: "b", Demand: 2000, Connections: 1},
				{Replica: "c", Demand: 2000, Connections: 1},
			},
			want: map[string]float64{"stalled": 0, "b": 0.5, "c": 0.5},
		},
		{
			name: "many connections wanting little do not take from one wanting much",
			reports: []Report{
				{Replica: "one", Demand: 2000, Connections: 1},
				{Replica: "nine", Demand: 300, Connections: 9},
			},
			want: map[string]float64{"one": 0.7, "nine": 0.3},
		},
		{
			name: "between replicas both wanting more than their parts, connections weigh",
			reports: []Report{
				{Replica: "one", Demand: 2000, Connections: 1},
				{Replica: "nine", Demand: 2000, Connections: 9},
			},
			want: map[string]float64{"one": 0.1, "nine": 0.9},
		},
		{
			name: "a replica with nothing reported yet gets its connections' part of the spare",
			reports: []Report{
				{Replica: "new", Connections: 1},
				{Replica: "busy", Demand: 600, Connections: 1},
			},
			want: map[string]float64{"new": 0.2, "busy": 0.8},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Allocate(limit, tt.reports, len(tt.reports))
			sum := 0.0
			for replica, want := range tt.want {
				if math.Abs(got[replica]-want) > 1e-9 {
					t.Errorf("%s: share %.4f, want %.4f (all: %v)", replica, got[replica], want, got)
				}
				sum += got[replica]
			}
			if len(got) != len(tt.want) || math.Abs(sum-1) > 1e-9 {
				t.Errorf("shares %v sum to %.4f over %d replicas, want 1 over %d", got, sum, len(got), len(tt.want))
			}
		})
	}
}

// Replicas that have not reported yet keep a part of the spare each: the first to report after
// the store was emptied takes its demand and its part, not the whole limit.
func TestAllocateKeepsTheSpareOfReplicasNotYetReported(t *testing.T) {
	got := Allocate(1000, []Report{{Replica: "first", Demand: 100, Connections: 1}}, 3)
	if math.Abs(got["first"]-0.4) > 1e-9 {
		t.Errorf("the first of 3 live replicas to report got %.4f, want 0.4 (100 + 900/3 of 1000)", got["first"])
	}
	got = Allocate(1000, []Report{{Replica: "only", Demand: 5000, Connections: 1}}, 3)
	if got["only"] != 1 {
		t.Errorf("the one replica carrying a tenant over its limit got %.4f, want all of it", got["only"])
	}
}

// randomReports is up to 12 replicas with demands from nothing to several times the limit,
// some equal, and 0 to 20 connections.
func randomReports(r *rand.Rand, limit float64) []Report {
	reports := make([]Report, 1+r.IntN(12))
	for i := range reports {
		d := r.Float64() * limit * 3 / float64(len(reports))
		if r.IntN(4) == 0 {
			d = 0
		}
		if i > 0 && r.IntN(5) == 0 {
			d = reports[i-1].Demand
		}
		reports[i] = Report{Replica: fmt.Sprintf("r%d", i), Demand: d, Connections: r.IntN(21)}
	}
	return reports
}

// The properties of max-min fairness by demand, on 20,000 random sets of reports: the shares
// sum to the limit; no replica gets more than its demand while another gets less than its own;
// and every replica short of its demand gets the same rate per connection, which no replica
// whose demand was met exceeds.
func TestAllocateIsMaxMinFairByDemand(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 20_000 {
		limit := 1 + r.Float64()*10_000
		reports := randomReports(r, limit)
		shares := Allocate(limit, reports, len(reports))
		const eps = 1e-6
		sum, total := 0.0, 0.0
		short, above := "", ""
		level := -1.0
		for _, rep := range reports {
			got := shares[rep.Replica] * limit
			sum += shares[rep.Replica]
			total += rep.Demand
			if got < -eps {
				t.Fatalf("case %d: %s given %.3f", n, rep.Replica, got)
			}
			if got < rep.Demand-eps*limit {
				short = rep.Replica
				perConn := got / float64(max(rep.Connections, 1))
				if level >= 0 && math.Abs(perConn-level) > eps*limit {
					t.Fatalf("case %d: short replicas given %.4f and %.4f per connection: %+v → %v", n, level, perConn, reports, shares)
				}
				level = perConn
			}
			if got > rep.Demand+eps*limit {
				above = rep.Replica
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("case %d: shares sum to %.12f: %+v → %v", n, sum, reports, shares)
		}
		if short != "" && above != "" {
			t.Fatalf("case %d: %s above its demand while %s is short: %+v → %v", n, above, short, reports, shares)
		}
		if total <= limit && short != "" {
			t.Fatalf("case %d: demands fit (%.1f of %.1f) but %s is short", n, total, limit, short)
		}
		for _, rep := range reports {
			if level >= 0 && rep.Demand/float64(max(rep.Connections, 1)) > level+eps*limit && shares[rep.Replica]*limit >= rep.Demand-eps*limit {
				t.Fatalf("case %d: %s met at %.4f per connection, above the level %.4f the short ones get", n, rep.Replica, rep.Demand/float64(max(rep.Connections, 1)), level)
			}
		}
	}
}
