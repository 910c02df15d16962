package usage

import (
	"sort"
	"time"
)

// Bucket is one tenant's traffic in one bucket of time (a minute for chargeback, a second for
// `weighstation impact`), summed over every worker that reported it.
type Bucket struct {
	Start    time.Time `json:"start" parquet:"start,timestamp(millisecond)"`
	Protocol string    `json:"protocol" parquet:"protocol,dict"`
	Tenant   string    `json:"tenant" parquet:"tenant,dict"`
	// Client is empty on the tenant's own row. A client row (tenants with client limits: at most
	// clientRows of their busiest clients per bucket) has the client's messages, bytes and
	// refused; its delayed and consumed are 0 (counted per tenant only).
	Client   string `json:"client,omitempty" parquet:"client,dict"`
	Messages uint64 `json:"messages" parquet:"messages"`
	Bytes    uint64 `json:"bytes" parquet:"bytes"`
	Refused  uint64 `json:"refused" parquet:"refused"`
	Delayed  uint64 `json:"delayed" parquet:"delayed"`
	// Consumed is the record bytes delivered to the tenant's consumers (the read side).
	Consumed uint64 `json:"consumed" parquet:"consumed"`
	// RefusedBy is Refused by reason (Reasons' order), for the LimitPolicy status summary.
	RefusedBy [6]uint64 `json:"-" parquet:"-"`
}

// series is a ring of time buckets of widthMs: each report spreads what its worker counted since
// its previous one over the buckets that span (from, to], in proportion to the time each covers
// (a report comes about once a second, at any phase of a second). Buckets older than keep
// (by the control plane's clock) are dropped.
type series struct {
	widthMs int64
	keep    int // buckets
	buckets map[int64]map[string]*Bucket
	// clients are the client rows, by bucket and protocol/tenant, then client: at most
	// maxClients per tenant and bucket (the rest are in the tenant's row only).
	clients    map[int64]map[string]map[string]*Bucket
	maxClients int
}

// clientRows is how many client rows a tenant has per bucket in History, the busiest (by
// messages admitted and refused) first.
const clientRows = 10

// apportion spreads totals counted over (fromMs, toMs] over the buckets of widthMs that span
// it, in proportion to the time each covers: each bucket's part is the rounded share of the
// time up to its end, less what earlier buckets got, so the parts add up to the whole exactly.
func apportion(fromMs, toMs, widthMs int64, totals []uint64, each func(slot int64, part []uint64)) {
	span := toMs - fromMs
	given := make([]uint64, len(totals))
	part := make([]uint64, len(totals))
	for slot := fromMs / widthMs; slot*widthMs < toMs; slot++ {
		end := min((slot+1)*widthMs, toMs)
		for i, total := range totals {
			upTo := uint64(float64(total) * float64(end-fromMs) / float64(span))
			if end == toMs {
				upTo = total
			}
			part[i], given[i] = upTo-given[i], upTo
		}
		each(slot, part)
	}
}

// add counts what a worker counted over (fromMs, toMs], and its report's clients over
// (clientsFromMs, toMs].
func (s *series) add(fromMs, clientsFromMs, toMs, nowMs int64, cur, prev TenantCount) {
	if s.buckets == nil {
		s.buckets = map[int64]map[string]*Bucket{}
		s.clients = map[int64]map[string]map[string]*Bucket{}
	}
	delta := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	var refused, prevRefused uint64
	for i := range cur.Refused {
		refused += cur.Refused[i]
		prevRefused += prev.Refused[i]
	}
	var d [11]uint64
	d[0], d[1], d[2] = delta(cur.Messages, prev.Messages), delta(cur.Bytes, prev.Bytes), delta(refused, prevRefused)
	d[3], d[4] = delta(cur.Delayed, prev.Delayed), delta(cur.Consumed, prev.Consumed)
	for i := range cur.Refused {
		d[5+i] = delta(cur.Refused[i], prev.Refused[i])
	}
	if toMs <= fromMs {
		return
	}
	oldest := nowMs/s.widthMs - int64(s.keep)
	for old := range s.buckets {
		if old <= oldest {
			delete(s.buckets, old)
		}
	}
	for old := range s.clients {
		if old <= oldest {
			delete(s.clients, old)
		}
	}
	k := key(cur.Protocol, cur.Tenant)
	if d != [11]uint64{} {
		apportion(fromMs, toMs, s.widthMs, d[:], func(slot int64, part []uint64) {
			if slot <= oldest || isZero(part) {
				return
			}
			b := s.buckets[slot]
			if b == nil {
				b = map[string]*Bucket{}
				s.buckets[slot] = b
			}
			t := b[k]
			if t == nil {
				t = &Bucket{Start: time.UnixMilli(slot * s.widthMs).UTC(), Protocol: cur.Protocol, Tenant: cur.Tenant}
				b[k] = t
			}
			t.Messages += part[0]
			t.Bytes += part[1]
			t.Refused += part[2]
			t.Delayed += part[3]
			t.Consumed += part[4]
			for i := range t.RefusedBy {
				t.RefusedBy[i] += part[5+i]
			}
		})
	}
	// A report's clients are counted since the worker's previous report already.
	for _, c := range cur.Clients {
		apportion(clientsFromMs, toMs, s.widthMs, []uint64{c.Messages, c.Bytes, c.Refused}, func(slot int64, part []uint64) {
			if slot <= oldest || isZero(part) {
				return
			}
			byTenant := s.clients[slot]
			if byTenant == nil {
				byTenant = map[string]map[string]*Bucket{}
				s.clients[slot] = byTenant
			}
			rows := byTenant[k]
			if rows == nil {
				rows = map[string]*Bucket{}
				byTenant[k] = rows
			}
			row := rows[c.Client]
			if row == nil {
				if len(rows) >= s.maxClients {
					return
				}
				row = &Bucket{Start: time.UnixMilli(slot * s.widthMs).UTC(), Protocol: cur.Protocol, Tenant: cur.Tenant, Client: c.Client}
				rows[c.Client] = row
			}
			row.Messages += part[0]
			row.Bytes += part[1]
			row.Refused += part[2]
		})
	}
}

func isZero(part []uint64) bool {
	for _, v := range part {
		if v != 0 {
			return false
		}
	}
	return true
}

// since lists the buckets starting at or after from, by time then protocol and tenant; with
// clients, each tenant's row is followed by its busiest clients' (at most clientRows), busiest
// first.
func (s *series) since(from time.Time, clients bool) []Bucket {
	var out []Bucket
	for slot, b := range s.buckets {
		if slot < from.UnixMilli()/s.widthMs {
			continue
		}
		for _, t := range b {
			out = append(out, *t)
		}
		if !clients {
			continue
		}
		for _, rows := range s.clients[slot] {
			busiest := make([]Bucket, 0, len(rows))
			for _, r := range rows {
				busiest = append(busiest, *r)
			}
			sort.Slice(busiest, func(i, j int) bool {
				a, b := busiest[i], busiest[j]
				if a.Messages+a.Refused != b.Messages+b.Refused {
					return a.Messages+a.Refused > b.Messages+b.Refused
				}
				return a.Client < b.Client
			})
			out = append(out, busiest[:min(clientRows, len(busiest))]...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		if a.Protocol+"/"+a.Tenant != b.Protocol+"/"+b.Tenant {
			return a.Protocol+"/"+a.Tenant < b.Protocol+"/"+b.Tenant
		}
		// A tenant's row first; its clients stay busiest first, as appended.
		return a.Client == "" && b.Client != ""
	})
	return out
}
