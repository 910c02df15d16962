package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
	"github.com/weighstation/weighstation/load-tests/internal/schedule"
)

// Most tests here run the engine inside a testing/synctest bubble. There time is virtual: it
// stands still while any goroutine of the bubble can run, and jumps to the next timer once all
// are blocked. Every send then happens at exactly its intended time and every target delay is
// exactly its delay, so the tests assert exact counts, times and latencies, however loaded the
// machine. The bubble fakes time.Now, time.Sleep and timers, but not the raw nanosleep of a
// real run's dispatcher, so those tests give the engine goSleepUntil instead.
// TestRealClockSmoke alone runs on the real clock, with loose bounds.

// goSleepUntil is the dispatcher's wait on Go's timers, which a synctest bubble virtualizes.
func goSleepUntil(t time.Time, maxNap time.Duration) { time.Sleep(min(time.Until(t), maxNap)) }

// stallingSleep is goSleepUntil, except that the first sleep meant to end at or after at ends
// stall late: the harness's own thread held up, by a busy CPU say, so sends fall behind.
func stallingSleep(at time.Time, stall time.Duration) func(time.Time, time.Duration) {
	stalled := false // only the dispatcher sleeps
	return func(t time.Time, maxNap time.Duration) {
		if !stalled && !t.Before(at) {
			stalled = true
			time.Sleep(time.Until(t) + stall) // a held-up thread keeps no maxNap either
			return
		}
		goSleepUntil(t, maxNap)
	}
}

func plan(rate float64, duration time.Duration) Plan {
	return Plan{Rate: rate, Arrivals: schedule.Fixed, Duration: duration, Connections: 4, MaxInFlight: 100_000, Drain: 2 * time.Second}
}

// simulate runs p on virtual time; call it inside synctest.Test. sleep replaces the
// dispatcher's wait (goSleepUntil if nil).
func simulate(t *testing.T, p Plan, names []string, sleep func(time.Time, time.Duration), targets func(Completer) []Target) Result {
	t.Helper()
	e, err := New(p, names)
	if err != nil {
		t.Fatal(err)
	}
	if sleep == nil {
		sleep = goSleepUntil
	}
	e.sleepUntil = sleep
	return e.Run(context.Background(), targets(e), nil)
}

// fakeTarget completes each operation after delay (at once if zero), remembering when each was
// fired.
type fakeTarget struct {
	c     Completer
	delay time.Duration
	mu    sync.Mutex
	fired map[int]time.Time // by Seq
}

func (f *fakeTarget) Fire(op Op) {
	f.mu.Lock()
	if f.fired == nil {
		f.fired = map[int]time.Time{}
	}
	f.fired[op.Seq] = time.Now()
	f.mu.Unlock()
	if f.delay == 0 {
		f.c.Complete(op.Seq, OK, nil)
		return
	}
	time.AfterFunc(f.delay, func() { f.c.Complete(op.Seq, OK, nil) })
}

// latencies is the histogram the engine should report for ds, recorded the way the engine
// records them.
func latencies(ds []time.Duration) *hdrhistogram.Histogram {
	r := hist.NewRecorder()
	for _, d := range ds {
		r.Record(d)
	}
	return r.Snapshot()
}

// repeat is n copies of d.
func repeat(d time.Duration, n int) []time.Duration {
	return slices.Repeat([]time.Duration{d}, n)
}

