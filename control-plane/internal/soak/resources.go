package soak

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SampleEvery is how often the resources are sampled.
const SampleEvery = 10 * time.Second

// Sample is one reading of the resources the soak bounds.
type Sample struct {
	At         time.Duration // since the load started
	EnvoyRSS   float64       // MiB; NaN while Envoy is restarting
	CPRSS      float64       // MiB, the control plane
	SharedKeys float64       // weighstation_shared_data_keys
	Held       float64       // messages held by the filter (sum of weighstation_queue_depth)
	EnvoyPID   int
	CPPID      int
}

// rssMiB reads a process's resident set size from /proc.
func rssMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return math.NaN()
			}
			return kb / 1024
		}
	}
	return math.NaN()
}

// sampler records a Sample every SampleEvery.
type sampler struct {
	start             time.Time
	envoyPID, cpPID   func() int
	scraper           *Scraper
	mu                sync.Mutex
	samples           []Sample
	heldMax, keysLast float64
}

func (s *sampler) sample() {
	_ = s.scraper.Scrape()
	pid, cp := s.envoyPID(), s.cpPID()
	smp := Sample{
		At: time.Since(s.start).Round(time.Second), EnvoyPID: pid, CPPID: cp,
		EnvoyRSS: rssMiB(pid), CPRSS: rssMiB(cp),
		SharedKeys: s.scraper.Sum("weighstation_shared_data_keys"),
		Held:       s.scraper.Sum("weighstation_queue_depth"),
	}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
}

func (s *sampler) run(stop <-chan struct{}) { every(SampleEvery, stop, s.sample) }

func (s *sampler) all() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Drift is how far a resource strayed, after warm-up, from its median over the same span.
type Drift struct {
	Name             string
	Samples          int
	Median, Min, Max float64
	// Worst is the largest |x − median| / median, as a fraction.
	Worst float64
	// Trend is the mean of the last minute's samples less the first minute's, as a fraction of
	// the median: a leak shows here even when it is still inside the band.
	Trend float64
}

// Drifts measures each resource within each lifetime of its process, over the samples taken
// after the first warmUp of that lifetime: a restarted process starts its memory afresh, and a
// fresh one is still filling its caches, heaps and pools. Shared-data keys live and die with
// Envoy. Each resource is reported by its worst lifetime, its trend over its longest.
func Drifts(samples []Sample, warmUp time.Duration) []Drift {
	pick := []struct {
		name string
		pid  func(Sample) int
		get  func(Sample) float64
	}{
		{"Envoy RSS (MiB)", func(s Sample) int { return s.EnvoyPID }, func(s Sample) float64 { return s.EnvoyRSS }},
		{"control plane RSS (MiB)", func(s Sample) int { return s.CPPID }, func(s Sample) float64 { return s.CPRSS }},
		{"shared-data keys", func(s Sample) int { return s.EnvoyPID }, func(s Sample) float64 { return s.SharedKeys }},
	}
	var out []Drift
	for _, p := range pick {
		born := map[int]time.Duration{}
		lifetimes := map[int][]Sample{}
		var order []int
		for _, s := range samples {
			pid := p.pid(s)
			if _, ok := born[pid]; !ok {
				born[pid] = s.At
				order = append(order, pid)
			}
			// Counted from the process's first sample, at most one interval after its start:
			// its warm-up is certainly over.
			if x := p.get(s); !math.IsNaN(x) && s.At-born[pid] >= warmUp {
				lifetimes[pid] = append(lifetimes[pid], s)
			}
		}
		worst, total := Drift{Name: p.name}, 0
		var longest []Sample
		for _, pid := range order {
			span := lifetimes[pid]
			if len(span) == 0 {
				continue
			}
			total += len(span)
			v := make([]float64, len(span))
			for i, s := range span {
				v[i] = p.get(s)
			}
			if d := drift(p.name, v); d.Worst >= worst.Worst || worst.Samples == 0 {
				worst = d
			}
			if len(span) > len(longest) {
				longest = span
			}
		}
		worst.Samples = total
		if len(longest) > 0 && worst.Median > 0 {
			first, last := longest[0].At, longest[len(longest)-1].At
			worst.Trend = (meanWithin(longest, p.get, last-time.Minute, last) - meanWithin(longest, p.get, first, first+time.Minute)) / worst.Median
		}
		out = append(out, worst)
	}
	return out
}

func meanWithin(samples []Sample, get func(Sample) float64, from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for _, s := range samples {
		if s.At >= from && s.At <= to {
			sum += get(s)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

func drift(name string, v []float64) Drift {
	d := Drift{Name: name, Samples: len(v)}
	if len(v) == 0 {
		return d
	}
	sorted := append([]float64(nil), v...)
	sort.Float64s(sorted)
	d.Min, d.Max = sorted[0], sorted[len(sorted)-1]
	d.Median = sorted[len(sorted)/2]
	if d.Median > 0 {
		d.Worst = math.Max(d.Max-d.Median, d.Median-d.Min) / d.Median
	}
	return d
}
