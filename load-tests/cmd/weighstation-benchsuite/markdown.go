package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
	"github.com/weighstation/weighstation/load-tests/internal/report"
	"github.com/weighstation/weighstation/load-tests/internal/scenario"
)

// writeMarkdown writes docs/benchmarks/README.md: every figure of the suite in tables, with
// the machine's load beside each, and the plots.
func writeMarkdown(w io.Writer, h host, s *suite) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# weighstation benchmarks\n\n")
	if h.Quick {
		p("> **Quick run** (`-quick`): measurements a few seconds long, to check the suite itself. These figures are not evidence.\n\n")
	}
	p("Produced by `make bench` (`load-tests/cmd/weighstation-benchsuite`) on %s at commit `%s`, in %s.\n", h.Date, h.Commit, h.Elapsed)
	p("Machine: %d × %s, Linux %s, %s. The harness, Envoy, nats-server and Kafka all share these cores.\n\n", h.Cores, h.CPU, h.Kernel, h.Go)
	p(`How to read this: every latency is measured open-loop — sends follow a fixed-rate schedule made
in advance, whatever the system does, and each latency runs from the message's *intended* send time
to its completion (delivery to a subscriber, the reply, the JetStream or Kafka ack) — into an
HdrHistogram (1 µs to 60 s, 3 significant digits). Figures are milliseconds. *direct* is the broker
itself, *gateway* is Envoy with the weighstation filter in front of the same broker, and (NATS)
*tcp-proxy* is Envoy with tcp_proxy alone, no filter — so gateway ÷ tcp-proxy is what the filter
itself costs. A comparison alternates the targets every %s within one run (A B C A B C …) so that
drift in the machine hits all alike; its ratios divide percentile by percentile. A run marked **invalid** fell behind its
own schedule (operations started more than 1 ms late at p99): its figures describe the harness.
Each row's *machine* column is the share of all cores busy during that run, the share the
hypervisor stole for other machines (time this one wanted to run and could not), the 1-minute
load average after it, and how late (p99, ms) a thread sleeping 200 µs woke just before it — on a
virtual machine whose CPUs are mostly idle the hypervisor wakes them late, and that lateness is
a floor under every latency here (the brokers' threads sleep too) and under the harness's
punctuality. Per-process CPU is in each run's summary.json (the run's report.html beside it is
build output, written by the run and not kept in the repository). See
[load-tests/README.md](../../load-tests/README.md) for the method and its limits.

`, s.timing.phase)

	if len(s.Probes) > 0 {
		p("## Saturation on this machine\n\n")
		p("Through the gateway, tenant `acme` (limits enforced, never reached), %s per step after %s warm-up; a step fails when the gateway delivers under 97%% of the rate, p99 exceeds 50 ms, anything fails, or the harness falls more than 10 ms behind at p99 (a step it kept to within 10 ms but not 1 ms is marked invalid and does not stop the probe). The three comparison rates below are 10%%, 40%% and 80%% of the highest rate that held.\n\n", s.timing.probeLength, s.timing.probeWarmup)
		p("| scenario | rate/s | delivered/s | p50 | p99 | max | machine | verdict |\n|---|---:|---:|---:|---:|---:|---|---|\n")
		for _, pr := range s.Probes {
			for _, st := range pr.Steps {
				t := st.Summary.Targets[0]
				verdict := "held"
				if !st.OK {
					verdict = "✗ " + st.Why
				}
				verdict += validity(st.Summary)
				p("| %s | %.0f | %.0f | %s | %s | %s | %s | %s |\n", pr.Scenario, st.Rate, t.AchievedRate,
					msf(t.LatencyMicros.P50), msf(t.LatencyMicros.P99), msf(t.LatencyMicros.Max), load(st.Summary), verdict)
			}
			switch {
			case pr.AtCeiling:
				p("| **%s** | **≥ %.0f** | | | | | | **saturation beyond the probe's highest rate** |\n", pr.Scenario, pr.Saturation)
			case len(pr.Steps) > 0 && !pr.Steps[0].OK:
				p("| **%s** | **%.0f?** | | | | | | **not even the first rate held: a guess** |\n", pr.Scenario, pr.Saturation)
			default:
				p("| **%s** | **%.0f** | | | | | | **saturation** |\n", pr.Scenario, pr.Saturation)
			}
		}
	}

	if len(s.CPU) > 0 {
		writeCPU(p, s.CPU)
	}

	if len(s.Comparisons) > 0 {
		p("\n## Direct vs Envoy vs gateway\n\n")
		byScenario := map[string][]comparison{}
		var order []string
		for _, c := range s.Comparisons {
			if _, ok := byScenario[c.Scenario]; !ok {
				order = append(order, c.Scenario)
			}
			byScenario[c.Scenario] = append(byScenario[c.Scenario], c)
		}
		for _, scen := range order {
			p("### %s — %s\n\n", scen, scenario.Describe(scen))
			p("| rate/s | target | p50 | p90 | p99 | p99.9 | p99.99 | max | delivered/s | errors | machine |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
			for _, c := range byScenario[scen] {
				sum := c.Summary
				for _, t := range sum.Targets {
					p("| %.0f %s | %s | %s | %.0f | %d | %s |\n", sum.Rate, c.Level, t.Name, percentiles(t.LatencyMicros), t.AchievedRate,
						t.Errors+t.Timeouts+t.Refused, load(sum)+validity(sum))
				}
				for i, r := range sum.Ratios {
					p("| | **%s ÷ %s** |", r.Target, r.Baseline)
					for _, v := range r.Named() {
						p(" **%.2f×** |", v.Value)
					}
					link := ""
					if i == len(sum.Ratios)-1 {
						link = fmt.Sprintf("[summary](%s/summary.json)", c.Dir)
					}
					p(" | | %s |\n", link)
				}
			}
			last := byScenario[scen][len(byScenario[scen])-1]
			p("\n![%s at %.0f/s](%s/percentiles.png)\n\n", scen, last.Summary.Rate, last.Dir)
		}
	}

	if len(s.Overloads) > 0 {
		p("## Rate accuracy under overload\n\n")
		p("Tenants limited to %.0f messages/s (burst: one second's worth): `globex` holds the sender (delay; queue 1000 messages, 250 ms), the default tenant refuses at once (reject). NATS messages are counted by a subscriber on nats-server itself, i.e. what the gateway let through. %s measured after %s warm-up, through the gateway. *delivered* is what completed (reached the subscriber / was acknowledged) per second; latencies are of those.\n\n", tenantLimit, s.timing.limitLength, s.timing.limitWarmup)
		p("| scenario | tenant (onLimit) | offered/s | delivered/s | delivered ÷ limit | refused | failed | undelivered | p50 | p99 | max | machine |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, o := range s.Overloads {
			t := o.Summary.Targets[0]
			p("| %s | %s (%s) | %.0f | %.0f | %.2f | %d | %d | %d | %s | %s | %s | %s |\n", o.Protocol, o.Tenant, o.Mode, o.Offered, t.AchievedRate,
				t.AchievedRate/o.Limit, t.Refused, t.Errors, t.Timeouts, msf(t.LatencyMicros.P50), msf(t.LatencyMicros.P99), msf(t.LatencyMicros.Max),
				load(o.Summary)+validity(o.Summary))
		}
		p("\nA delivered ÷ limit near 1.00 at both 2× and 10× is an enforced limit; near 2 and 10 means the limit was not enforced for that protocol in this build.\n\n")
	}

	var between, within []neighbour
	for _, n := range s.Neighbours {
		if n.Within {
			within = append(within, n)
		} else {
			between = append(between, n)
		}
	}
	if len(between) > 0 {
		p("## Noisy neighbour\n\n")
		p("Tenant `acme` (limits enforced, never reached) at a fixed rate through the gateway, first alone, then while `globex` offers 10× its %.0f/s limit on the same gateway and broker.\n\n", tenantLimit)
		neighbourTable(p, between)
	}
	if len(within) > 0 {
		p("## Noisy neighbour within a tenant\n\n")
		p("Client `billing-b` of tenant `billing` (delay; each client %.0f/s, the tenant %.0f/s: `spec.clients`) at half its client limit, first alone, then while client `billing-a` of the same tenant offers 10× its own limit.\n\n", clientLimit, 3*clientLimit)
		neighbourTable(p, within)
	}
	if len(s.Failures) > 0 {
		p("\n## What could not be measured\n\n")
		p("Each failure below cost a fresh stack for the measurements after it.\n\n")
		for _, f := range s.Failures {
			p("- **%s**: `%s`\n", f.What, f.Error)
		}
	}
	p("\nPlots, `.hgrm` distributions (HdrHistogram's plotter reads them) and summary.json for every run are under [runs/](runs/); the suite's every figure is in [suite.json](suite.json).\n")
}