// Against an instant target the harness sends the schedule exactly: every operation at its
// intended time to the nanosecond, so each second carries exactly its share, the warm-up is
// sent but not measured, and the achieved rate is the offered one.
func TestSendsEveryOperationAtItsIntendedTime(t *testing.T) {
	for _, tc := range []struct {
		name             string
		rate             float64
		warmup, duration time.Duration
		wantPerSecond    []int // operations fired in each second of the run, warm-up included
		wantSent         int64 // measured operations
	}{
		{"2500/s", 2500, 0, 4 * time.Second, []int{2500, 2500, 2500, 2500}, 10_000},
		{"3/s, gaps not a whole number of ns", 3, 0, 4 * time.Second, []int{3, 3, 3, 3}, 12},
		{"1000/s after a 500 ms warm-up", 1000, 500 * time.Millisecond, 2 * time.Second, []int{1000, 1000, 500}, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := plan(tc.rate, tc.duration)
				p.Warmup = tc.warmup
				f := &fakeTarget{}
				start := time.Now() // Run starts at this same virtual instant
				r := simulate(t, p, []string{"fake"}, nil, func(c Completer) []Target { f.c = c; return []Target{f} })

				tr := r.Targets[0]
				if tr.Sent != tc.wantSent || tr.Acked != tc.wantSent {
					t.Errorf("sent %d, acked %d; want %d each", tr.Sent, tr.Acked, tc.wantSent)
				}
				// The schedule's own offsets are tested in package schedule; the engine must
				// keep to them exactly.
				offsets, err := schedule.Offsets(schedule.Fixed, tc.rate, tc.warmup+tc.duration, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(f.fired) != len(offsets) {
					t.Fatalf("the target saw %d operations, want the schedule's %d", len(f.fired), len(offsets))
				}
				perSecond := make([]int, len(tc.wantPerSecond))
				for seq, at := range f.fired {
					if want := start.Add(offsets[seq]); !at.Equal(want) {
						t.Fatalf("operation %d fired at %s, want its intended %s", seq, at.Sub(start), offsets[seq])
					}
					perSecond[at.Sub(start)/time.Second]++
				}
				if !slices.Equal(perSecond, tc.wantPerSecond) {
					t.Errorf("operations per second %v, want %v", perSecond, tc.wantPerSecond)
				}
				if achieved := float64(tr.Delivered) / tr.Active.Seconds(); achieved != tc.rate {
					t.Errorf("achieved rate %g/s (%d in %s), want the offered %g/s", achieved, tr.Delivered, tr.Active, tc.rate)
				}
				if ok, reasons := r.Healthy(); !ok || r.Missed != 0 {
					t.Errorf("a punctual run reported unhealthy (%q) or %d missed", reasons, r.Missed)
				}
			})
		})
	}
}

// slowServer serves one operation at a time, each taking service: it can deliver 1/service
// per second however many are offered, like a tenant held to its rate. (It queues on a
// channel, not a mutex, so synctest sees the queued operations as blocked and lets time move.)
type slowServer struct {
	c       Completer
	service time.Duration
	busy    chan struct{} // capacity 1
}

func (s *slowServer) Fire(op Op) {
	s.busy <- struct{}{}
	time.Sleep(s.service)
	s.c.Complete(op.Seq, OK, nil)
	<-s.busy
}

// The achieved rate is what a target delivered while it held the load — its own capacity when
// offered more — not everything it eventually completed during the drain.
func TestAchievedRateIsWhatWasDelivered(t *testing.T) {
	for _, tc := range []struct {
		name          string
		service       time.Duration
		wantDelivered int64
	}{
		// Each operation completes 1 ms after its intended time, the last at 1999 ms.
		{"a server that keeps up delivers the offered 500/s", time.Millisecond, 1000},
		// Always busy from 0 ms, it completes operations at 4, 8, … ms: 499 before the end of
		// the window at 2000 ms (the 500th, at 2000 ms, is outside it), and the other 501
		// during the drain.
		{"a server of 250/s delivers 249.5/s", 4 * time.Millisecond, 499},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &slowServer{service: tc.service, busy: make(chan struct{}, 1)}
				p := plan(500, 2*time.Second)
				p.Drain = 5 * time.Second
				r := simulate(t, p, []string{"slow"}, nil, func(c Completer) []Target { s.c = c; return []Target{s} })
				tr := r.Targets[0]
				if tr.Acked != 1000 {
					t.Fatalf("%d of 1000 completed by the end of the drain", tr.Acked)
				}
				if tr.Delivered != tc.wantDelivered || tr.Active != 2*time.Second {
					t.Errorf("delivered %d in %s, want %d in 2s", tr.Delivered, tr.Active, tc.wantDelivered)
				}
			})
		})
	}
}

