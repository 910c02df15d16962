// Package report turns a run into its published forms: a summary JSON, a .hgrm percentile
// distribution per target, a percentile plot (SVG and PNG) and a one-page HTML report.
package report

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/hist"
	"github.com/weighstation/weighstation/load-tests/internal/machine"
	"github.com/weighstation/weighstation/load-tests/internal/refusals"
)

// Summary is summary.json.
type Summary struct {
	Scenario     string    `json:"scenario"`
	Description  string    `json:"description,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	Rate         float64   `json:"rate"`
	Arrivals     string    `json:"arrivals"`
	Duration     string    `json:"duration"`
	Warmup       string    `json:"warmup"`
	Phase        string    `json:"phase,omitempty"`
	Connections  int       `json:"connections"`
	MessageBytes int       `json:"messageBytes"`

	// Valid is false when the harness itself fell behind its schedule (InvalidReasons says how):
	// the figures then describe the harness, not the target.
	Valid          bool     `json:"valid"`
	InvalidReasons []string `json:"invalidReasons,omitempty"`
	// LimitedByPolicy is true when a target refused more than 1% of what it was sent: the run
	// measured a limit, not the target's latency at the offered rate (each such target's
	// limitedByPolicy says which limit; its percentiles are of the admitted operations only, and
	// no ratio is drawn with it).
	LimitedByPolicy bool         `json:"limitedByPolicy"`
	Generator       Generator    `json:"generator"`
	Machine         machine.Load `json:"machine"`
	Targets         []Target     `json:"targets"`
	// Ratios compare each target with each one before it (gateway ÷ direct, …), percentile
	// by percentile.
	Ratios []Ratio `json:"ratios,omitempty"`
}

// Generator is the harness's own health.
type Generator struct {
	// LagMicros: how late each measured operation was started against its schedule.
	LagMicros      hist.Percentiles `json:"lagMicros"`
	MissedSchedule int64            `json:"missedSchedule"` // started more than 1 ms late
	Dropped        int64            `json:"dropped"`
	Stray          int64            `json:"strayCompletions"`
}

// Target is one target's figures. Latencies are in microseconds, from intended send time, of
// the operations that completed OK; the counts say what became of the others.
type Target struct {
	Name          string           `json:"name"`
	Address       string           `json:"address"`
	LatencyMicros hist.Percentiles `json:"latencyMicros"`
	// AchievedRate is OK completions per second while the target held the load (counting the
	// completions that happened then, so a backlog delivered after the run does not count).
	AchievedRate float64  `json:"achievedRate"`
	Sent         int64    `json:"sent"`
	Acked        int64    `json:"acked"`
	Refused      int64    `json:"refused"`
	Errors       int64    `json:"errors"`
	Timeouts     int64    `json:"timeouts"`
	Dropped      int64    `json:"dropped"`
	Overflow     int64    `json:"latenciesOver60s,omitempty"`
	ErrorSamples []string `json:"errorSamples,omitempty"`
	Hgrm         string   `json:"hgrm"`
	// Limited, when set, says that the target refused more than 1% of what it was sent, and why
	// (the tenant, limit and value the refusals named).
	Limited *refusals.Limited `json:"limitedByPolicy,omitempty"`

	latency *hdrhistogram.Histogram
}

// Ratio is Target's percentiles divided by Baseline's.
type Ratio struct {
	Target   string  `json:"target"`
	Baseline string  `json:"baseline"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P99      float64 `json:"p99"`
	P999     float64 `json:"p99_9"`
	P9999    float64 `json:"p99_99"`
	Max      float64 `json:"max"`
}

// Meta is what the caller knows about a run beyond the engine's result.
type Meta struct {
	Scenario, Description string
	Plan                  engine.Plan
	MessageBytes          int
	Addresses             []string // per target
	// Refusals are the limits each target's refusals named (per target).
	Refusals  [][]refusals.Reason
	StartedAt time.Time
	Machine   machine.Load
}

// FromResult builds the summary of r.
func FromResult(m Meta, r engine.Result) Summary {
	valid, reasons := r.Healthy()
	s := Summary{
		Scenario: m.Scenario, Description: m.Description, StartedAt: m.StartedAt,
		Rate: m.Plan.Rate, Arrivals: string(m.Plan.Arrivals),
		Duration: m.Plan.Duration.String(), Warmup: m.Plan.Warmup.String(),
		Connections: m.Plan.Connections, MessageBytes: m.MessageBytes,
		Valid: valid, InvalidReasons: reasons, Machine: m.Machine,
		Generator: Generator{LagMicros: hist.PercentilesOf(r.Lag), MissedSchedule: r.Missed, Stray: r.Stray},
	}
	if len(r.Targets) > 1 {
		s.Phase = m.Plan.Phase.String()
	}
	for i, t := range r.Targets {
		s.Generator.Dropped += t.Dropped
		addr := ""
		if i < len(m.Addresses) {
			addr = m.Addresses[i]
		}
		var reasons []refusals.Reason
		if i < len(m.Refusals) {
			reasons = m.Refusals[i]
		}
		limited := refusals.Judge(t.Sent, t.Refused, reasons)
		s.LimitedByPolicy = s.LimitedByPolicy || limited != nil
		s.Targets = append(s.Targets, Target{
			Name: t.Name, Address: addr, LatencyMicros: hist.PercentilesOf(t.Latency),
			AchievedRate: float64(t.Delivered) / t.Active.Seconds(),
			Sent:         t.Sent, Acked: t.Acked, Refused: t.Refused, Errors: t.Failed, Timeouts: t.Timeouts,
			Dropped: t.Dropped, Overflow: t.Overflow, ErrorSamples: t.ErrorSamples,
			Hgrm: t.Name + ".hgrm", latency: t.Latency, Limited: limited,
		})
	}
	// A limited target's percentiles are of what it admitted: no ratio is drawn with them.
	for i := 1; i < len(s.Targets); i++ {
		for j := range i {
			if s.Targets[i].Limited == nil && s.Targets[j].Limited == nil {
				s.Ratios = append(s.Ratios, Compare(s.Targets[i], s.Targets[j]))
			}
		}
	}
	return s
}

// Compare divides t's percentiles by base's.
func Compare(t, base Target) Ratio {
	a, b := t.LatencyMicros, base.LatencyMicros
	div := func(x, y int64) float64 {
		if y == 0 {
			return 0
		}
		return float64(x) / float64(y)
	}
	return Ratio{
		Target: t.Name, Baseline: base.Name,
		P50: div(a.P50, b.P50), P90: div(a.P90, b.P90), P99: div(a.P99, b.P99),
		P999: div(a.P999, b.P999), P9999: div(a.P9999, b.P9999), Max: div(a.Max, b.Max),
	}
}

// Named pairs each ratio with its percentile label, in report order.
func (r Ratio) Named() []NamedRatio {
	return []NamedRatio{{"p50", r.P50}, {"p90", r.P90}, {"p99", r.P99}, {"p99.9", r.P999}, {"p99.99", r.P9999}, {"max", r.Max}}
}

// NamedRatio is one labelled ratio.
type NamedRatio struct {
	Label string
	Value float64
}
