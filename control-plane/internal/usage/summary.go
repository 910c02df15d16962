package usage

import (
	"sort"
	"time"
)

// summaryWindow is how far back a tenant's summary looks (its LimitPolicy's status), and the
// clients it names.
const (
	summaryWindow  = time.Minute
	summaryClients = 5
)

// maxClientsPerSecond bounds the clients a tenant's refusal ring keeps per second: workers
// report at most their 8 most refused each.
const maxClientsPerSecond = 64

// Summary is a tenant's last minute, over both protocols, as its LimitPolicy's status shows it.
type Summary struct {
	Admitted uint64
	Bytes    uint64
	Consumed uint64
	// Refused by reason (Reasons), the reasons with none left out.
	Refused map[string]uint64
	// TopClients are the five clients refused most, most first.
	TopClients []ClientCount
}

// clientRing is a tenant's client refusals over the last minute, a map per second.
type clientRing struct {
	second [60]int64
	counts [60]map[string]uint64
}

func (r *clientRing) add(atMs int64, clients []ClientCount) {
	sec := atMs / 1000
	i := int(sec % 60)
	if r.second[i] != sec || r.counts[i] == nil {
		r.second[i], r.counts[i] = sec, map[string]uint64{}
	}
	for _, c := range clients {
		if _, ok := r.counts[i][c.Client]; ok || len(r.counts[i]) < maxClientsPerSecond {
			r.counts[i][c.Client] += c.Refused
		}
	}
}

// topClients sums the rings' last minute and keeps the n clients refused most.
func topClients(rings []*clientRing, nowMs int64, n int) []ClientCount {
	sum := map[string]uint64{}
	for _, r := range rings {
		if r == nil {
			continue
		}
		for i, sec := range r.second {
			if sec > nowMs/1000-int64(summaryWindow/time.Second) {
				for c, v := range r.counts[i] {
					sum[c] += v
				}
			}
		}
	}
	out := make([]ClientCount, 0, len(sum))
	for c, v := range sum {
		out = append(out, ClientCount{Client: c, Refused: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Refused != out[j].Refused {
			return out[i].Refused > out[j].Refused
		}
		return out[i].Client < out[j].Client
	})
	return out[:min(n, len(out))]
}

// Summary is tenant's traffic over the minute before now: the per-second buckets that began in
// it, and its clients' refusals.
func (b *Book) Summary(tenant string, now time.Time) Summary {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Summary{Refused: map[string]uint64{}}
	from := now.Add(-summaryWindow)
	for _, bk := range b.seconds.since(from) {
		if bk.Tenant != tenant || !bk.Start.Before(now) {
			continue
		}
		s.Admitted += bk.Messages
		s.Bytes += bk.Bytes
		s.Consumed += bk.Consumed
		for i, n := range bk.RefusedBy {
			if n > 0 {
				s.Refused[Reasons[i]] += n
			}
		}
	}
	s.TopClients = topClients([]*clientRing{b.clients[key("nats", tenant)], b.clients[key("kafka", tenant)]}, now.UnixMilli(), summaryClients)
	return s
}