// Latency runs from each operation's intended send time: a target that always takes 20 ms is
// reported as taking exactly 20 ms, and when the harness itself falls behind, the time an
// operation waited to be sent counts too (it would have waited in the real world as well).
func TestMeasuresFromIntendedTime(t *testing.T) {
	const delay, stallAt = 20 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name         string
		harnessStall time.Duration // the dispatcher's sleep towards stallAt ends this late (0: on time)
		wantMissed   int64
	}{
		{"punctual harness", 0, 0},
		// Operations intended at 1000, 1002, … 1098 ms go out at 1100 ms: 50, all more
		// than Slack late.
		{"harness held up 100 ms at 1 s", 100 * time.Millisecond, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeTarget{delay: delay}
				sleep := stallingSleep(time.Now().Add(stallAt), tc.harnessStall)
				r := simulate(t, plan(500, 2*time.Second), []string{"fake"}, sleep, func(c Completer) []Target { f.c = c; return []Target{f} })

				var wantLatency, wantLag []time.Duration
				for seq := range 1000 {
					intended := time.Duration(seq) * 2 * time.Millisecond
					late := time.Duration(0)
					if intended >= stallAt && intended < stallAt+tc.harnessStall {
						late = stallAt + tc.harnessStall - intended
					}
					wantLatency = append(wantLatency, late+delay)
					wantLag = append(wantLag, late)
				}
				if got, want := r.Targets[0].Latency, latencies(wantLatency); !got.Equals(want) {
					t.Errorf("latency %+v, want %+v", hist.PercentilesOf(got), hist.PercentilesOf(want))
				}
				if want := latencies(wantLag); !r.Lag.Equals(want) || r.Missed != tc.wantMissed {
					t.Errorf("lateness %+v with %d missed, want %+v with %d", hist.PercentilesOf(r.Lag), r.Missed, hist.PercentilesOf(want), tc.wantMissed)
				}
			})
		})
	}
}

// stallingTarget serves one operation at a time, instantly — except that, once, it stops for
// stall. A closed-loop harness would wait for it and record a single slow operation; an
// open-loop one keeps sending, and every operation scheduled during the stall waits for it.
type stallingTarget struct {
	c       Completer
	stallAt time.Time
	stall   time.Duration
	stalled bool
	busy    chan struct{} // capacity 1; guards stalled
	fired   sync.Map      // Seq → time.Time
}

func (s *stallingTarget) Fire(op Op) {
	s.fired.Store(op.Seq, time.Now())
	s.busy <- struct{}{}
	if !s.stalled && !time.Now().Before(s.stallAt) {
		s.stalled = true
		time.Sleep(s.stall)
	}
	s.c.Complete(op.Seq, OK, nil)
	<-s.busy
}

// A 500 ms stall at 1 s neither delays a send nor hides: the operation intended at 1000 ms
// waits 500 ms, the one at 1001 ms 499 ms, … down to 1 ms at 1499 ms; all others none.
func TestStallShowsInTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stall = 500 * time.Millisecond
		start := time.Now()
		s := &stallingTarget{stallAt: start.Add(time.Second), stall: stall, busy: make(chan struct{}, 1)}
		r := simulate(t, plan(1000, 3*time.Second), []string{"stalling"}, nil, func(c Completer) []Target { s.c = c; return []Target{s} })

		var sent, offTime int
		s.fired.Range(func(seq, at any) bool {
			sent++
			if !at.(time.Time).Equal(start.Add(time.Duration(seq.(int)) * time.Millisecond)) {
				offTime++
			}
			return true
		})
		if sent != 3000 || offTime != 0 || r.Missed != 0 {
			t.Errorf("%d of 3000 operations fired, %d not at their intended time, %d missed it by over %s; want all, 0, 0: the stall held the load back",
				sent, offTime, r.Missed, Slack)
		}
		waits := repeat(0, 3000-int(stall/time.Millisecond))
		for wait := stall; wait > 0; wait -= time.Millisecond {
			waits = append(waits, wait)
		}
		if got, want := r.Targets[0].Latency, latencies(waits); !got.Equals(want) {
			t.Errorf("latency %+v, want %+v", hist.PercentilesOf(got), hist.PercentilesOf(want))
		}
	})
}

