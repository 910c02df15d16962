// Command weighstation-benchsuite is `make bench`: it starts the local stack with the
// benchmark's own policies on free ports, and measures into docs/benchmarks/: Envoy's CPU per
// message through the filter and without it (cpu.go), and, open-loop, the saturation of the
// gateway on this machine, direct vs gateway at three rates for NATS and Kafka, rate accuracy
// at 2× and 10× a tenant's limit, and noisy-neighbour isolation. Every result records the
// machine's load. The whole run takes about 20 minutes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/gctune"
)

func main() {
	gctune.Apply()
	root := flag.String("root", ".", "repository root (holds .tools/ and the built filter)")
	out := flag.String("out", "docs/benchmarks", "where the evidence goes (its runs/ is replaced)")
	quick := flag.Bool("quick", false, "short measurements, to check the suite itself (figures are not evidence)")
	only := flag.String("only", "", "comma-separated scenarios to measure (e.g. nats-request), each with its saturation probe; default all")
	flag.Parse()
	if err := run(*root, *out, *quick, scenarioSet(*only)); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-benchsuite:", err)
		os.Exit(1)
	}
}

func scenarioSet(list string) map[string]bool {
	set := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			set[s] = true
		}
	}
	return set
}

func run(root, out string, quick bool, only map[string]bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	machineHost := describeHost(root)

	fmt.Fprintln(os.Stderr, "starting the local stack (nats-server, Kafka, control plane, Envoy)…")
	st, err := startStack(root)
	if err != nil {
		return err
	}
	s := &suite{ctx: ctx, root: root, stack: st, out: out, timing: fullTiming, watch: st.Processes(), only: only}
	defer func() { s.stack.Stop() }() // the stack in use at the end (a failure restarts it)
	if quick {
		s.timing = quickTiming
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "runs")); err != nil {
		return err
	}
	if err := s.runAll(); err != nil {
		return err
	}
	machineHost.Elapsed = time.Since(started).Round(time.Second).String()
	machineHost.Quick = quick
	js, err := json.MarshalIndent(struct {
		Host        host         `json:"host"`
		Probes      []probe      `json:"saturationProbes"`
		Comparisons []comparison `json:"comparisons"`
		Overloads   []overload   `json:"overloads"`
		Neighbours  []neighbour  `json:"noisyNeighbours"`
		CPU         []cpuCost    `json:"envoyCpuPerMessage"`
		Failures    []failure    `json:"failures,omitempty"`
	}{machineHost, s.Probes, s.Comparisons, s.Overloads, s.Neighbours, s.CPU, s.Failures}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "suite.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(out, "README.md"))
	if err != nil {
		return err
	}
	writeMarkdown(md, machineHost, s)
	if err := md.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "done in %s: %s\n", machineHost.Elapsed, filepath.Join(out, "README.md"))
	return nil
}

// runAll measures everything. The order puts what might break the stack late: NATS delay-mode
// overload (backpressure held across many connections) runs last.
func (s *suite) runAll() error {
	probes := []struct {
		scenario string
		start    float64
	}{{"nats-pubsub", 2000}, {"nats-request", 1000}, {"kafka-acks1", 1000}}
	// Warm the stack up first (Kafka's JIT, Envoy's and the brokers' buffers), unmeasured, so
	// the first probe step does not measure a stack that has just started.
	// JetStream and acks=all are measured at the rate of their closest probe.
	probed := map[string]string{"jetstream": "nats-request", "kafka-acksall": "kafka-acks1"}
	needed := func(probe string) bool {
		if len(s.only) == 0 || s.only[probe] {
			return true
		}
		for scen, p := range probed {
			if p == probe && s.only[scen] {
				return true
			}
		}
		return false
	}
	for _, scen := range []string{"nats-pubsub", "nats-request", "kafka-acks1"} {
		if !needed(scen) {
			continue
		}
		if err := s.try("warming up with "+scen, func() error { return s.warmUp(scen) }); err != nil {
			return err
		}
	}
	saturation := map[string]float64{}
	for _, p := range probes {
		if !needed(p.scenario) {
			continue
		}
		fmt.Fprintf(os.Stderr, "saturation probe: %s\n", p.scenario)
		err := s.try("saturation probe "+p.scenario, func() error {
			pr, err := s.probeSaturation(p.scenario, p.start)
			s.Probes = append(s.Probes, pr)
			saturation[p.scenario] = pr.Saturation
			return err
		})
		if err != nil {
			return err
		}
	}
	type step struct {
		what string
		run  func() error
	}
	var steps []step
	add := func(what string, run func() error) {
		scen, _, _ := strings.Cut(what, " ")
		if len(s.only) == 0 || s.only[scen] {
			steps = append(steps, step{what, run})
		}
	}
	// First, on a fresh stack: CPU is what the filter itself costs.
	add("cpu Envoy CPU per message", s.measureCPU)
	for _, scen := range []string{"nats-pubsub", "nats-request", "kafka-acks1"} {
		for _, l := range levels {
			rate := roundRate(l.share * saturation[scen])
			add(fmt.Sprintf("%s %s %.0f/s", scen, l.name, rate), func() error { return s.compare(scen, l.name, rate) })
		}
	}
	// JetStream and acks=all cost about what request/reply and acks=1 do: one rate each.
	jsRate, allRate := roundRate(0.4*saturation["nats-request"]), roundRate(0.4*saturation["kafka-acks1"])
	add("jetstream medium", func() error { return s.compare("jetstream", "medium", jsRate) })
	add("kafka-acksall medium", func() error { return s.compare("kafka-acksall", "medium", allRate) })
	overloads := func(scen string, t tenant) {
		for _, factor := range []float64{2, 10} {
			add(fmt.Sprintf("%s %s %.0f×", scen, t.name, factor), func() error { return s.overload(scen, t, factor) })
		}
	}
	overloads("kafka-acks1", globex)
	overloads("kafka-acks1", anonymous)
	add("kafka-acks1 noisy neighbour", func() error { return s.noisyNeighbour("kafka-acks1", tenantLimit) })
	overloads("nats-pubsub", anonymous)
	add("nats-pubsub noisy neighbour", func() error { return s.noisyNeighbour("nats-pubsub", tenantLimit) })
	overloads("nats-pubsub", globex)
	// Within a tenant: its own scenario name, so that `-only clients` measures it alone.
	add("clients kafka-acks1 noisy neighbour within a tenant", func() error { return s.clientNeighbour("kafka-acks1") })
	add("clients nats-pubsub noisy neighbour within a tenant", func() error { return s.clientNeighbour("nats-pubsub") })
	for _, st := range steps {
		if err := s.try(st.what, st.run); err != nil {
			return err
		}
	}
	return nil
}
