package soak

import (
	"context"
	"maps"
	"regexp"
	"sync"
	"time"
)

// recorder keeps what a client learned about each message of one flow, by sequence number.
type recorder struct {
	tenant, kind string
	errKind      func(error) string // natsErrKind or kafkaErrKind
	mu           sync.Mutex
	msgs         []Message
	errs         map[string]int // the errors its client saw, by kind (digits elided)
}

func newRecorder(tenant, kind string, errKind func(error) string) *recorder {
	return &recorder{tenant: tenant, kind: kind, errKind: errKind}
}

// next records a message about to be sent at its intended time and returns its sequence number.
func (r *recorder) next(intended time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, Message{Sent: intended})
	return len(r.msgs) - 1
}

// update changes what is known of message seq (an unknown seq, from a subject a client made
// up, is ignored).
func (r *recorder) update(seq int, f func(*Message)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq >= 0 && seq < len(r.msgs) {
		f(&r.msgs[seq])
	}
}

func (r *recorder) answered(seq int, err error) {
	now := time.Now()
	r.update(seq, func(m *Message) {
		m.Done = now
		if err != nil {
			m.Failed, m.Err = true, r.errKind(err)
			if r.errs == nil {
				r.errs = map[string]int{}
			}
			r.errs[digits.ReplaceAllString(err.Error(), "N")]++
		} else {
			m.Acked = true
		}
	})
}

var digits = regexp.MustCompile(`[0-9]+`)

func (r *recorder) errors() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.errs)
}

func (r *recorder) refused(seq int) { r.update(seq, func(m *Message) { m.Refused = true }) }

func (r *recorder) snapshot() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.msgs...)
}

// paced calls send at rate per second, open loop: each call has its intended time, and a late
// call is made at once (not skipped), so a stall shows as latency, not as fewer messages.
func paced(ctx context.Context, rate float64, send func(intended time.Time)) {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ; i++ {
		intended := start.Add(time.Duration(i) * interval)
		if d := time.Until(intended); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			return
		}
		send(intended)
	}
}

// presence counts the copies of each message of a flow found at its destination.
type presence struct {
	mu     sync.Mutex
	copies map[string]map[int]int // flow key (tenant/kind) → seq → copies
}

func newPresence() *presence { return &presence{copies: map[string]map[int]int{}} }

func (p *presence) add(tenant, kind string, seq int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := tenant + "/" + kind
	if p.copies[k] == nil {
		p.copies[k] = map[int]int{}
	}
	p.copies[k][seq]++
}

// of returns the copies of each of n messages of a flow.
func (p *presence) of(tenant, kind string, n int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, n)
	for seq, c := range p.copies[tenant+"/"+kind] {
		if seq < n {
			out[seq] = c
		}
	}
	return out
}
