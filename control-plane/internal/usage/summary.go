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

// maxClientsPerSecond bounds the clients a tenant's refusal ring and per-second history keep
// per second (workers report at most their 8 busiest each); maxClientsPerMinute, its
// per-minute history per minute.
const (
	maxClientsPerSecond = 64
	maxClientsPerMinute = 256
)

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
		if c.Refused == 0 {
			continue
		}
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
	for _, bk := range b.seconds.since(from, false) {
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

// ClientRate is one client's traffic over the last minute, per second: what the opt-in
// per-client metrics show.
type ClientRate struct {
	Protocol, Tenant, Client string
	MessagesPerSecond        float64
	BytesPerSecond           float64
	RefusedPerSecond         float64
}

// ClientRates are each tenant's top clients (by messages admitted and refused) over the minute
// before now, at most top per protocol and tenant, by protocol, tenant, then busiest first.
func (b *Book) ClientRates(now time.Time, top int) []ClientRate {
	b.mu.Lock()
	defer b.mu.Unlock()
	window := summaryWindow.Seconds()
	sums := map[[3]string]*ClientRate{}
	// The seconds that began in the minute before now.
	width := b.seconds.widthMs
	from, to := (now.Add(-summaryWindow).UnixMilli()+width-1)/width, (now.UnixMilli()+width-1)/width
	for slot := from; slot < to; slot++ {
		for _, rows := range b.seconds.clients[slot] {
			for _, r := range rows {
				k := [3]string{r.Protocol, r.Tenant, r.Client}
				s := sums[k]
				if s == nil {
					s = &ClientRate{Protocol: r.Protocol, Tenant: r.Tenant, Client: r.Client}
					sums[k] = s
				}
				s.MessagesPerSecond += float64(r.Messages) / window
				s.BytesPerSecond += float64(r.Bytes) / window
				s.RefusedPerSecond += float64(r.Refused) / window
			}
		}
	}
	all := make([]ClientRate, 0, len(sums))
	for _, s := range sums {
		all = append(all, *s)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Protocol != b.Protocol || a.Tenant != b.Tenant {
			return a.Protocol+"/"+a.Tenant < b.Protocol+"/"+b.Tenant
		}
		if a.MessagesPerSecond+a.RefusedPerSecond != b.MessagesPerSecond+b.RefusedPerSecond {
			return a.MessagesPerSecond+a.RefusedPerSecond > b.MessagesPerSecond+b.RefusedPerSecond
		}
		return a.Client < b.Client
	})
	var out []ClientRate
	for i, c := range all {
		if i >= top && all[i-top].Protocol == c.Protocol && all[i-top].Tenant == c.Tenant {
			continue
		}
		out = append(out, c)
	}
	return out
}
