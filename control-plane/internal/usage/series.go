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
}

// series is a ring of time buckets of widthMs: each report adds what its worker counted since
// its previous one to the bucket the report was made in. Buckets older than keep are dropped.
type series struct {
	widthMs int64
	keep    int // buckets
	buckets map[int64]map[string]*Bucket
}

func (s *series) add(atMs int64, cur, prev TenantCount) {
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
	d := Bucket{
		Messages: delta(cur.Messages, prev.Messages),
		Bytes:    delta(cur.Bytes, prev.Bytes),
		Refused:  delta(refused, prevRefused),
		Delayed:  delta(cur.Delayed, prev.Delayed),
	}
	if d.Messages == 0 && d.Bytes == 0 && d.Refused == 0 && d.Delayed == 0 {
		return
	}
	slot := atMs / s.widthMs
	b := s.buckets[slot]
	if b == nil {
		b = map[string]*Bucket{}
		s.buckets[slot] = b
		for old := range s.buckets {
			if old <= slot-int64(s.keep) {
				delete(s.buckets, old)
			}
		}
	}
	k := key(cur.Protocol, cur.Tenant)
	t := b[k]
	if t == nil {
		t = &Bucket{Start: time.UnixMilli(slot * s.widthMs).UTC(), Protocol: cur.Protocol, Tenant: cur.Tenant}
		b[k] = t
	}
	t.Messages += d.Messages
	t.Bytes += d.Bytes
	t.Refused += d.Refused
	t.Delayed += d.Delayed
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
