package usage

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// A worker not heard from for this long no longer counts: its Envoy went away or restarted.
const workerLapse = 5 * time.Second

// Book is the control plane's record of the reports it received: each worker's last two
// reports (a rate is the difference between them) and a bounded ring of decisions. It is safe
// for concurrent use.
type Book struct {
	mu      sync.Mutex
	workers map[workerKey]*worker
	ring    []Decision // capacity fixed at New; oldest overwritten
	next    uint64     // Seq of the next decision
	// suppressed counts decisions not kept, per protocol/tenant/decision, since the start.
	suppressed map[string]uint64
	dropped    map[workerKey]uint64
	// wake is closed and replaced when decisions arrive (for followers).
	wake    chan struct{}
	minutes series
	seconds series
	// clients are each tenant's client refusals over the last minute, by protocol/tenant.
	clients map[string]*clientRing
}

type workerKey struct {
	replica string
	worker  uint64
}

type worker struct {
	last, prev     map[string]TenantCount // by protocol/tenant
	lastAt, prevAt int64                  // the reports' atMs
	seen           time.Time              // when the last report arrived
	// lastSeq and lastDecision are the highest report and decision numbers recorded.
	lastSeq, lastDecision uint64
	// askedSince: its last report could not be counted (no earlier one here), and it was asked
	// for the counters of the last report a control plane counted.
	askedSince bool
}

// maxSinceMs bounds the span a worker's `since` counters are spread over (a control plane down
// longer has that worker's traffic before the last hour placed within it).
const maxSinceMs = 3600_000

// DefaultMinutes is how much per-minute usage a control plane keeps: a day; DefaultSeconds,
// per-second usage (what `weighstation impact` replays): an hour.
const (
	DefaultMinutes = 24 * 60
	DefaultSeconds = 60 * 60
)

// New keeps up to retain decisions, keepMinutes of per-minute usage and keepSeconds of
// per-second usage.
func New(retain, keepMinutes, keepSeconds int) *Book {
	return &Book{
		minutes:    series{widthMs: 60000, keep: max(keepMinutes, 1), maxClients: maxClientsPerMinute},
		seconds:    series{widthMs: 1000, keep: max(keepSeconds, 1), maxClients: maxClientsPerSecond},
		workers:    map[workerKey]*worker{},
		ring:       make([]Decision, 0, max(retain, 1)),
		suppressed: map[string]uint64{},
		dropped:    map[workerKey]uint64{},
		wake:       make(chan struct{}),
		clients:    map[string]*clientRing{},
	}
}

func key(protocol, tenant string) string { return protocol + "/" + tenant }

// maxSkew is how far a worker's clock may be from the control plane's before its reports are
// placed by the control plane's clock instead (a node whose clock is off must not move or trim
// the history).
const maxSkew = 5 * time.Second

// maxSuppressedKeys bounds the suppressed-decision counts (protocol, tenant, decision).
const maxSuppressedKeys = 100000

