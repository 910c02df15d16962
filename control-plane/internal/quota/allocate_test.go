package quota

import (
	"math"
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
			reports: []Report{{Replica: "a", Admitted: 10}},
			want:    map[string]float64{"a": 1},
		},
		{
			name: "saturated replicas share by connections, 1:2:7",
			reports: []Report{
				{Replica: "a", Admitted: 333, Connections: 1, Saturated: true},
				{Replica: "b", Admitted: 333, Connections: 2, Saturated: true},
				{Replica: "c", Admitted: 333, Connections: 7, Saturated: true},
			},
			want: map[string]float64{"a": 0.1, "b": 0.2, "c": 0.7},
		},
		{
			name: "a quiet replica keeps what it uses with headroom; the busy one gets the rest",
			reports: []Report{
				{Replica: "quiet", Admitted: 100, Connections: 1},
				{Replica: "busy", Admitted: 880, Connections: 3, Saturated: true},
			},
			want: map[string]float64{"quiet": 0.125, "busy": 0.875},
		},
		{
			name: "slack nobody wants is shared equally",
			reports: []Report{
				{Replica: "a", Admitted: 200},
				{Replica: "b", Admitted: 200},
			},
			want: map[string]float64{"a": 0.5, "b": 0.5},
		},
		{
			name: "a replica with nothing yet still gets a floor",
			reports: []Report{
				{Replica: "new"},
				{Replica: "busy", Admitted: 990, Connections: 1, Saturated: true},
			},
			want: map[string]float64{"new": 0.02, "busy": 0.98},
		},
		{
			name: "a replica given the whole limit before does not keep the others' parts",
			reports: []Report{
				{Replica: "a", Admitted: 600, Connections: 1},
				{Replica: "b", Admitted: 0, Connections: 2, Saturated: true},
				{Replica: "c", Admitted: 0, Connections: 7, Saturated: true},
			},
			want: map[string]float64{"a": 0.1, "b": 0.2, "c": 0.7},
		},
		{
			name: "what a quiet replica leaves goes to the others by connections",
			reports: []Report{
				{Replica: "a", Admitted: 40, Connections: 5},
				{Replica: "b", Admitted: 500, Connections: 1, Saturated: true},
				{Replica: "c", Admitted: 500, Connections: 4, Saturated: true},
			},
			want: map[string]float64{"a": 0.05, "b": 0.19, "c": 0.76},
		},
		{
			name: "unsaturated replicas wanting more than the limit are scaled to it",
			reports: []Report{
				{Replica: "a", Admitted: 600},
				{Replica: "b", Admitted: 600},
			},
			want: map[string]float64{"a": 0.5, "b": 0.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Allocate(limit, tt.reports)
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
