package schedule

import (
	"math"
	"testing"
	"time"
)

func TestFixedSchedule(t *testing.T) {
	offs, err := Offsets(Fixed, 1000, 2*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2000 {
		t.Fatalf("%d operations in 2s at 1000/s, want 2000", len(offs))
	}
	for i, o := range offs {
		if want := time.Duration(i) * time.Millisecond; o != want {
			t.Fatalf("operation %d intended at %s, want %s", i, o, want)
		}
	}
}

// Poisson arrivals keep the mean rate and have exponential gaps: their coefficient of
// variation is 1, where a fixed schedule's is 0.
func TestPoissonSchedule(t *testing.T) {
	offs, err := Offsets(Poisson, 5000, 10*time.Second, 42)
	if err != nil {
		t.Fatal(err)
	}
	if n := float64(len(offs)); math.Abs(n-50000) > 3*math.Sqrt(50000) {
		t.Fatalf("%v operations, want 50000 ± 3σ", n)
	}
	var sum, sumSq float64
	prev := time.Duration(0)
	for _, o := range offs {
		if o < prev {
			t.Fatalf("schedule goes back in time at %s", o)
		}
		gap := float64(o - prev)
		sum += gap
		sumSq += gap * gap
		prev = o
	}
	n := float64(len(offs))
	mean := sum / n
	cv := math.Sqrt(sumSq/n-mean*mean) / mean
	if cv < 0.95 || cv > 1.05 {
		t.Fatalf("gap coefficient of variation %.3f, want ≈ 1 for exponential gaps", cv)
	}
	again, _ := Offsets(Poisson, 5000, 10*time.Second, 42)
	if len(again) != len(offs) || again[len(again)-1] != offs[len(offs)-1] {
		t.Fatal("the same seed gave a different schedule")
	}
}

func TestScheduleRefusesNonsense(t *testing.T) {
	if _, err := Offsets(Fixed, 0, time.Second, 0); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := Offsets(Fixed, 1e9, time.Minute, 0); err == nil {
		t.Error("a schedule of 60 billion operations accepted")
	}
	if _, err := Offsets("bursty", 10, time.Second, 0); err == nil {
		t.Error("unknown arrivals accepted")
	}
}