// Ingest records one report received at now and returns the decisions it added, and whether the
// worker should send the counters of the last report a control plane counted (Report.Since):
// this report's could not be counted, as this control plane has no earlier report of the worker
// (it restarted, or forgot a worker silent for a minute). A report or a decision already
// recorded (sent again after an answer was lost) is not counted twice.
func (b *Book) Ingest(r Report, now time.Time) (stored []Decision, needSince bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := workerKey{r.Replica, r.Worker}
	w := b.workers[k]
	if w == nil {
		w = &worker{}
		b.workers[k] = w
	}
	w.seen = now
	if r.Seq != 0 && r.Seq <= w.lastSeq {
		return nil, false
	}
	w.lastSeq = r.Seq
	if r.AtMs > w.lastAt {
		// What the worker counted since its last report we have, or since the last report a
		// control plane counted (its since, when asked for) — or, in its first report, since it
		// started. A worker seen first at a later report is asked for its since.
		base, baseAt, span := w.last, w.lastAt, int64(60000)
		// A report's clients are its own period's: its since spans more.
		clientsSpan := int64(60000)
		if w.askedSince && r.Since != nil && r.Since.AtMs < r.AtMs {
			base, baseAt, span, clientsSpan = map[string]TenantCount{}, r.Since.AtMs, maxSinceMs, 1000
			for _, t := range r.Since.Tenants {
				base[key(t.Protocol, t.Tenant)] = t
			}
		}
		w.askedSince = false
		if base == nil && r.Seq > 1 {
			w.askedSince, needSince = true, true
		}
		if base != nil || r.Seq == 1 {
			to := r.AtMs
			if skew := time.Duration(to-now.UnixMilli()) * time.Millisecond; skew > maxSkew || skew < -maxSkew {
				to = now.UnixMilli()
			}
			from := to - 1000
			if base != nil {
				from = to - min(r.AtMs-baseAt, span)
			}
			clientsFrom := max(from, to-clientsSpan)
			for _, t := range r.Tenants {
				b.minutes.add(from, clientsFrom, to, now.UnixMilli(), t, base[key(t.Protocol, t.Tenant)])
				b.seconds.add(from, clientsFrom, to, now.UnixMilli(), t, base[key(t.Protocol, t.Tenant)])
				if len(t.Clients) > 0 {
					ring := b.clients[key(t.Protocol, t.Tenant)]
					if ring == nil {
						ring = &clientRing{}
						b.clients[key(t.Protocol, t.Tenant)] = ring
					}
					ring.add(to, t.Clients)
				}
			}
		}
		w.prev, w.prevAt = w.last, w.lastAt
		w.last = make(map[string]TenantCount, len(r.Tenants))
		for _, t := range r.Tenants {
			w.last[key(t.Protocol, t.Tenant)] = t
		}
		w.lastAt = r.AtMs
	}
	b.dropped[k] = r.Dropped
	for _, s := range r.Suppressed {
		sk := key(s.Protocol, s.Tenant) + "/" + s.Decision
		if _, ok := b.suppressed[sk]; ok || len(b.suppressed) < maxSuppressedKeys {
			b.suppressed[sk] += s.Count
		}
	}
	stored = make([]Decision, 0, len(r.Decisions))
	for _, d := range r.Decisions {
		if d.WorkerSeq != 0 && d.WorkerSeq <= w.lastDecision {
			continue
		}
		w.lastDecision = max(w.lastDecision, d.WorkerSeq)
		d.Replica, d.Seq = r.Replica, b.next
		b.next++
		stored = append(stored, d)
		if len(b.ring) < cap(b.ring) {
			b.ring = append(b.ring, d)
		} else {
			b.ring[d.Seq%uint64(cap(b.ring))] = d
		}
	}
	for k, w := range b.workers {
		if now.Sub(w.seen) > time.Minute {
			delete(b.workers, k)
			delete(b.dropped, k)
		}
	}
	if len(stored) > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	return stored, needSince
}

// History is the per-minute usage of the minutes starting at or after from; with perSecond,
// the per-second usage of the seconds. Each tenant's row is followed by its busiest clients'.
func (b *Book) History(from time.Time, perSecond bool) []Bucket {
	b.mu.Lock()
	defer b.mu.Unlock()
	if perSecond {
		return b.seconds.since(from, true)
	}
	return b.minutes.since(from, true)
}

// Filter selects decisions; an empty field matches any.
type Filter struct {
	Tenant, Protocol, Reason, Subject string
	// SinceMs: only decisions made at or after this Unix time (ms).
	SinceMs int64
}

func (f Filter) matches(d Decision) bool {
	return (f.Tenant == "" || f.Tenant == d.Tenant) &&
		(f.Protocol == "" || f.Protocol == d.Protocol) &&
		(f.Reason == "" || f.Reason == d.Reason()) &&
		(f.Subject == "" || strings.Contains(d.Subject, f.Subject)) &&
		d.AtMs >= f.SinceMs
}

// Decisions returns the retained decisions after Seq `after` (-1: all) that f matches, oldest
// first, and the Seq to ask after next time.
func (b *Book) Decisions(f Filter, after int64) ([]Decision, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []Decision{}
	first := uint64(0)
	if b.next > uint64(cap(b.ring)) {
		first = b.next - uint64(cap(b.ring))
	}
	if after >= 0 && uint64(after+1) > first {
		first = uint64(after + 1)
	}
	for seq := first; seq < b.next; seq++ {
		d := b.ring[seq%uint64(cap(b.ring))]
		if f.matches(d) {
			out = append(out, d)
		}
	}
	return out, int64(b.next) - 1
}

