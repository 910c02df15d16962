package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The CPU cost of the filter: Envoy's CPU time (utime + stime of the process) per message
// published at full speed by the tools users run — `nats bench pub` (natscli) and Kafka's
// kafka-producer-perf-test (acks=1) — through the filter (for NATS also over TLS), through
// Envoy's tcp_proxy alone and straight to the broker, the targets alternated round after round
// in one run. On a shared
// 2-vCPU VM latency tails are noise; CPU per message holds from run to run.

// cpuTargets: Envoy's CPU per message over the filter's is the figure the targets are about.
const (
	cpuOverTCPProxyMaxMicros = 0.3
	throughputShare128       = 0.5
	throughputShare1K        = 0.8
)

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
	Workload string   `json:"workload"`
	Target   string   `json:"target"`
	Runs     []cpuRun `json:"runs"`
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

// cpuWorkload is what is sent, and how to send it to a target.
type cpuWorkload struct {
	name     string
	messages int
	targets  []string
	send     func(ctx context.Context, target string, messages int) (rate float64, err error)
}

func (s *suite) cpuWorkloads() []cpuWorkload {
	scale := 1 // quick: a tenth of the messages
	if s.timing == quickTiming {
		scale = 10
	}
	nats := func(size, messages int) cpuWorkload {
		return cpuWorkload{
			name:     fmt.Sprintf("nats pub %s", sizeName(size)),
			messages: messages / scale,
			targets:  []string{"gateway", "tcp-proxy", "direct", "gateway-tls"},
			send: func(ctx context.Context, target string, messages int) (float64, error) {
				addr := map[string]string{"gateway": s.stack.addr("NATS_PORT"), "tcp-proxy": s.stack.addr("NATS_PLAIN_PORT"),
					"direct": s.stack.addr("NATS_UPSTREAM_PORT"), "gateway-tls": s.stack.addr("NATS_TLS_PORT")}[target]
				as := acme
				if target == "direct" || target == "tcp-proxy" {
					as = baseline // nats-server admits a tenant's user only through the gateway
				}
				return s.natsBench(ctx, addr, as, size, messages, target == "gateway-tls")
			},
		}
	}
	kafka := cpuWorkload{
		name:     "kafka produce 128 B acks=1",
		messages: 1_000_000 / scale,
		targets:  []string{"gateway", "direct"},
		send: func(ctx context.Context, target string, messages int) (float64, error) {
			if target == "direct" {
				return s.producerPerf(ctx, s.stack.addr("KAFKA_DIRECT_PORT"), 128, messages, baselineSASL()...)
			}
			return s.producerPerf(ctx, s.stack.addr("KAFKA_PORT"), 128, messages)
		},
	}
	return []cpuWorkload{nats(128, 2_000_000), nats(1024, 1_000_000), kafka}
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
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
			costs[t] = &cpuCost{Workload: w.name, Target: t}
		}
		// One unmeasured run per target first: connections, JIT and buffers warmed.
		for _, t := range w.targets {
			if _, err := w.send(s.ctx, t, w.messages/10); err != nil {
				return fmt.Errorf("%s warm-up via %s: %w", w.name, t, err)
			}
		}
		for round := 1; round <= s.cpuRounds(); round++ {
			for _, t := range w.targets {
				before, err := processCPU(pid)
				if err != nil {
					return err
				}
				rate, err := w.send(s.ctx, t, w.messages)
				if err != nil {
					return fmt.Errorf("%s via %s: %w", w.name, t, err)
				}
				after, err := processCPU(pid)
				if err != nil {
					return err
				}
				run := cpuRun{Round: round, Messages: w.messages, Rate: rate, EnvoyCPU: after - before}
				costs[t].Runs = append(costs[t].Runs, run)
				fmt.Fprintf(os.Stderr, "  %s round %d via %s: %.0f msgs/s, Envoy %.3f µs/msg\n", w.name, round, t, rate, run.micros())
			}
		}
		for _, t := range w.targets {
			s.CPU = append(s.CPU, *costs[t])
		}
	}
	return nil
}

// processCPU is a process's utime + stime, in seconds.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable times", pid)
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (utime + stime) / clockTicks, nil
}

var natsBenchRate = regexp.MustCompile(`stats: ([\d,]+) msgs/sec`)

