package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The CPU cost of the filter: Envoy's CPU time (utime + stime of the process) per message sent
// at full speed — published with `nats bench pub`, delivered to a subscriber, Kafka Produce
// requests over one connection and Kafka's own producer (cpuworkloads.go) — through the filter
// (for NATS also over TLS), through Envoy's tcp_proxy alone and straight to the broker, the
// targets alternated round after round in one run. On a shared 2-vCPU VM latency tails are
// noise; CPU per message holds from run to run.

// cpuRun is one measurement of one target.
type cpuRun struct {
	Round    int     `json:"round"`
	Messages int     `json:"messages"`
	Rate     float64 `json:"messagesPerSecond"`
	// EnvoyCPU is Envoy's utime + stime over the run, in seconds.
	EnvoyCPU float64 `json:"envoyCpuSeconds"`
}

func (r cpuRun) micros() float64 { return r.EnvoyCPU / float64(r.Messages) * 1e6 }

// cpuCost is every run of one target in one workload.
type cpuCost struct {
	Workload string `json:"workload"`
	workloadShape
	Target string   `json:"target"`
	Runs   []cpuRun `json:"runs"`
}

// spread is the median with the lowest and highest of a figure over the rounds.
type spread struct{ Median, Min, Max float64 }

func spreadOf(xs []float64) spread {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return spread{}
	}
	return spread{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

func (c cpuCost) rate() spread {
	var xs []float64
	for _, r := range c.Runs {
		xs = append(xs, r.Rate)
	}
	return spreadOf(xs)
}

func (c cpuCost) micros() spread {
	var xs []float64
	for _, r := range c.Runs {
		xs = append(xs, r.micros())
	}
	return spreadOf(xs)
}

// cpuRounds is how many times each target is measured, alternating.
func (s *suite) cpuRounds() int {
	if s.timing == quickTiming {
		return 2
	}
	return 5
}

// measureCPU runs every workload: round after round, each target in turn.
func (s *suite) measureCPU() error {
	pid, ok := s.watch["envoy"]
	if !ok {
		return fmt.Errorf("no envoy process to measure")
	}
	for _, w := range s.cpuWorkloads() {
		costs := map[string]*cpuCost{}
		for _, t := range w.targets {
			costs[t] = &cpuCost{Workload: w.name(), workloadShape: w.workloadShape, Target: t}
		}
		prepare := func(t string) error {
			if w.prepare == nil {
				return nil
			}
			return w.prepare(s.ctx, t)
		}
		// One unmeasured run per target first: connections, JIT and buffers warmed.
		for _, t := range w.targets {
			if err := prepare(t); err != nil {
				return fmt.Errorf("%s readying %s: %w", w.name(), t, err)
			}
			if _, err := w.send(s.ctx, t, w.messages/10); err != nil {
				return fmt.Errorf("%s warm-up via %s: %w", w.name(), t, err)
			}
		}
		for round := 1; round <= s.cpuRounds(); round++ {
			for _, t := range w.targets {
				if err := prepare(t); err != nil {
					return fmt.Errorf("%s readying %s: %w", w.name(), t, err)
				}
				before, err := processCPU(pid)
				if err != nil {
					return err
				}
				rate, err := w.send(s.ctx, t, w.messages)
				if err != nil {
					return fmt.Errorf("%s via %s: %w", w.name(), t, err)
				}
				after, err := processCPU(pid)
				if err != nil {
					return err
				}
				run := cpuRun{Round: round, Messages: w.messages, Rate: rate, EnvoyCPU: after - before}
				costs[t].Runs = append(costs[t].Runs, run)
				perRecord := ""
				if w.Records > 1 {
					perRecord = fmt.Sprintf(" (%.4f µs/record)", run.micros()/float64(w.Records))
				}
				fmt.Fprintf(os.Stderr, "  %s round %d via %s: %.0f msgs/s, Envoy %.3f µs/msg%s\n", w.name(), round, t, rate, run.micros(), perRecord)
			}
		}
		for _, t := range w.targets {
			s.CPU = append(s.CPU, *costs[t])
		}
	}
	return nil
}

// processCPU is the time a process's threads have spent on a CPU, in seconds, to the
// nanosecond: the first field of each thread's /proc/<pid>/task/<tid>/schedstat, summed (utime
// and stime count 10 ms ticks, as much as 0.17 µs per message in a run of 64 KiB messages).
// Envoy's threads live as long as it does, so no thread's time goes missing between readings.
func processCPU(pid int) (float64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d (a kernel without CONFIG_SCHEDSTATS?)", pid)
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited since the listing
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("%s: empty", t)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		ns += v
	}
	return ns / 1e9, nil
}

// lastLines is the end of a tool's output, on one line, for an error.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
