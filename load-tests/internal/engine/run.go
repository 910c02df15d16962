package engine

import (
	"context"
	"fmt"
	"runtime"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what a run measured.
type Result struct {
	Targets []TargetResult
	// Lag is how late (µs) the harness started each measured operation against its schedule.
	Lag *hdrhistogram.Histogram
	// Missed counts measured operations started more than Slack late.
	Missed int64
	// Stray counts completions for operations the run did not have outstanding.
	Stray int64
	Wall  time.Duration
}

// TargetResult is one target's share of a run.
type TargetResult struct {
	Name string
	// Latency (µs) of the measured operations that completed OK, from intended send time.
	Latency *hdrhistogram.Histogram
	// Overflow counts latencies above the histogram's 60 s range (kept at its top).
	Overflow int64
	Sent     int64 // measured operations handed to the target
	Acked    int64
	// Delivered counts OK completions (of any operation) that happened while the target held
	// the measured load; Delivered/Active is the rate it really achieved.
	Delivered int64
	Refused   int64
	Failed    int64
	Timeouts  int64 // sent but not completed by the end of the drain
	Dropped   int64 // not sent because MaxInFlight operations were outstanding
	// Active is how long this target held the load in the measured part.
	Active       time.Duration
	ErrorSamples []string
}

// Progress is a snapshot for the live progress line.
type Progress struct {
	Elapsed, Total time.Duration
	Warmup         bool
	Active         string        // the target holding the load now
	Rate           float64       // completions per second since the last snapshot
	P99            time.Duration // of the completions since the last snapshot
	Refused        int64
	Errors         int64 // failed, timed out and dropped so far
	InFlight       int64
}

// Run sends the schedule to targets (in the order of the names given to New), waits up to the
// plan's drain time for outstanding operations and returns what was measured. progress, if
// not nil, is called about once a second. Completions reported after Run returns are ignored:
// the caller closes the targets.
func (e *Engine) Run(ctx context.Context, targets []Target, progress func(Progress)) Result {
	e.start = time.Now()
	stopProgress := e.reportProgress(progress)
	e.dispatch(ctx, targets)
	e.drain(ctx)
	stopProgress()
	return e.result()
}

// dispatch starts every operation at its intended time, each on its own goroutine, from a
// locked OS thread that sleeps precisely. It never waits for a target.
func (e *Engine) dispatch(ctx context.Context, targets []Target) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for seq, off := range e.offsets {
		due := e.start.Add(off)
		for time.Now().Before(due) {
			if ctx.Err() != nil {
				return
			}
			e.sleepUntil(due, 50*time.Millisecond)
		}
		ti := e.targetOf(seq)
		if e.inFlight.Load() >= int64(e.plan.MaxInFlight) {
			if e.measured(seq) {
				e.targets[ti].drop.Add(1)
			}
			continue
		}
		e.inFlight.Add(1)
		e.state[seq].Store(fired)
		if e.measured(seq) {
			e.targets[ti].sent.Add(1)
		}
		op := Op{Seq: seq, Conn: seq % e.plan.Connections}
		go func() {
			// Lateness is taken where the operation really starts, so it includes the Go
			// scheduler's delay in running this goroutine, not only the dispatcher's.
			if e.measured(op.Seq) {
				late := time.Since(due)
				e.lag.Record(late)
				if late > Slack {
					e.missed.Add(1)
				}
			}
			targets[ti].Fire(op)
		}()
	}
}

func (e *Engine) drain(ctx context.Context) {
	deadline := time.Now().Add(e.plan.Drain)
	for e.inFlight.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *Engine) reportProgress(progress func(Progress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	total := e.plan.Warmup + e.plan.Duration
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				h := e.interval.SnapshotAndReset()
				elapsed := now.Sub(e.start)
				p := Progress{
					Elapsed: elapsed, Total: total,
					Rate:     float64(h.TotalCount()) / now.Sub(last).Seconds(),
					P99:      time.Duration(h.ValueAtQuantile(99)) * time.Microsecond,
					InFlight: e.inFlight.Load(),
					Warmup:   elapsed < e.plan.Warmup,
				}
				if elapsed < total {
					p.Active = e.targets[e.activeAt(elapsed)].name
				}
				for _, t := range e.targets {
					p.Refused += t.refused.Load()
					p.Errors += t.failed.Load() + t.drop.Load()
				}
				progress(p)
				last = now
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// activeAt is the target holding the load at offset off of the run.
func (e *Engine) activeAt(off time.Duration) int {
	if len(e.targets) == 1 || off < e.plan.Warmup {
		return 0
	}
	return int((off-e.plan.Warmup)/e.plan.Phase) % len(e.targets)
}

// holdsLoadAt says whether target i holds the measured load at offset off of the run.
func (e *Engine) holdsLoadAt(i int, off time.Duration) bool {
	return off >= e.plan.Warmup && off < e.plan.Warmup+e.plan.Duration && e.activeAt(off) == i
}

func (e *Engine) result() Result {
	e.closing.Lock()
	e.closed = true
	e.closing.Unlock()

	timeouts := make([]int64, len(e.targets))
	for seq := range e.state {
		if e.measured(seq) && e.state[seq].Load() == fired {
			timeouts[e.targetOf(seq)]++
		}
	}
	r := Result{Lag: e.lag.Snapshot(), Missed: e.missed.Load(), Stray: e.stray.Load(), Wall: time.Since(e.start)}
	for i, t := range e.targets {
		t.errMu.Lock()
		samples := append([]string(nil), t.errors...)
		t.errMu.Unlock()
		r.Targets = append(r.Targets, TargetResult{
			Name: t.name, Latency: t.latency.Snapshot(), Overflow: t.latency.Overflow(),
			Sent: t.sent.Load(), Acked: t.acked.Load(), Delivered: t.inWindow.Load(), Refused: t.refused.Load(), Failed: t.failed.Load(),
			Timeouts: timeouts[i], Dropped: t.drop.Load(),
			Active: e.activeTime(i), ErrorSamples: samples,
		})
	}
	return r
}

// activeTime is how long target i held the load during the measured part.
func (e *Engine) activeTime(i int) time.Duration {
	n := len(e.targets)
	if n == 1 {
		return e.plan.Duration
	}
	var total time.Duration
	for start, k := time.Duration(0), 0; start < e.plan.Duration; start, k = start+e.plan.Phase, k+1 {
		if k%n == i {
			total += min(e.plan.Phase, e.plan.Duration-start)
		}
	}
	return total
}

// Healthy reports whether the harness kept its own schedule: p99 lateness within Slack and no
// operation dropped. Figures from an unhealthy run describe the harness, not the target.
func (r Result) Healthy() (bool, []string) {
	var reasons []string
	if p99 := time.Duration(r.Lag.ValueAtQuantile(99)) * time.Microsecond; p99 > Slack {
		reasons = append(reasons, fmt.Sprintf("the harness started operations %s late at p99 (more than %s)", p99, Slack))
	}
	var dropped int64
	for _, t := range r.Targets {
		dropped += t.Dropped
	}
	if dropped > 0 {
		reasons = append(reasons, fmt.Sprintf("%d operations dropped at the max-in-flight bound", dropped))
	}
	return len(reasons) == 0, reasons
}
