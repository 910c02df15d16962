package soak

import (
	"math"
	"testing"
	"time"
)

// A restarted process is judged only after its own warm-up: its fresh, smaller RSS is not drift.
func TestDriftsJudgeEachProcessAfterItsWarmUp(t *testing.T) {
	var samples []Sample
	for i := 0; i <= 60; i++ {
		at := time.Duration(i) * SampleEvery
		s := Sample{At: at, EnvoyPID: 1, EnvoyRSS: 100, CPPID: 10, CPRSS: 30, SharedKeys: 40}
		if at < time.Minute {
			s.EnvoyRSS, s.SharedKeys = 60, 10 // Envoy warming up
		}
		if at >= 5*time.Minute {
			s.CPPID, s.CPRSS = 11, 30 // the control plane restarted…
			if at < 6*time.Minute {
				s.CPRSS = 20 // …and is warming up
			}
		}
		if at == 3*time.Minute {
			s.CPRSS = math.NaN() // not running when sampled
		}
		samples = append(samples, s)
	}
	for _, d := range Drifts(samples, time.Minute) {
		if d.Worst != 0 || d.Trend != 0 || d.Samples < 40 {
			t.Errorf("%s: %+v, want no drift over the warmed-up samples", d.Name, d)
		}
	}
}

// A resource that keeps growing shows in the trend even within the band.
func TestDriftsShowAGrowingResource(t *testing.T) {
	var samples []Sample
	for i := 0; i <= 60; i++ {
		samples = append(samples, Sample{At: time.Duration(i) * SampleEvery, EnvoyPID: 1, CPPID: 2,
			EnvoyRSS: 100 + float64(i)*0.1, CPRSS: 30, SharedKeys: 40})
	}
	d := Drifts(samples, time.Minute)[0]
	if d.Trend < 0.04 || d.Worst < 0.02 || d.Worst > 0.10 {
		t.Errorf("%+v: want a trend of about +5%% within the ±10%% band", d)
	}
}

// Each lifetime is judged on its own: a restarted Envoy that levels off at more keys (it saw a
// tenant the first never did) has not drifted.
func TestDriftsJudgeEachLifetimeOnItsOwn(t *testing.T) {
	var samples []Sample
	for i := 0; i <= 60; i++ {
		s := Sample{At: time.Duration(i) * SampleEvery, EnvoyPID: 1, EnvoyRSS: 100, CPPID: 2, CPRSS: 30, SharedKeys: 42}
		if i >= 15 {
			s.EnvoyPID, s.SharedKeys = 3, 44
		}
		samples = append(samples, s)
	}
	d := Drifts(samples, time.Minute)[2]
	if d.Worst != 0 || d.Trend != 0 || d.Samples != 9+40 {
		t.Errorf("%+v, want no drift over the 9 + 40 warmed-up samples", d)
	}
}
