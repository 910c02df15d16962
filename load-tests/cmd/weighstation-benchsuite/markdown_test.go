package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/hist"
	"github.com/weighstation/weighstation/load-tests/internal/report"
)

// summary is a measurement whose targets all saw latency base at p50 (scaled per target).
func summary(rate float64, names ...string) report.Summary {
	var r engine.Result
	lag := hist.NewRecorder()
	lag.Record(100 * time.Microsecond)
	r.Lag = lag.Snapshot()
	for i, n := range names {
		h := hist.NewRecorder()
		for range 1000 {
			h.Record(time.Duration(i+1) * time.Millisecond)
		}
		r.Targets = append(r.Targets, engine.TargetResult{Name: n, Latency: h.Snapshot(), Sent: 1000, Acked: 1000, Delivered: 1000, Active: time.Second})
	}
	return report.FromResult(report.Meta{Scenario: "nats-pubsub", Plan: engine.Plan{Rate: rate, Duration: time.Second}}, r)
}

// The evidence page carries every kind of result, with the ratios and the failures.
func TestMarkdownHasEveryResult(t *testing.T) {
	s := &suite{timing: fullTiming}
	s.Probes = []probe{{Scenario: "nats-pubsub", Saturation: 4000, Steps: []probeStep{
		{Rate: 4000, OK: true, Summary: summary(4000, "gateway")},
		{Rate: 8000, OK: false, Why: "delivered 6100/s", Summary: summary(8000, "gateway")},
	}}}
	s.Comparisons = []comparison{{Scenario: "nats-pubsub", Level: "light", Dir: "runs/x", Summary: summary(400, "direct", "gateway")}}
	s.Overloads = []overload{{Protocol: "nats-pubsub", Tenant: "globex", Mode: "delay", Limit: 1000, Offered: 10000, Summary: summary(10000, "gateway")}}
	s.Neighbours = []neighbour{{Scenario: "nats-pubsub", Rate: 1000, Victim: "acme", Noisy: "globex", Alone: summary(1000, "gateway"), WithNoisy: summary(1000, "gateway"), Neighbour: summary(10000, "gateway")}}
	s.Failures = []failure{{"nats-pubsub globex 10×", "connecting: EOF"}}
	var b strings.Builder
	writeMarkdown(&b, host{Cores: 2, CPU: "Test CPU", Commit: "abc1234"}, s)
	md := b.String()
	for _, want := range []string{
		"| **nats-pubsub** | **4000** |", "✗ delivered 6100/s",
		"| 400 light | direct | 1.000 |", "**gateway ÷ direct** | **2.00×**",
		"| nats-pubsub | globex (delay) | 10000 | 1000 | 1.00 |",
		"**with ÷ alone** | **1.00×**",
		"**nats-pubsub globex 10×**: `connecting: EOF`",
		"2 × Test CPU", "abc1234", "![nats-pubsub at 400/s](runs/x/percentiles.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestRoundRate(t *testing.T) {
	for in, want := range map[float64]float64{0: 100, 1234: 1200, 25_600: 26_000, 987: 990} {
		if got := roundRate(in); got != want {
			t.Errorf("roundRate(%v) = %v, want %v", in, got, want)
		}
	}
}
