// Package bench runs one measurement end to end: it opens the scenario's targets, drives the
// engine's schedule through them, closes them and summarises. The weighstation-bench command
// and the make bench suite both measure through it.
package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/machine"
	"github.com/weighstation/weighstation/load-tests/internal/refusals"
	"github.com/weighstation/weighstation/load-tests/internal/report"
	"github.com/weighstation/weighstation/load-tests/internal/scenario"
)

// Options says what to measure.
type Options struct {
	Scenario string
	Plan     engine.Plan
	Config   scenario.Config
	// Endpoints in phase order; ratios compare the others with the first.
	Endpoints []scenario.Endpoint
	// Progress, if set, receives the live progress about once a second.
	Progress func(engine.Progress)
	// Watch names processes (by PID) whose CPU use the summary records besides the harness's.
	Watch map[string]int
}

// Measure runs o and returns its summary.
func Measure(ctx context.Context, o Options) (report.Summary, error) {
	names := make([]string, len(o.Endpoints))
	addrs := make([]string, len(o.Endpoints))
	for i, ep := range o.Endpoints {
		names[i] = ep.Name
		addrs[i] = ep.NATS
		if scenario.IsKafka(o.Scenario) {
			addrs[i] = ep.Kafka
		}
	}
	e, err := engine.New(o.Plan, names)
	if err != nil {
		return report.Summary{}, err
	}
	var targets []scenario.Target
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	for _, ep := range o.Endpoints {
		t, err := scenario.Open(o.Scenario, o.Config, ep, e)
		if err != nil {
			return report.Summary{}, err
		}
		targets = append(targets, t)
	}
	engineTargets := make([]engine.Target, len(targets))
	for i, t := range targets {
		engineTargets[i] = t
	}
	started := time.Now()
	load := machine.Start(o.Watch)
	r := e.Run(ctx, engineTargets, o.Progress)
	m := load.Stop()
	attributeAsyncRefusals(&r, targets)
	if err := ctx.Err(); err != nil {
		return report.Summary{}, fmt.Errorf("interrupted: %w", err)
	}
	told := make([][]refusals.Reason, len(targets))
	for i, t := range targets {
		if rr, ok := t.(scenario.RefusalReasons); ok {
			told[i] = rr.RefusalReasons()
		}
	}
	return report.FromResult(report.Meta{
		Scenario: o.Scenario, Description: scenario.Describe(o.Scenario), Plan: o.Plan,
		MessageBytes: o.Config.Size, Addresses: addrs, StartedAt: started, Machine: m, Refusals: told,
	}, r), nil
}

// attributeAsyncRefusals moves refusals that arrived without naming their operation (NATS -ERR
// for a plain publish) from the operations that never completed to the refused.
func attributeAsyncRefusals(r *engine.Result, targets []scenario.Target) {
	for i, t := range targets {
		a, ok := t.(scenario.AsyncRefusals)
		if !ok {
			continue
		}
		n := min(a.AsyncRefusals(), r.Targets[i].Timeouts)
		r.Targets[i].Refused += n
		r.Targets[i].Timeouts -= n
	}
}
