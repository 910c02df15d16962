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
	Messages uint64    `json:"messages" parquet:"messages"`
	Bytes    uint64    `json:"bytes" parquet:"bytes"`
	Refused  uint64    `json:"refused" parquet:"refused"`
	Delayed  uint64    `json:"delayed" parquet:"delayed"`
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
}

func (s *series) add(fromMs, toMs, nowMs int64, cur, prev TenantCount) {
	if s.buckets == nil {
		s.buckets = map[int64]map[string]*Bucket{}
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
	if d == [11]uint64{} || toMs <= fromMs {
		return
	}
	oldest := nowMs/s.widthMs - int64(s.keep)
	for old := range s.buckets {
		if old <= oldest {
			delete(s.buckets, old)
		}
	}
	span := toMs - fromMs
	var given [11]uint64
	for slot := fromMs / s.widthMs; slot*s.widthMs < toMs; slot++ {
		// Each bucket's part is the rounded share of the time up to its end, less what earlier
		// buckets got: the parts add up to the whole exactly.
		end := min((slot+1)*s.widthMs, toMs)
		var part [11]uint64
		for i, total := range d {
			upTo := uint64(float64(total) * float64(end-fromMs) / float64(span))
			if end == toMs {
				upTo = total
			}
			part[i], given[i] = upTo-given[i], upTo
		}
		if slot <= oldest || part == [11]uint64{} {
			continue
		}
		b := s.buckets[slot]
		if b == nil {
			b = map[string]*Bucket{}
			s.buckets[slot] = b
		}
		k := key(cur.Protocol, cur.Tenant)
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
	}
}

// since lists the buckets starting at or after from, by time then protocol and tenant.
func (s *series) since(from time.Time) []Bucket {
	var out []Bucket
	for slot, b := range s.buckets {
		if slot < from.UnixMilli()/s.widthMs {
			continue
		}
		for _, t := range b {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.Protocol+"/"+a.Tenant < b.Protocol+"/"+b.Tenant
	})
	return out
}