// DroppedDecisions is what the live workers dropped because their reports did not get through.
func (b *Book) DroppedDecisions() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n uint64
	for _, d := range b.dropped {
		n += d
	}
	return n
}

// Wait returns a channel closed when decisions next arrive.
func (b *Book) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wake
}

// Limits are a tenant's configured limits as /usage compares them (nil: unlimited).
type Limits struct {
	MessagesPerSecond *uint64 `json:"messagesPerSecond,omitempty"`
	BytesPerSecond    *uint64 `json:"bytesPerSecond,omitempty"`
	InFlight          *uint64 `json:"inFlight,omitempty"`
	QueueMaxMessages  *uint64 `json:"queueMaxMessages,omitempty"`
	Connections       *uint64 `json:"connections,omitempty"`
	// ConsumeBytesPerSecond is the read side's limit, always per replica (docs/kafka.md).
	ConsumeBytesPerSecond *uint64 `json:"consumeBytesPerSecond,omitempty"`
	// Global: the limits hold across every replica together; otherwise each replica has them.
	Global bool   `json:"global,omitempty"`
	Mode   string `json:"mode"`
}

// TenantNow is one tenant's traffic on one protocol, summed over the replicas reporting.
type TenantNow struct {
	Protocol          string             `json:"protocol"`
	Tenant            string             `json:"tenant"`
	MessagesPerSecond float64            `json:"messagesPerSecond"`
	BytesPerSecond    float64            `json:"bytesPerSecond"`
	DelayedPerSecond  float64            `json:"delayedPerSecond"`
	RefusedPerSecond  map[string]float64 `json:"refusedPerSecond"`
	WouldRefuse       map[string]float64 `json:"wouldRefusePerSecond"`
	Connections       int64              `json:"connections"`
	InFlight          int64              `json:"inFlight"`
	Held              int64              `json:"held"`
	// The read side: record bytes delivered per second, and fetches throttled or held per second.
	ConsumedPerSecond         float64 `json:"consumedBytesPerSecond"`
	ConsumeThrottledPerSecond float64 `json:"consumeThrottledPerSecond"`
	Replicas                  int     `json:"replicas"`
	Limits                    *Limits `json:"limits,omitempty"`
	// Load is the highest ratio of use to limit (messages/s, bytes/s, in flight, held,
	// connections), the limits of perGateway tenants multiplied by the replicas reporting.
	Load float64 `json:"load"`
	// Suppressed counts decisions beyond the sample since the control plane started.
	Suppressed uint64 `json:"suppressedDecisions"`
	// TopSubjects are the busiest subjects or topics (NATS subjects are sampled: 1 message in
	// 16), at most topSubjects of them.
	TopSubjects []SubjectRate `json:"topSubjects"`
	// TopClients are the clients refused most over the last minute (tenants with client
	// limits), at most five.
	TopClients []ClientCount `json:"topClients,omitempty"`
	subjects   map[string]float64
}

// SubjectRate is a subject's or topic's messages per second.
type SubjectRate struct {
	Subject           string  `json:"subject"`
	MessagesPerSecond float64 `json:"messagesPerSecond"`
}

const topSubjects = 5

