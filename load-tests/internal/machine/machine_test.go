package machine

import (
	"testing"
	"time"
)

// Spinning a core shows as busy CPU.
func TestSeesBusyCPU(t *testing.T) {
	m := Start(nil)
	end := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(end) {
	}
	l := m.Stop()
	if l.Cores < 1 || l.CPUBusyPercent < 100/float64(l.Cores)*0.5 || l.CPUBusyPercent > 100 {
		t.Fatalf("%+v: one spinning core of %d should show as at least half of its share", l, l.Cores)
	}
	// The spinning was this process: the harness's own share says so.
	if h := l.ProcessCPUPercent["harness"]; h < 50 || h > 100*float64(l.Cores)+10 {
		t.Errorf("the harness used %.0f%% of a core while spinning one", h)
	}
	if l.LoadAvgAfter == [3]float64{} {
		t.Errorf("no load average read")
	}
}

// Every nap's lateness is recorded, in microseconds.
func TestWakeupLateness(t *testing.T) {
	p := WakeupLateness(200, 200*time.Microsecond)
	if p.Count != 200 || p.Max < p.P50 || p.Max > int64(time.Second/time.Microsecond) {
		t.Fatalf("%+v", p)
	}
}
