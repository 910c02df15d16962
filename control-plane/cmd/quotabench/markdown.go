package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// verdicts says, for one mode's ladder, whether p99 stayed within p99Goal on every sustained
// rung and whether the CPU per limit reported grew no more than growthGoal.
func verdicts(rungs []rung) (p99Met, growthMet bool) {
	p99Met = true
	for _, r := range rungs {
		if r.whyNotSustained() == "" && r.p99() > p99Goal {
			p99Met = false
		}
	}
	return p99Met, growth(rungs) <= growthGoal
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// markdown is docs/benchmarks/quota/README.md.
func markdown(c config, ladders [][]rung, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# The quota service at scale (make bench-quota)

Measured %s on %s (%d CPUs, shared by every process below and the load generator), in %s.

The real quota service (`+"`weighstation quota`"+`) on a real store started by the benchmark on
free loopback ports: *single* is one plain redis-server; *sentinel* a primary, its replica and
three sentinels, *cluster* three primaries with a replica each, those two with TLS (client
certificates) and a password, as the local stack runs them (control-plane/internal/localstack).
%s gateway replicas (a ladder each, on a fresh store) each post the filter's own report
(POST /v1/shares, the JSON of weighstation_core::quota::shares_request) every %s, open loop,
replica i at i/N of the period, all on the same global limits, so that every limit's hash holds
every replica's report. %s of reports first, then %s measured per rung.

- *p50 / p99*: from when a report was due to its answer (a report sent late, behind its
  replica's previous one, counts its wait); exact samples.
- *Redis commands/s*: the data nodes' total_commands_processed over the window (commands run
  by grant.lua included), primaries, then + what the replicas replayed.
- *CPU per report*: the quota service's and the store's processes' CPU time (/proc/<pid>/stat,
  data nodes and sentinels) over the window, divided by the reports answered in it. *Per limit*
  is their sum divided by the limits a report carries: it should not grow up the ladder.
  Each limit's answer reads back every replica's report under it, so it grows with the
  replicas: compare the ladders of different replica counts.
- *Cores*: CPU time over wall time in the window, for the quota service, the store and the
  load generator itself.

A mode's ladder stops at the first rung it does not sustain: p99 over %s, or more than %.0f%% of
reports failed or were sent a period late. Goals, over the rungs sustained: p99 ≤ %s on each,
and CPU per limit reported never above %.0f× the first rung's (the cost of a report grows with the
limits it carries, not faster; it may fall, as more limits share each report's fixed cost).

`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), hostCPU(), runtime.NumCPU(), took.Round(time.Second),
		joinInts(c.replicaCounts, " and "), c.period, c.warmup, c.measure, sustainP99, 100*sustainMiss, p99Goal, growthGoal)
	b.WriteString(`| store | replicas | limits per replica | reports answered/s | limit reports/s | p50 | p99 | Redis commands/s | CPU per report: quota + Redis | CPU per limit reported | cores: quota / Redis / generator | p99 ≤ 50 ms |
|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--|
`)
	var verdictLines []string
	for _, rungs := range ladders {
		for _, r := range rungs {
			prim, repl := r.opsPerSecond()
			p99 := metOrNot(r.p99() <= p99Goal)
			if why := r.whyNotSustained(); why != "" {
				p99 = "not sustained: " + why
			}
			cores := func(d time.Duration) float64 { return d.Seconds() / r.window.Seconds() }
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %s | %s | %.0f + %.0f | %s + %s | %s | %.2f / %.2f / %.2f | %s |\n",
				r.mode, r.replicas, r.limits, r.answeredPerSecond(), r.answeredPerSecond()*float64(r.limits),
				r.p50().Round(10*time.Microsecond), r.p99().Round(10*time.Microsecond), prim, repl,
				r.perReport(r.cost.quotaCPU).Round(time.Microsecond), r.perReport(r.cost.redisCPU).Round(time.Microsecond),
				r.perLimit().Round(100*time.Nanosecond), cores(r.cost.quotaCPU), cores(r.cost.redisCPU), cores(r.cost.benchCPU), p99)
		}
		p99Met, growthMet := verdicts(rungs)
		stop := "every rung sustained"
		if last := rungs[len(rungs)-1]; last.whyNotSustained() != "" {
			stop = fmt.Sprintf("the ladder stopped at %d limits (%s)", last.limits, last.whyNotSustained())
		}
		verdictLines = append(verdictLines, fmt.Sprintf("- **%s, %d replicas**: p99 ≤ %s %s; CPU per limit reported, most over the first rung's, %.2f× (goal ≤ %.0f×): %s; %s.",
			rungs[0].mode, rungs[0].replicas, p99Goal, metOrNot(p99Met), growth(rungs), growthGoal, metOrNot(growthMet), stop))
	}
	b.WriteString("\n" + strings.Join(verdictLines, "\n") + "\n")
	return b.String()
}

func joinInts(ns []int, sep string) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, sep)
}

// hostCPU is the machine's CPU model, as /proc/cpuinfo names it.
func hostCPU() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "an unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "an unknown CPU"
}