// Now sums the live workers' reports per protocol and tenant, most loaded first; limits gives
// each tenant's configured limits (false: the tenant is no longer in the policy).
func (b *Book) Now(now time.Time, limits func(protocol, tenant string) (Limits, bool)) []TenantNow {
	b.mu.Lock()
	defer b.mu.Unlock()
	byKey := map[string]*TenantNow{}
	replicas := map[string]map[string]bool{}
	for k, w := range b.workers {
		if now.Sub(w.seen) > workerLapse {
			continue
		}
		dt := float64(w.lastAt-w.prevAt) / 1000
		for tk, c := range w.last {
			t := byKey[tk]
			if t == nil {
				t = &TenantNow{Protocol: c.Protocol, Tenant: c.Tenant, RefusedPerSecond: map[string]float64{}, WouldRefuse: map[string]float64{}, subjects: map[string]float64{}}
				byKey[tk] = t
				replicas[tk] = map[string]bool{}
			}
			replicas[tk][k.replica] = true
			t.Connections += c.Connections
			t.InFlight += c.InFlight
			t.Held += c.Held
			p, ok := w.prev[tk]
			if !ok || w.prev == nil || dt <= 0 {
				continue
			}
			rate := func(a, b uint64) float64 {
				if a < b {
					return 0
				}
				return float64(a-b) / dt
			}
			for _, sc := range c.Subjects {
				t.subjects[sc.Subject] += float64(sc.Messages) / dt
			}
			t.MessagesPerSecond += rate(c.Messages, p.Messages)
			t.BytesPerSecond += rate(c.Bytes, p.Bytes)
			t.DelayedPerSecond += rate(c.Delayed, p.Delayed)
			t.ConsumedPerSecond += rate(c.Consumed, p.Consumed)
			t.ConsumeThrottledPerSecond += rate(c.ConsumeThrottled, p.ConsumeThrottled)
			for i, r := range Reasons {
				if v := rate(c.Refused[i], p.Refused[i]); v > 0 {
					t.RefusedPerSecond[r] += v
				}
				if v := rate(c.WouldRefuse[i], p.WouldRefuse[i]); v > 0 {
					t.WouldRefuse[r] += v
				}
			}
		}
	}
	out := make([]TenantNow, 0, len(byKey))
	for tk, t := range byKey {
		t.Replicas = len(replicas[tk])
		t.TopSubjects = []SubjectRate{}
		for s, r := range t.subjects {
			t.TopSubjects = append(t.TopSubjects, SubjectRate{s, r})
		}
		sort.Slice(t.TopSubjects, func(i, j int) bool {
			a, b := t.TopSubjects[i], t.TopSubjects[j]
			return a.MessagesPerSecond > b.MessagesPerSecond || a.MessagesPerSecond == b.MessagesPerSecond && a.Subject < b.Subject
		})
		t.TopSubjects = t.TopSubjects[:min(len(t.TopSubjects), topSubjects)]
		t.TopClients = topClients([]*clientRing{b.clients[tk]}, now.UnixMilli(), summaryClients)
		for s, n := range b.suppressed {
			if strings.HasPrefix(s, tk+"/") {
				t.Suppressed += n
			}
		}
		if l, ok := limits(t.Protocol, t.Tenant); ok {
			t.Limits = &l
			t.Load = load(*t, l)
		}
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Load != out[j].Load {
			return out[i].Load > out[j].Load
		}
		return out[i].Protocol+out[i].Tenant < out[j].Protocol+out[j].Tenant
	})
	return out
}

// load is the tenant's highest use/limit ratio.
func load(t TenantNow, l Limits) float64 {
	scale := 1.0
	if !l.Global {
		scale = float64(max(t.Replicas, 1))
	}
	worst := 0.0
	ratio := func(used float64, limit *uint64) {
		if limit != nil && *limit > 0 {
			worst = max(worst, used/(float64(*limit)*scale))
		}
	}
	ratio(t.MessagesPerSecond, l.MessagesPerSecond)
	ratio(t.BytesPerSecond, l.BytesPerSecond)
	ratio(float64(t.InFlight), l.InFlight)
	ratio(float64(t.Held), l.QueueMaxMessages)
	ratio(float64(t.Connections), l.Connections)
	// Consume buckets are per replica whatever the scope.
	if l := l.ConsumeBytesPerSecond; l != nil && *l > 0 {
		worst = max(worst, t.ConsumedPerSecond/(float64(*l)*float64(max(t.Replicas, 1))))
	}
	return worst
}

// LimitsOf is a tenant's limits in set (false: no such tenant).
func LimitsOf(set *policy.Set, tenant string) (Limits, bool) {
	if set == nil {
		return Limits{}, false
	}
	for _, t := range set.Tenants {
		if t.Policy.Tenant != tenant {
			continue
		}
		l := t.Limits
		return Limits{
			MessagesPerSecond: l.MessagesPerSecond,
			BytesPerSecond:    l.BytesPerSecond,
			InFlight:          l.InFlight,
			QueueMaxMessages:  l.QueueMaxMessages,
			Connections:       l.Connections,

			ConsumeBytesPerSecond: l.ConsumeBytesPerSecond,
			Global:                t.Policy.Scope == policy.ScopeGlobal,
			Mode:                  string(t.Policy.Mode),
		}, true
	}
	return Limits{}, false
}
