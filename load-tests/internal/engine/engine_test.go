package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// fakeTarget completes each operation after delay (at once if zero), remembering when each was
// fired.
type fakeTarget struct {
	c     Completer
	delay time.Duration
	mu    sync.Mutex
	fired []time.Time
}

func (f *fakeTarget) Fire(op Op) {
	f.mu.Lock()
	f.fired = append(f.fired, time.Now())
	f.mu.Unlock()
	if f.delay == 0 {
		f.c.Complete(op.Seq, OK, nil)
		return
	}
	time.AfterFunc(f.delay, func() { f.c.Complete(op.Seq, OK, nil) })
}

func plan(rate float64, duration time.Duration) Plan {
	return Plan{Rate: rate, Arrivals: "fixed", Duration: duration, Connections: 4, MaxInFlight: 100_000, Drain: 2 * time.Second}
}

func run(t *testing.T, p Plan, names []string, targets func(c Completer) []Target) Result {
	t.Helper()
	e, err := New(p, names)
	if err != nil {
		t.Fatal(err)
	}
	return e.Run(context.Background(), targets(e), nil)
}

// Against an instant target the harness sends exactly the schedule, at its rate: the count is
// the schedule's, and the rate the target saw from first to last send is within 1%.
func TestKeepsRateAgainstInstantTarget(t *testing.T) {
	const rate, secs = 2500.0, 4
	f := &fakeTarget{}
	r := run(t, plan(rate, secs*time.Second), []string{"fake"}, func(c Completer) []Target { f.c = c; return []Target{f} })
	tr := r.Targets[0]
	if want := int64(rate * secs); tr.Sent != want || tr.Acked != want || len(f.fired) != int(want) {
		t.Fatalf("sent %d, acked %d, target saw %d; want %d each", tr.Sent, tr.Acked, len(f.fired), want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	first, last := f.fired[0], f.fired[0]
	for _, at := range f.fired {
		first, last = minTime(first, at), maxTime(last, at)
	}
	seen := float64(len(f.fired)-1) / last.Sub(first).Seconds()
	if math.Abs(seen-rate)/rate > 0.01 {
		t.Fatalf("the target saw %.1f/s, want %.0f/s ± 1%%", seen, rate)
	}
	// Nor does it burst: every second carries its share (loosely: a loaded CI machine may
	// shift a few operations across a boundary).
	perSecond := make([]int, secs+1)
	for _, at := range f.fired {
		perSecond[int(at.Sub(first)/time.Second)]++
	}
	for s := range secs {
		if math.Abs(float64(perSecond[s])-rate)/rate > 0.05 {
			t.Errorf("second %d carried %d operations, want about %.0f", s, perSecond[s], rate)
		}
	}
	if achieved := float64(tr.Delivered) / tr.Active.Seconds(); math.Abs(achieved-rate)/rate > 0.01 {
		t.Errorf("achieved rate %.1f/s reported, want %.0f", achieved, rate)
	}
}

// slowServer serves one operation at a time, each taking service: it can deliver 1/service
// per second however many are offered, like a tenant held to its rate.
type slowServer struct {
	c       Completer
	mu      sync.Mutex
	service time.Duration
}

func (s *slowServer) Fire(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	time.Sleep(s.service)
	s.c.Complete(op.Seq, OK, nil)
}

// Offered twice what a target can deliver, the achieved rate is what it delivered while it
// held the load — not everything it eventually completed during the drain.
func TestAchievedRateIsWhatWasDelivered(t *testing.T) {
	s := &slowServer{service: 4 * time.Millisecond} // 250/s
	p := plan(500, 2*time.Second)
	p.Drain = 5 * time.Second
	r := run(t, p, []string{"slow"}, func(c Completer) []Target { s.c = c; return []Target{s} })
	tr := r.Targets[0]
	if tr.Acked != 1000 {
		t.Fatalf("%d of 1000 completed by the end of the drain", tr.Acked)
	}
	// Sleep overshoots a little, so the server delivers somewhat under 250/s.
	if achieved := float64(tr.Delivered) / tr.Active.Seconds(); achieved < 180 || achieved > 255 {
		t.Fatalf("achieved %.0f/s, want the server's ≈ 250/s, not the %d completed in the end", achieved, tr.Acked)
	}
}

// A target that always takes 20 ms is reported as taking 20 ms (and a little), from each
// operation's intended send time.
func TestMeasuresFromIntendedTime(t *testing.T) {
	const delay = 20 * time.Millisecond
	f := &fakeTarget{delay: delay}
	r := run(t, plan(500, 2*time.Second), []string{"fake"}, func(c Completer) []Target { f.c = c; return []Target{f} })
	p := hist.PercentilesOf(r.Targets[0].Latency)
	if p.Count != 1000 {
		t.Fatalf("%d latencies recorded, want 1000", p.Count)
	}
	if min := r.Targets[0].Latency.Min(); min < delay.Microseconds() {
		t.Errorf("min %d µs: below the target's own %s delay", min, delay)
	}
	if p.P50 > (delay + 5*time.Millisecond).Microseconds() {
		t.Errorf("p50 %d µs, want about %s", p.P50, delay)
	}
}

// stallingTarget serves one operation at a time, instantly — except that, once, it stops for
// stall. A closed-loop harness would wait for it and record a single slow operation; an
// open-loop one keeps sending, and every operation scheduled during the stall waits for it.
type stallingTarget struct {
	c       Completer
	mu      sync.Mutex
	stallAt time.Time
	stall   time.Duration
	stalled bool
}

func (s *stallingTarget) Fire(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stalled && time.Now().After(s.stallAt) {
		s.stalled = true
		time.Sleep(s.stall)
	}
	s.c.Complete(op.Seq, OK, nil)
}

func TestStallShowsInTheTail(t *testing.T) {
	const rate, stall = 1000, 500 * time.Millisecond
	s := &stallingTarget{stallAt: time.Now().Add(time.Second), stall: stall}
	r := run(t, plan(rate, 3*time.Second), []string{"stalling"}, func(c Completer) []Target { s.c = c; return []Target{s} })
	h := r.Targets[0].Latency
	if h.TotalCount() != 3*rate {
		t.Fatalf("%d of %d operations completed", h.TotalCount(), 3*rate)
	}
	if h.Max() < stall.Microseconds() {
		t.Errorf("max %d µs, below the %s stall", h.Max(), stall)
	}
	// Operations scheduled during the stall waited from stall down to 0: half of them, about
	// 250, more than stall/2.
	var over int64
	for _, b := range h.Distribution() {
		if b.From >= (stall / 2).Microseconds() {
			over += b.Count
		}
	}
	if over < 200 || over > 300 {
		t.Errorf("%d operations waited over %s, want about 250", over, stall/2)
	}
	if p99 := h.ValueAtQuantile(99); p99 < (stall * 8 / 10).Microseconds() {
		t.Errorf("p99 %d µs, want about %s (the top 1%% all waited through most of the stall)", p99, stall)
	}
}

// With two targets each holds the load for alternate phases, and each target's latency is its
// own.
func TestAlternatesPhases(t *testing.T) {
	a, b := &fakeTarget{delay: 2 * time.Millisecond}, &fakeTarget{delay: 8 * time.Millisecond}
	p := plan(1000, 2*time.Second)
	p.Phase, p.Warmup = 250*time.Millisecond, 200*time.Millisecond
	var start time.Time
	r := run(t, p, []string{"a", "b"}, func(c Completer) []Target {
		a.c, b.c = c, c
		start = time.Now()
		return []Target{a, b}
	})
	for i, tr := range r.Targets {
		if tr.Active != time.Second || tr.Sent != 1000 || tr.Acked != 1000 {
			t.Errorf("target %s: active %s, sent %d, acked %d; want 1s, 1000, 1000", tr.Name, tr.Active, tr.Sent, tr.Acked)
		}
		f := []*fakeTarget{a, b}[i]
		f.mu.Lock()
		for _, at := range f.fired {
			off := at.Sub(start) - p.Warmup
			// 20 ms either side of a boundary is scheduling jitter, not a wrong phase.
			inPhase := off % p.Phase
			if off < 0 || inPhase < 20*time.Millisecond || inPhase > p.Phase-20*time.Millisecond {
				continue
			}
			if phase := int(off / p.Phase); phase%2 != i {
				t.Errorf("target %s fired during phase %d", tr.Name, phase)
				break
			}
		}
		f.mu.Unlock()
	}
	pa, pb := hist.PercentilesOf(r.Targets[0].Latency), hist.PercentilesOf(r.Targets[1].Latency)
	if ratio := float64(pb.P50) / float64(pa.P50); ratio < 2.5 || ratio > 5 {
		t.Errorf("p50 b/a = %.2f (%d/%d µs), want about 8/2", ratio, pb.P50, pa.P50)
	}
}

// outcomeTarget refuses every 10th operation, fails every 7th, loses every 13th and
// acknowledges the rest.
type outcomeTarget struct{ c Completer }

func (o outcomeTarget) Fire(op Op) {
	switch {
	case op.Seq%13 == 0:
	case op.Seq%10 == 0:
		o.c.Complete(op.Seq, Refused, errors.New("rate limit of tenant acme"))
	case op.Seq%7 == 0:
		o.c.Complete(op.Seq, Failed, errors.New("broken pipe"))
	default:
		o.c.Complete(op.Seq, OK, nil)
		o.c.Complete(op.Seq, OK, nil) // a duplicate is stray, not counted twice
	}
}

func TestCountsEveryOutcome(t *testing.T) {
	p := plan(1000, time.Second)
	p.Drain = 200 * time.Millisecond
	r := run(t, p, []string{"t"}, func(c Completer) []Target { return []Target{outcomeTarget{c}} })
	var lost, refused, failed, ok int64
	for seq := range 1000 {
		switch {
		case seq%13 == 0:
			lost++
		case seq%10 == 0:
			refused++
		case seq%7 == 0:
			failed++
		default:
			ok++
		}
	}
	tr := r.Targets[0]
	if tr.Sent != 1000 || tr.Acked != ok || tr.Refused != refused || tr.Failed != failed || tr.Timeouts != lost {
		t.Fatalf("sent %d acked %d refused %d failed %d timeouts %d; want 1000 %d %d %d %d",
			tr.Sent, tr.Acked, tr.Refused, tr.Failed, tr.Timeouts, ok, refused, failed, lost)
	}
	if tr.Latency.TotalCount() != ok || r.Stray != ok {
		t.Errorf("%d latencies, %d strays; want %d of each", tr.Latency.TotalCount(), r.Stray, ok)
	}
	if len(tr.ErrorSamples) != 2 {
		t.Errorf("error samples %q, want the two distinct messages", tr.ErrorSamples)
	}
}

// blackHole never completes anything.
type blackHole struct{}

func (blackHole) Fire(Op) {}

// When MaxInFlight operations are outstanding, further ones are dropped, counted, and the run
// is declared unhealthy rather than quietly reported.
func TestDropsBeyondMaxInFlightAndSaysSo(t *testing.T) {
	p := plan(1000, time.Second)
	p.MaxInFlight, p.Drain = 100, 0
	r := run(t, p, []string{"t"}, func(Completer) []Target { return []Target{blackHole{}} })
	tr := r.Targets[0]
	if tr.Sent != 100 || tr.Dropped != 900 || tr.Timeouts != 100 {
		t.Fatalf("sent %d dropped %d timeouts %d; want 100 900 100", tr.Sent, tr.Dropped, tr.Timeouts)
	}
	// (A late harness on a loaded machine may add a second reason.)
	if ok, reasons := r.Healthy(); ok || !strings.Contains(strings.Join(reasons, "; "), "900 operations dropped") {
		t.Fatalf("healthy=%v %q; want unhealthy for the 900 drops", ok, reasons)
	}
}

func TestLateHarnessIsUnhealthy(t *testing.T) {
	lag := hist.NewRecorder()
	for i := range 1000 {
		lag.Record(time.Duration(i%50) * time.Microsecond)
	}
	r := Result{Lag: lag.Snapshot()}
	if ok, _ := r.Healthy(); !ok {
		t.Fatal("a punctual harness declared unhealthy")
	}
	for range 20 {
		lag.Record(5 * time.Millisecond)
	}
	r.Lag = lag.Snapshot()
	if ok, reasons := r.Healthy(); ok {
		t.Fatal("2% of starts 5 ms late, still healthy")
	} else if len(reasons) != 1 {
		t.Fatalf("reasons %q", reasons)
	}
}

func TestRefusesPlansThatCannotBeMeasured(t *testing.T) {
	good := plan(100, 10*time.Second)
	good.Phase = 2 * time.Second
	if _, err := New(good, []string{"a", "b"}); err != nil {
		t.Fatalf("a sound comparison refused: %v", err)
	}
	for name, mutate := range map[string]func(*Plan){
		"one phase each": func(p *Plan) { p.Phase = 5 * time.Second },
		"no phase":       func(p *Plan) { p.Phase = 0 },
		"no duration":    func(p *Plan) { p.Duration = 0 },
		"no connections": func(p *Plan) { p.Connections = 0 },
	} {
		p := good
		mutate(&p)
		if _, err := New(p, []string{"a", "b"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
