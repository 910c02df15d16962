package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// Goals (issue 44): each answer within 50 ms at the 99th percentile, and a report's cost
// growing with the limits it carries, not faster: on no rung a ladder sustains is the CPU per
// limit reported above growthGoal times its figure on the ladder's first rung. (It may fall:
// each report also pays a fixed cost, HTTP and two round trips to the store, which more limits
// share.)
const (
	p99Goal    = 50 * time.Millisecond
	growthGoal = 2.0
)

// A mode's ladder stops at the first rung the machine does not sustain: the 99th percentile
// over a second (a report period: the filter's shares would lapse), more than 1% of reports
// failed, or more than 1% sent a period late (the replicas fell behind).
const (
	sustainP99  = time.Second
	sustainMiss = 0.01
)

// rung is one mode's measurement at one number of limits per replica.
type rung struct {
	mode     redisclient.Mode
	limits   int
	replicas int
	window   time.Duration
	load     loadResult
	cost     usage
}

func (r rung) quantile(q float64) time.Duration {
	if len(r.load.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.load.latencies)
	slices.Sort(s)
	// Nearest rank on the exact samples (at most a few thousand a rung).
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (r rung) p50() time.Duration { return r.quantile(0.50) }
func (r rung) p99() time.Duration { return r.quantile(0.99) }

// whyNotSustained is "" for a rung the machine sustained, else what broke.
func (r rung) whyNotSustained() string {
	l := r.load
	switch {
	case l.scheduled == 0:
		return "no report was due"
	case float64(l.failed) > sustainMiss*float64(l.scheduled):
		return fmt.Sprintf("%d of %d reports failed (first: %s)", l.failed, l.scheduled, l.firstError)
	case float64(l.late) > sustainMiss*float64(l.scheduled):
		return fmt.Sprintf("the replicas fell behind: %d of %d reports sent over a period late", l.late, l.scheduled)
	case r.p99() > sustainP99:
		return fmt.Sprintf("p99 %s > %s", r.p99().Round(time.Millisecond), sustainP99)
	}
	return ""
}

func (r rung) answeredPerSecond() float64 { return float64(r.load.answered) / r.window.Seconds() }

func (r rung) opsPerSecond() (primaries, replicas float64) {
	return float64(r.cost.commands.primaries) / r.window.Seconds(), float64(r.cost.commands.replicas) / r.window.Seconds()
}

// perReport is CPU time per report answered in the window.
func (r rung) perReport(cpu time.Duration) time.Duration {
	if r.load.answered == 0 {
		return 0
	}
	return cpu / time.Duration(r.load.answered)
}

// perLimit is the quota service's and the store's CPU time per limit reported: what should
// not grow up the ladder.
func (r rung) perLimit() time.Duration {
	return r.perReport(r.cost.quotaCPU+r.cost.redisCPU) / time.Duration(r.limits)
}

// growth is the most CPU per limit reported over the first sustained rung's, across the
// sustained rungs (1 with fewer than two).
func growth(rungs []rung) float64 {
	var per []float64
	for _, r := range rungs {
		if r.whyNotSustained() == "" && r.perLimit() > 0 {
			per = append(per, float64(r.perLimit()))
		}
	}
	if len(per) < 2 {
		return 1
	}
	return slices.Max(per) / per[0]
}

func (r rung) line() string {
	prim, repl := r.opsPerSecond()
	s := fmt.Sprintf("%d limits: %.0f reports/s answered, p50 %s p99 %s, Redis %.0f ops/s on primaries (+%.0f on replicas), CPU per report: quota %s, Redis %s (%s per limit)",
		r.limits, r.answeredPerSecond(), r.p50().Round(10*time.Microsecond), r.p99().Round(10*time.Microsecond), prim, repl,
		r.perReport(r.cost.quotaCPU).Round(time.Microsecond), r.perReport(r.cost.redisCPU).Round(time.Microsecond), r.perLimit().Round(100*time.Nanosecond))
	if why := r.whyNotSustained(); why != "" {
		s += "; NOT SUSTAINED: " + why
	}
	return s
}
