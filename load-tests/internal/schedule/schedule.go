// Package schedule computes when each operation of an open-loop run is meant to be sent. The
// whole schedule is fixed before the first send, so nothing the system under test does — a slow
// reply, a stall — can move a later send time: that is what makes the load open-loop.
package schedule

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Arrivals names how intended send times are spaced.
type Arrivals string

const (
	// Fixed spaces sends exactly 1/rate apart.
	Fixed Arrivals = "fixed"
	// Poisson draws exponential gaps with mean 1/rate, as independent users arrive.
	Poisson Arrivals = "poisson"
)

// MaxOps bounds a schedule's length so a mistyped rate cannot exhaust memory (8 bytes per op).
const MaxOps = 50_000_000

// Offsets returns the intended send time of every operation, as an offset from the start of
// the run, for operations intended before span. Poisson schedules are reproducible by seed.
func Offsets(arrivals Arrivals, rate float64, span time.Duration, seed uint64) ([]time.Duration, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("rate must be positive, got %g", rate)
	}
	expected := rate * span.Seconds()
	if expected > MaxOps {
		return nil, fmt.Errorf("%g/s for %s is %.0f operations, more than the %d a run may hold", rate, span, expected, MaxOps)
	}
	switch arrivals {
	case Fixed:
		n := int(expected)
		out := make([]time.Duration, n)
		for i := range out {
			// Multiply rather than accumulate so rounding never drifts over a long run.
			out[i] = time.Duration(float64(i) * float64(time.Second) / rate)
		}
		return out, nil
	case Poisson:
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		out := make([]time.Duration, 0, int(expected*1.1)+16)
		at := 0.0
		for {
			at += rng.ExpFloat64() / rate * float64(time.Second)
			if at >= float64(span) || len(out) >= MaxOps {
				return out, nil
			}
			out = append(out, time.Duration(at))
		}
	default:
		return nil, fmt.Errorf("unknown arrivals %q (want %s or %s)", arrivals, Fixed, Poisson)
	}
}
