package soak

import (
	"strings"
	"testing"
	"time"
)

func TestDelayRefusalsAreBoundedByThePolicySteps(t *testing.T) {
	// base 0–10 s, halved 10–20 s (NATS offered 60/s over its 40/s), doubled 20–30 s.
	steps := []StepAt{{at(0), StepBase}, {at(10), StepRatesHalved}, {at(20), StepRatesDoubled}}
	end := at(30)
	fault := []Window{{Start: at(25), End: at(27)}}
	times := func(secs ...float64) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, at(s))
		}
		return out
	}
	many := func(n int, from float64) []time.Time {
		var out []time.Time
		for i := 0; i < n; i++ {
			out = append(out, at(from+float64(i)/100))
		}
		return out
	}
	cases := []struct {
		name     string
		protocol string
		refused  []time.Time
		want     string // a part of the failure, "" for none
	}{
		{"none", "nats", nil, ""},
		{"in the halved step", "nats", times(11, 15, 19.9), ""},
		{"within the grace after the halved step", "nats", times(21.5), ""},
		{"in a fault window", "nats", times(26), ""},
		{"in the base step", "nats", times(5), "under its rate"},
		{"after the grace", "nats", times(22.5), "under its rate"},
		// 20/s over the rate for 10 s + 2 s of grace, and a queue of 50: 290 at most.
		{"at the bound", "nats", many(290, 10), ""},
		{"over the bound", "nats", many(291, 10), "more than the 290"},
		// Kafka's 40 records/s meet the halved 40/s: at the rate, so only a queue's worth.
		{"kafka at its rate", "kafka", many(50, 10), ""},
		{"kafka over a queue", "kafka", many(51, 10), "more than the 50"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DelayRefusals(c.protocol, c.refused, steps, end, fault)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