// With two targets, each is sent the warm-up's operations in turn and then holds the whole
// load for alternate phases; its sends, active time, delivered count and latencies are its own.
func TestAlternatesPhases(t *testing.T) {
	type want struct {
		active          time.Duration
		sent, delivered int64
	}
	for _, tc := range []struct {
		name             string
		warmup, duration time.Duration
		a, b             want
	}{
		// a holds [200, 450), [700, 950) … ms, b [450, 700) … [1950, 2200). a's operations
		// complete 2 ms late, so the last 2 of each of its 4 phases land in b's (248 × 4), and
		// the warm-up's operation at 198 ms lands in a's first (+1); b's complete 8 ms late
		// (242 × 4).
		{"even phases after a warm-up", 200 * time.Millisecond, 2 * time.Second, want{time.Second, 1000, 993}, want{time.Second, 1000, 968}},
		// a holds [0, 250), [500, 750) and the cut-short [1000, 1100): 248 + 248 + 98.
		{"the last phase cut short", 0, 1100 * time.Millisecond, want{600 * time.Millisecond, 600, 594}, want{500 * time.Millisecond, 500, 484}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fakes := []*fakeTarget{{delay: 2 * time.Millisecond}, {delay: 8 * time.Millisecond}}
				p := plan(1000, tc.duration)
				p.Phase, p.Warmup = 250*time.Millisecond, tc.warmup
				start := time.Now()
				r := simulate(t, p, []string{"a", "b"}, nil, func(c Completer) []Target {
					fakes[0].c, fakes[1].c = c, c
					return []Target{fakes[0], fakes[1]}
				})
				for i, tr := range r.Targets {
					w := []want{tc.a, tc.b}[i]
					if tr.Active != w.active || tr.Sent != w.sent || tr.Acked != w.sent || tr.Delivered != w.delivered {
						t.Errorf("target %s: active %s, sent %d, acked %d, delivered %d; want %s, %d, %d, %d",
							tr.Name, tr.Active, tr.Sent, tr.Acked, tr.Delivered, w.active, w.sent, w.sent, w.delivered)
					}
					for seq, at := range fakes[i].fired {
						off := at.Sub(start)
						owner := seq % 2 // warm-up: operation by operation
						if off >= p.Warmup {
							owner = int((off-p.Warmup)/p.Phase) % 2
						}
						if owner != i {
							t.Errorf("target %s was sent operation %d, at %s", tr.Name, seq, off)
							break
						}
					}
					if want := latencies(repeat(fakes[i].delay, int(w.sent))); !tr.Latency.Equals(want) {
						t.Errorf("target %s: latency %+v, want all %s", tr.Name, hist.PercentilesOf(tr.Latency), fakes[i].delay)
					}
				}
				if fired := len(fakes[0].fired) + len(fakes[1].fired); fired != int((tc.warmup+tc.duration)/time.Millisecond) {
					t.Errorf("%d operations fired in all, want the schedule's %d", fired, (tc.warmup+tc.duration)/time.Millisecond)
				}
			})
		})
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
	synctest.Test(t, func(t *testing.T) {
		p := plan(1000, time.Second)
		p.Drain = 200 * time.Millisecond
		r := simulate(t, p, []string{"t"}, nil, func(c Completer) []Target { return []Target{outcomeTarget{c}} })
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
		if len(tr.ErrorSamples) != 1 {
			t.Errorf("error samples %q, want the failure's alone (a refusal is no error)", tr.ErrorSamples)
		}
	})
}

// blackHole never completes anything.
type blackHole struct{}

func (blackHole) Fire(Op) {}

// When MaxInFlight operations are outstanding, further ones are dropped, counted, and the run
// is declared unhealthy rather than quietly reported (for that reason alone: on virtual time
// the harness is never late).
func TestDropsBeyondMaxInFlightAndSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := plan(1000, time.Second)
		p.MaxInFlight, p.Drain = 100, 0
		r := simulate(t, p, []string{"t"}, nil, func(Completer) []Target { return []Target{blackHole{}} })
		tr := r.Targets[0]
		if tr.Sent != 100 || tr.Dropped != 900 || tr.Timeouts != 100 {
			t.Fatalf("sent %d dropped %d timeouts %d; want 100 900 100", tr.Sent, tr.Dropped, tr.Timeouts)
		}
		if ok, reasons := r.Healthy(); ok || !slices.Equal(reasons, []string{"900 operations dropped at the max-in-flight bound"}) {
			t.Fatalf("healthy=%v %q; want unhealthy for the 900 drops alone", ok, reasons)
		}
	})
}

// The one test on the real clock and the real nanosleep: the counts are exact, the rate only
// roughly right, since a loaded machine may run the harness late.
func TestRealClockSmoke(t *testing.T) {
	const rate = 1000.0
	f := &fakeTarget{}
	e, err := New(plan(rate, time.Second), []string{"fake"})
	if err != nil {
		t.Fatal(err)
	}
	f.c = e
	r := e.Run(context.Background(), []Target{f}, nil)
	tr := r.Targets[0]
	if tr.Sent != 1000 || tr.Acked != 1000 || len(f.fired) != 1000 {
		t.Fatalf("sent %d, acked %d, target saw %d; want 1000 each", tr.Sent, tr.Acked, len(f.fired))
	}
	var fired []time.Time
	for _, at := range f.fired {
		fired = append(fired, at)
	}
	first, last := slices.MinFunc(fired, time.Time.Compare), slices.MaxFunc(fired, time.Time.Compare)
	if seen := float64(len(fired)-1) / last.Sub(first).Seconds(); math.Abs(seen-rate)/rate > 0.2 {
		t.Errorf("the target saw %.0f/s, want %.0f/s ± 20%%", seen, rate)
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