// natsBench publishes as a tenant (acme: limits enforced, never reached; baseline on nats-server
// itself) with natscli's `nats bench pub`, over TLS (handshake first, trusting the stack's CA)
// when asked.
func (s *suite) natsBench(ctx context.Context, addr string, as tenant, size, messages int, overTLS bool) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	server := []string{"--server", "nats://" + addr}
	if overTLS {
		server = []string{"--server", "tls://" + addr, "--tlsfirst", "--tlsca", s.stack.caFile()}
	}
	args := append([]string{"bench", "pub", "weighstation.cpu", "--msgs", strconv.Itoa(messages), "--size", strconv.Itoa(size),
		"--no-progress", "--user", as.natsUser, "--password", as.natsPassword}, server...)
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, ".tools", "bin", "nats"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("nats bench: %w: %s", err, lastLines(out, 5))
	}
	m := natsBenchRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("nats bench printed no rate: %s", lastLines(out, 5))
	}
	return strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
}

var producerPerfRate = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec`)

// producerPerf produces as acme with Kafka's own kafka-producer-perf-test (the Java client, its
// defaults but acks=1), into a topic of its own.
// baselineSASL are the producer properties of the baseline user, the one the broker's DIRECT
// listener admits.
func baselineSASL() []string {
	return []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
		fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, baseline.natsUser, baseline.natsPassword)}
}

func (s *suite) producerPerf(ctx context.Context, addr string, size, messages int, props ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	libs := filepath.Join(s.root, ".tools", "kafka", "libs", "*")
	// A properties file: --producer-props cannot carry a value with '=' in it (a JAAS line).
	conf, err := os.CreateTemp("", "weighstation-producer-*.properties")
	if err != nil {
		return 0, err
	}
	defer os.Remove(conf.Name())
	lines := append([]string{"bootstrap.servers=" + addr, "acks=1", "client.id=" + acme.kafkaClientID}, props...)
	if _, err := conf.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		return 0, err
	}
	if err := conf.Close(); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx512m", "-cp", libs, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", "weighstation-cpu", "--num-records", strconv.Itoa(messages), "--record-size", strconv.Itoa(size),
		"--throughput", "-1", "--producer.config", conf.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("kafka-producer-perf-test: %w: %s", err, lastLines(out, 5))
	}
	m := producerPerfRate.FindAllSubmatch(out, -1)
	if m == nil {
		return 0, fmt.Errorf("kafka-producer-perf-test printed no rate: %s", lastLines(out, 5))
	}
	last := m[len(m)-1]
	if sent, _ := strconv.Atoi(string(last[1])); sent != messages {
		return 0, fmt.Errorf("kafka-producer-perf-test sent %d of %d records", sent, messages)
	}
	return strconv.ParseFloat(string(last[2]), 64)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// cpuVerdict compares the gateway with its baseline in one workload, round by round.
type cpuVerdict struct {
	Workload, Target, Baseline string
	// OverMicros is the target's Envoy CPU per message less the baseline's; Share the
	// target's throughput over the baseline's.
	OverMicros, Share spread
	// Target is the goal for the workload, if it has one: at most MaxOverMicros and at
	// least MinShare.
	MaxOverMicros, MinShare float64
}

func (v cpuVerdict) met() bool {
	return v.MaxOverMicros == 0 || (v.OverMicros.Median <= v.MaxOverMicros && v.Share.Median >= v.MinShare)
}

// cpuVerdicts: NATS against tcp_proxy (the targets), Kafka against the broker direct (no
// target: there Envoy does no work at all without the gateway).
func cpuVerdicts(costs []cpuCost) []cpuVerdict {
	byTarget := map[[2]string]cpuCost{}
	for _, c := range costs {
		byTarget[[2]string{c.Workload, c.Target}] = c
	}
	// What each target is compared with, in order of preference: the filter against Envoy
	// without it (or the broker itself), TLS against the same gateway in plaintext.
	baselines := map[string][]string{"gateway": {"tcp-proxy", "direct"}, "gateway-tls": {"gateway"}}
	var out []cpuVerdict
	for _, c := range costs {
		var b cpuCost
		baseline, ok := "", false
		for _, name := range baselines[c.Target] {
			if b, ok = byTarget[[2]string{c.Workload, name}]; ok {
				baseline = name
				break
			}
		}
		if !ok {
			continue
		}
		var over, share []float64
		for i := range min(len(c.Runs), len(b.Runs)) {
			over = append(over, c.Runs[i].micros()-b.Runs[i].micros())
			share = append(share, c.Runs[i].Rate/b.Runs[i].Rate)
		}
		v := cpuVerdict{Workload: c.Workload, Target: c.Target, Baseline: baseline, OverMicros: spreadOf(over), Share: spreadOf(share)}
		if c.Target == "gateway" && baseline == "tcp-proxy" {
			v.MaxOverMicros, v.MinShare = cpuOverTCPProxyMaxMicros, throughputShare128
			if strings.Contains(c.Workload, "KiB") {
				v.MinShare = throughputShare1K
			}
		}
		out = append(out, v)
	}
	return out
}
