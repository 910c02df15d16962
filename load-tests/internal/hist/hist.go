// Package hist records latencies in HdrHistograms (1 µs to 60 s, 3 significant digits, in
// microseconds) and reads and writes them in the .hgrm percentile-distribution format.
package hist

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	lowest     = 1                                          // µs
	highest    = int64(60 * time.Second / time.Microsecond) // µs
	sigFigures = 3
)

// New returns an empty histogram of microseconds with the project's range and precision.
func New() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, sigFigures) }

// Recorder is a histogram many goroutines may record into.
type Recorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	// overflow counts values above the histogram's range; they are recorded at its top so they
	// stay visible in the tail rather than vanishing.
	overflow int64
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{h: New()} }

// Record adds one latency. Values below 1 µs are recorded as 1 µs.
func (r *Recorder) Record(d time.Duration) {
	us := max(d.Microseconds(), lowest)
	r.mu.Lock()
	if us > highest {
		r.overflow++
		us = highest
	}
	_ = r.h.RecordValue(us) // in range by construction
	r.mu.Unlock()
}

// Snapshot returns a copy of what has been recorded so far.
func (r *Recorder) Snapshot() *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h.Clone()
}

// SnapshotAndReset returns what was recorded since the last reset and starts afresh (the
// progress line's "current" interval).
func (r *Recorder) SnapshotAndReset() *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.h.Clone()
	r.h.Reset()
	return c
}

// Overflow is how many values exceeded 60 s.
func (r *Recorder) Overflow() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overflow
}

// Percentiles are the figures every report shows, in microseconds. Max is the largest value
// recorded (at the histogram's resolution), never an estimate.
type Percentiles struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50"`
	P90   int64 `json:"p90"`
	P99   int64 `json:"p99"`
	P999  int64 `json:"p99_9"`
	P9999 int64 `json:"p99_99"`
	Max   int64 `json:"max"`
}

// PercentilesOf reads the standard percentiles from h.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.TotalCount(),
		P50:   h.ValueAtQuantile(50),
		P90:   h.ValueAtQuantile(90),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		P9999: h.ValueAtQuantile(99.99),
		Max:   h.Max(),
	}
}

// Named pairs each percentile with its label, in report order.
func (p Percentiles) Named() []NamedValue {
	return []NamedValue{
		{"p50", p.P50}, {"p90", p.P90}, {"p99", p.P99},
		{"p99.9", p.P999}, {"p99.99", p.P9999}, {"max", p.Max},
	}
}

// NamedValue is one labelled percentile in microseconds.
type NamedValue struct {
	Label string
	Micro int64
}
