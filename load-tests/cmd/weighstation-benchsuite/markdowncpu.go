package main

import (
	"fmt"
	"strings"
)

// writeCPU is the CPU cost section (see cpu.go).
func writeCPU(p func(string, ...any), costs []cpuCost) {
	p("\n## Envoy CPU per message\n\n")
	p("Clients at full speed, closed loop, as tenant `acme`, whose limits are enforced and never reached (rate 100M messages/s, inFlight 1M). ")
	p("*nats pub* is `nats bench pub` (natscli, one client) publishing through each target. ")
	p("*nats sub* is a subscriber connected through each target (natscli's bench subscriber, run in the harness so that publishing starts once it is subscribed) receiving what `nats bench pub` publishes on nats-server itself: Envoy carries the subscriber's traffic alone; through *gateway* as acme, whose consume limit (64 GiB/s) is never reached, so each read's deliveries are charged; through *gateway-unlimited* as tenant `reader`, without a consume limit, whose deliveries pass uncharged. ")
	p("*kafka produce R × S* is Produce requests (acks=1, at most 5 unanswered) over one connection, each carrying one record batch of R records of S bytes: a client pinned to its connection, since Kafka's own clients follow the broker's metadata to the gateway; its *tcp-proxy* is an Envoy listener without the filter to the same broker listener as the gateway's. ")
	p("*kafka produce … acks=1* is Kafka's `kafka-producer-perf-test` (the Java producer). ")
	p("*kafka fetch S* is Fetch requests over one pinned connection, one at a time as a consumer sends them, each answered with S bytes of records: through *gateway* as acme, whose consume limit (64 GiB/s) is never reached, so each response's headers are walked and its records charged; through *gateway-unlimited* as tenant `reader`, without a consume limit, whose responses pass unread. ")
	p("Each target in turn, round after round, in one run; *Envoy CPU* is the time the Envoy process's threads spent on a CPU over the run (their schedstat, in nanoseconds) divided by its messages (Produce requests for *kafka produce*, whose *µs/record* divides by the records in each). ")
	p("*gateway-open* is the gateway as tenant `reader`, with acme's producing limits but no permission lists, beside *gateway* as acme, whose publishes are decided against a subject list and whose Produce requests against a topic list (each kept per subject or topic on the connection): the difference is what deciding permissions costs. ")
	p("*nats pub, tenants*: *gateway-10k-tenants* is *gateway* with 10,000 more LimitPolicies in force (switched in and out between the rounds): the goal is the same cost per message within 5%%. ")
	p("*wasm-noop* and *native-noop* are Envoy with a filter that does nothing ahead of tcp_proxy, reached as *tcp-proxy* is (see the floor below). ")
	p("*direct* is the broker itself (Envoy idle), *tcp-proxy* Envoy without the filter, *gateway-tls* the gateway's TLS-first NATS listener (TLS 1.3, the nats CLI's `--tlsfirst`). Median (lowest–highest) over the rounds.\n\n")
	p("| workload | target | messages per run | msgs/s | Envoy CPU µs/msg | µs/record |\n|---|---|---:|---:|---:|---:|\n")
	for _, c := range costs {
		r, m := c.rate(), c.micros()
		n := 0
		if len(c.Runs) > 0 {
			n = c.Runs[0].Messages
		}
		perRecord := ""
		if c.Records > 1 {
			perRecord = fmt.Sprintf("%.4f", m.Median/float64(c.Records))
		}
		p("| %s | %s | %d | %.0f (%.0f–%.0f) | %.3f (%.3f–%.3f) | %s |\n", c.Workload, c.Target, n, r.Median, r.Min, r.Max, m.Median, m.Min, m.Max, perRecord)
	}
	verdicts := cpuVerdicts(costs)
	p("\n| workload | comparison | Envoy CPU µs/msg more | throughput share | target | |\n|---|---|---:|---:|---|---|\n")
	for _, v := range verdicts {
		p("| %s | %s over %s | %.3f (%.3f–%.3f) | %.0f%% (%.0f–%.0f%%) | %s | %s |\n", v.Workload, v.Target, v.Baseline, v.OverMicros.Median, v.OverMicros.Min, v.OverMicros.Max,
			v.Share.Median*100, v.Share.Min*100, v.Share.Max*100, goal(v), verdictWord(v.hasGoal(), v.met()))
	}
	if scaling := produceScaling(verdicts); len(scaling) > 0 {
		p("\nWhat the gateway adds to a Produce request as it carries more: per record, (added(R) − added(1)) / (R − 1) at one record size; per KiB, the slope of a line fitted to what it adds at one record per request over the record sizes (medians).\n\n")
		p("| Kafka Produce, gateway over tcp-proxy | Envoy CPU µs more | target | |\n|---|---:|---|---|\n")
		for _, s := range scaling {
			p("| %s | %.4f | ≤ %g µs | %s |\n", s.What, s.Micros, s.Max, verdictWord(true, s.met()))
		}
	}
	if slopes := sizeSlopes(costs); len(slopes) > 0 {
		p("\nEach target's Envoy CPU per message as a fixed cost and a cost per KiB: a line fitted (least squares) to the medians over the sizes, one record per message.\n\n")
		p("| direction | target | sizes | Envoy CPU µs/msg at 0 B | µs per KiB |\n|---|---|---|---:|---:|\n")
		for _, s := range slopes {
			p("| %s | %s | %s–%s | %.3f | %.4f |\n", s.Direction, s.Target, sizeName(s.From), sizeName(s.To), s.FixedMicros, s.PerKiBMicros)
		}
	}
	writeFloors(p, costs)
	p("\n")
}

// goal is a verdict's target as a table cell.
func goal(v cpuVerdict) string {
	var parts []string
	if v.MaxOverMicros > 0 {
		parts = append(parts, fmt.Sprintf("≤ %.3g µs", v.MaxOverMicros))
	}
	if v.MinShare > 0 {
		parts = append(parts, fmt.Sprintf("≥ %.0f%%", v.MinShare*100))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func verdictWord(hasGoal, met bool) string {
	switch {
	case !hasGoal:
		return ""
	case met:
		return "**met**"
	}
	return "**missed**"
}
