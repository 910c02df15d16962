package soak

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"
	"time"
)

// The plot is well-formed SVG with a point per sample in each of its four panels, a gap where
// a process was down, a marker per fault and time ticks on round values.
func TestPlotSVGDrawsEverySample(t *testing.T) {
	var samples []Sample
	for i := 0; i <= 60; i++ {
		s := Sample{At: time.Duration(i) * SampleEvery, EnvoyRSS: 100, CPRSS: 30, SharedKeys: 44, Held: float64(i % 3)}
		if i == 30 {
			s.CPRSS = math.NaN()
		}
		samples = append(samples, s)
	}
	events := []Event{{At: 90 * time.Second, What: faultEnvoy}, {At: 5 * time.Minute, What: faultCP}}
	svg := PlotSVG(samples, events, 10*time.Minute+30*time.Second)
	dec := xml.NewDecoder(strings.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	if want := 4*len(samples) - 1; counts["circle"] != want {
		t.Errorf("%d points, want %d (one per sample per panel, none for the missing reading)", counts["circle"], want)
	}
	if counts["polyline"] != 5 { // the control plane's line is broken where it was down
		t.Errorf("%d lines, want 5", counts["polyline"])
	}
	if counts["line"] != 4*len(events) {
		t.Errorf("%d fault markers, want %d", counts["line"], 4*len(events))
	}
	for _, tick := range []string{">0s<", ">1m0s<", ">10m0s<"} {
		if !strings.Contains(svg, tick) {
			t.Errorf("no time tick %s", tick)
		}
	}
}
