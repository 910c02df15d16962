package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// schedule is one rung's open loop: every replica reports once a period, replica i at i/n of
// the way through it, from start; the reports of the first warmup fill every limit's hash with
// every replica's report and are not counted, those intended in the next measure are.
type schedule struct {
	start                   time.Time
	period, warmup, measure time.Duration
	replicas                int
}

func (s schedule) windowStart() time.Time { return s.start.Add(s.warmup) }
func (s schedule) windowEnd() time.Time   { return s.windowStart().Add(s.measure) }

func (s schedule) inWindow(t time.Time) bool {
	return !t.Before(s.windowStart()) && t.Before(s.windowEnd())
}

// intended is when replica's k-th report is due.
func (s schedule) intended(replica, k int) time.Time {
	return s.start.Add(time.Duration(k)*s.period + time.Duration(replica)*s.period/time.Duration(s.replicas))
}

// drainLimit bounds how long after the window a replica that fell behind keeps sending its
// overdue reports: the rung is over, and its figures already say it could not keep up.
const drainLimit = 5 * time.Second

// loadResult is what the replicas saw of the reports intended within the window.
type loadResult struct {
	scheduled int
	// answered counts answers that arrived within the window, whenever their report was due:
	// the reports whose CPU the window's CPU time paid for.
	answered int
	failed   int
	// late counts reports sent more than a period after they were due: the replica's previous
	// answer was still outstanding (a filter has one report in flight at a time).
	late       int
	firstError string
	// latencies run from when each report was due to its answer, so a late report's wait counts.
	latencies []time.Duration
	// replicas is the fewest replicas any answer counted under a limit: all of them once every
	// hash holds every replica's report.
	replicas int
}

type replicaLoad struct {
	client *http.Client
	url    string
	limits int
	sched  schedule

	mu  sync.Mutex
	res loadResult
}

// run posts every replica's reports on the schedule and returns when each has posted the last
// one due within the window (or drainLimit after it).
func (l *replicaLoad) run(bodies []reportBody) loadResult {
	l.res.replicas = len(bodies)
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() { l.replica(i, body) })
	}
	wg.Wait()
	return l.res
}

func (l *replicaLoad) replica(i int, body reportBody) {
	s := l.sched
	giveUp := s.windowEnd().Add(drainLimit)
	for k := 0; ; k++ {
		due := s.intended(i, k)
		if !due.Before(s.windowEnd()) {
			return
		}
		counted := s.inWindow(due)
		if time.Now().After(giveUp) {
			if counted {
				l.record(func(r *loadResult) { r.scheduled++ })
			}
			continue
		}
		time.Sleep(time.Until(due))
		sent := time.Now()
		replicas, err := l.post(body)
		answered := time.Now()
		l.record(func(r *loadResult) {
			if err == nil && s.inWindow(answered) {
				r.answered++
			}
			if !counted {
				return
			}
			r.scheduled++
			if sent.Sub(due) > s.period {
				r.late++
			}
			if err != nil {
				r.failed++
				if r.firstError == "" {
					r.firstError = err.Error()
				}
				return
			}
			r.latencies = append(r.latencies, answered.Sub(due))
			r.replicas = min(r.replicas, replicas)
		})
	}
}

func (l *replicaLoad) record(f func(*loadResult)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.res)
}

var (
	shareKey      = []byte(`"key":`)
	shareReplicas = []byte(`"replicas":`)
)

// post sends one report and checks the answer gives a share of every limit; it returns how
// many replicas the first share counted. The answer is not decoded whole: at 10,000 limits
// that would cost the generator, on the machine it shares with the service, more than a check.
func (l *replicaLoad) post(body reportBody) (int, error) {
	req, err := http.NewRequest(http.MethodPost, l.url, body.reader())
	if err != nil {
		return 0, err
	}
	req.ContentLength = body.size()
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b[:min(len(b), 200)]))
	}
	if n := bytes.Count(b, shareKey); n != l.limits {
		return 0, fmt.Errorf("answer carries %d shares, want %d", n, l.limits)
	}
	return replicasIn(b), nil
}

// replicasIn is the "replicas" of the first share in an answer (0 if there is none).
func replicasIn(answer []byte) int {
	i := bytes.Index(answer, shareReplicas)
	if i < 0 {
		return 0
	}
	digits := answer[i+len(shareReplicas):]
	end := 0
	for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(string(digits[:end]))
	return n
}