// percentiles is p50 … max as table cells.
func percentiles(p hist.Percentiles) string {
	var cells []string
	for _, v := range p.Named() {
		cells = append(cells, msf(v.Micro))
	}
	return strings.Join(cells, " | ")
}

func msf(us int64) string { return fmt.Sprintf("%.3f", float64(us)/1000) }

func load(s report.Summary) string {
	return fmt.Sprintf("CPU %.0f%%, steal %.0f%%, load %.2f, wake-up p99 %s", s.Machine.CPUBusyPercent, s.Machine.StealPercent, s.Machine.LoadAvgAfter[0], msf(s.Machine.WakeupLatenessMicros.P99))
}

func validity(s report.Summary) string {
	if s.Valid {
		return ""
	}
	return " — **invalid**"
}

// neighbourTable compares each victim's latency alone and beside its noisy neighbour.
func neighbourTable(p func(string, ...any), ns []neighbour) {
	p("| scenario | victim | p50 | p90 | p99 | p99.9 | p99.99 | max | delivered/s | machine |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, n := range ns {
		a, b := n.Alone.Targets[0], n.WithNoisy.Targets[0]
		p("| %s %.0f/s | %s alone | %s | %.0f | %s |\n", n.Scenario, n.Rate, n.Victim, percentiles(a.LatencyMicros), a.AchievedRate, load(n.Alone)+validity(n.Alone))
		p("| | next to %s | %s | %.0f | %s |\n", n.Noisy, percentiles(b.LatencyMicros), b.AchievedRate, load(n.WithNoisy)+validity(n.WithNoisy))
		r := report.Compare(b, a)
		p("| | **with ÷ alone** |")
		for _, v := range r.Named() {
			p(" **%.2f×** |", v.Value)
		}
		g := n.Neighbour.Targets[0]
		p(" | %s delivered %.0f/s of %.0f offered, %d refused |\n", n.Noisy, g.AchievedRate, n.Neighbour.Rate, g.Refused)
	}
}
