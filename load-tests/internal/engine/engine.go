// Package engine drives an open-loop run: it sends each operation at its intended time from a
// schedule fixed in advance, whatever the targets are doing, and measures every latency from
// that intended time. A stalled target therefore cannot hold back the load or hide its stall:
// operations keep being sent, and each one's wait is counted in full (no coordinated omission,
// and no after-the-fact correction of the values either).
package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
	"github.com/weighstation/weighstation/load-tests/internal/schedule"
)

// Outcome is how one operation ended, as its client saw it.
type Outcome uint8

const (
	// OK: acknowledged (or, for publish/subscribe, delivered to the subscriber).
	OK Outcome = iota
	// Refused: the gateway refused it for a limit, in the protocol's own words.
	Refused
	// Failed: any other error.
	Failed
)

// Op is one scheduled operation.
type Op struct {
	Seq  int // index in the schedule; the target passes it back to Complete
	Conn int // which of the target's connections carries it
}

// Target sends operations to one system under test.
type Target interface {
	// Fire sends op. The engine calls it on a goroutine of its own, so it may block. It must
	// lead to at most one Complete for op.Seq — from Fire itself or later, e.g. when a
	// subscriber receives the message.
	Fire(op Op)
}

// Completer is what targets report outcomes to.
type Completer interface {
	Complete(seq int, o Outcome, err error)
}

// Plan is what a run does.
type Plan struct {
	Rate     float64
	Arrivals schedule.Arrivals
	Seed     uint64
	// Warmup is sent (alternating between targets) but not measured.
	Warmup time.Duration
	// Duration is the measured part, after the warm-up.
	Duration time.Duration
	// Phase: with several targets, each holds the whole load for Phase in turn (A B A B …), so
	// drift in the machine hits all of them alike.
	Phase       time.Duration
	Connections int
	// MaxInFlight bounds operations awaiting completion; one that would exceed it is dropped
	// and counted (and invalidates the run), so memory stays bounded when a target dies.
	MaxInFlight int
	// Drain is how long to wait, after the last send, for outstanding operations.
	Drain time.Duration
}

// Slack is how late the harness may start an operation before it counts as a missed schedule;
// a run whose p99 lateness exceeds it measured its own sluggishness and is invalid.
const Slack = time.Millisecond

// operation states
const (
	scheduled uint32 = iota
	fired
	done
)

// Engine runs one Plan against one or more targets and collects their outcomes.
type Engine struct {
	plan    Plan
	offsets []time.Duration
	state   []atomic.Uint32
	start   time.Time
	targets []*targetStats
	// sleepUntil is how the dispatcher waits for the next send: nanosleepUntil in a real run.
	// It is the engine's one way of waiting that the time package cannot fake, so tests
	// replace it with Go's timers and run the engine on testing/synctest's virtual clock.
	sleepUntil func(t time.Time, maxNap time.Duration)

	// closing makes late completions (after the run's results were taken) no-ops.
	closing sync.RWMutex
	closed  bool

	lag      *hist.Recorder // how late each measured operation was started
	interval *hist.Recorder // latencies since the last progress line
	inFlight atomic.Int64
	missed   atomic.Int64
	stray    atomic.Int64
}

type targetStats struct {
	name                               string
	latency                            *hist.Recorder
	sent, acked, refused, failed, drop atomic.Int64
	// inWindow counts OK completions that happened while this target held the load, whichever
	// operation they belong to: the rate it really delivered (held messages that complete after
	// the run do not inflate it).
	inWindow atomic.Int64
	errMu    sync.Mutex
	errors   []string // a few distinct error messages
}

const maxErrorSamples = 5

// New prepares a run of plan against the named targets (in phase order).
func New(plan Plan, targetNames []string) (*Engine, error) {
	switch {
	case len(targetNames) == 0:
		return nil, fmt.Errorf("no targets")
	case plan.Duration <= 0 || plan.Warmup < 0:
		return nil, fmt.Errorf("duration must be positive and warm-up not negative")
	case plan.Connections < 1 || plan.MaxInFlight < 1:
		return nil, fmt.Errorf("connections and max in-flight must be at least 1")
	case len(targetNames) > 1 && plan.Phase <= 0:
		return nil, fmt.Errorf("comparing targets needs a positive phase")
	case len(targetNames) > 1 && plan.Duration < time.Duration(2*len(targetNames))*plan.Phase:
		return nil, fmt.Errorf("duration %s gives each of %d targets fewer than 2 phases of %s", plan.Duration, len(targetNames), plan.Phase)
	}
	offsets, err := schedule.Offsets(plan.Arrivals, plan.Rate, plan.Warmup+plan.Duration, plan.Seed)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		plan:       plan,
		offsets:    offsets,
		state:      make([]atomic.Uint32, len(offsets)),
		sleepUntil: nanosleepUntil,
		lag:        hist.NewRecorder(),
		interval:   hist.NewRecorder(),
	}
	for _, n := range targetNames {
		e.targets = append(e.targets, &targetStats{name: n, latency: hist.NewRecorder()})
	}
	return e, nil
}

// targetOf says which target operation seq goes to: during warm-up the targets take turns
// operation by operation; afterwards phase by phase.
func (e *Engine) targetOf(seq int) int {
	n := len(e.targets)
	if n == 1 {
		return 0
	}
	off := e.offsets[seq]
	if off < e.plan.Warmup {
		return seq % n
	}
	return int((off-e.plan.Warmup)/e.plan.Phase) % n
}

func (e *Engine) measured(seq int) bool { return e.offsets[seq] >= e.plan.Warmup }

// Complete records the outcome of operation seq, at the time of the call.
func (e *Engine) Complete(seq int, o Outcome, err error) {
	now := time.Now()
	e.closing.RLock()
	defer e.closing.RUnlock()
	if e.closed {
		return
	}
	if seq < 0 || seq >= len(e.state) || !e.state[seq].CompareAndSwap(fired, done) {
		e.stray.Add(1) // unknown, duplicated, or never sent
		return
	}
	e.inFlight.Add(-1)
	ti := e.targetOf(seq)
	t := e.targets[ti]
	latency := now.Sub(e.start.Add(e.offsets[seq]))
	if o == OK {
		e.interval.Record(latency) // the progress line is live from the start, warm-up included
		if e.holdsLoadAt(ti, now.Sub(e.start)) {
			t.inWindow.Add(1)
		}
	}
	if !e.measured(seq) {
		return
	}
	switch o {
	case OK:
		t.latency.Record(latency)
		t.acked.Add(1)
	case Refused:
		// Told by what the refusals named (the scenario's refusals.Tally), not as an error.
		t.refused.Add(1)
	default:
		t.failed.Add(1)
		t.noteError(err)
	}
}

func (t *targetStats) noteError(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	t.errMu.Lock()
	defer t.errMu.Unlock()
	if len(t.errors) >= maxErrorSamples {
		return
	}
	for _, m := range t.errors {
		if m == msg {
			return
		}
	}
	t.errors = append(t.errors, msg)
}
