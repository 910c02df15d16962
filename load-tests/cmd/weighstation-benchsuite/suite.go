package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/bench"
	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/localstack"
	"github.com/weighstation/weighstation/load-tests/internal/report"
	"github.com/weighstation/weighstation/load-tests/internal/scenario"
	"github.com/weighstation/weighstation/load-tests/internal/schedule"
)

// timing is how long each kind of measurement runs; the whole suite stays within 15 minutes.
type timing struct {
	warmup, phase            time.Duration // comparisons: each target holds the load for
	phasesPerTarget          int           // phasesPerTarget phases of phase, in turn
	probeWarmup, probeLength time.Duration // each saturation probe step
	limitWarmup, limitLength time.Duration // overload and noisy neighbour
	drain                    time.Duration
}

var fullTiming = timing{
	warmup: 3 * time.Second, phase: 2500 * time.Millisecond, phasesPerTarget: 3,
	probeWarmup: time.Second, probeLength: 3 * time.Second,
	limitWarmup: 2 * time.Second, limitLength: 10 * time.Second,
	drain: 5 * time.Second,
}

// quickTiming checks the suite end to end in about two minutes; its figures are not evidence.
var quickTiming = timing{
	warmup: time.Second, phase: time.Second, phasesPerTarget: 2,
	probeWarmup: 500 * time.Millisecond, probeLength: 1500 * time.Millisecond,
	limitWarmup: time.Second, limitLength: 3 * time.Second,
	drain: 3 * time.Second,
}

// tenantLimit is the rate limit of globex and of the default tenant in the benchmark's policies;
// clientLimit each client's of tenant billing.
const (
	tenantLimit = 1000.0
	clientLimit = 1000.0
)

// tenant is who a measurement sends as.
type tenant struct {
	name, mode             string // policy name and onLimit
	natsUser, natsPassword string
	kafkaClientID          string
	// natsName is the NATS connections' name: with kafkaClientID, the client within its
	// tenant (spec.clients); "" the scenario's default.
	natsName string
}

var (
	acme      = tenant{"acme", "unlimited", "acme", "acme-secret", "acme-bench", ""}
	globex    = tenant{"globex", "delay", "globex", "globex-secret", "globex-bench", ""}
	anonymous = tenant{"anonymous", "reject", "anon", "", "bench-anonymous", ""}
	// billingA and billingB are two clients of tenant billing, each limited to
	// clientLimit within the tenant's 3 × clientLimit (policies/billing.yaml).
	billingA = tenant{"billing", "delay", "billing", "billing-secret", "billing-a-bench", "billing-a"}
	billingB = tenant{"billing", "delay", "billing", "billing-secret", "billing-b-bench", "billing-b"}
	// reader is acme without a consume limit: its Fetch responses pass unread, its NATS
	// deliveries uncharged.
	reader = tenant{"reader", "unlimited", "reader", "reader-secret", "reader-bench", ""}
	// baseline is who the direct measurements connect to the brokers as: an identity that
	// belongs to no tenant (the brokers admit tenants only through the gateway).
	baseline = tenant{"", "", "baseline", "baseline-secret", "baseline-bench", ""}
)

type suite struct {
	ctx    context.Context
	root   string
	stack  *localstack.Stack
	out    string // docs/benchmarks
	timing timing
	watch  map[string]int
	only   map[string]bool // scenarios to measure; empty: all
	// fetchFilled: fetchTopic holds its backlog (kafkafetch.go).
	fetchFilled bool

	Probes      []probe
	Comparisons []comparison
	Overloads   []overload
	Neighbours  []neighbour
	CPU         []cpuCost
	Failures    []failure

	broken   bool // the last step failed: the stack may be unusable
	restarts int
}

// failure is a measurement that could not be made, and why.
type failure struct {
	What  string `json:"what"`
	Error string `json:"error"`
}

// maxRestarts bounds how often a failed measurement may cost a fresh stack.
const maxRestarts = 3

// try runs one step of the suite. A step that fails is recorded — the evidence says what could
// not be measured — and, since a failure may have left the stack broken, the next step starts
// on a fresh one.
func (s *suite) try(what string, step func() error) error {
	if s.broken {
		if s.restarts >= maxRestarts {
			return fmt.Errorf("not restarting the stack a %dth time", maxRestarts+1)
		}
		s.restarts++
		fmt.Fprintln(os.Stderr, "  restarting the local stack…")
		s.stack.Stop()
		st, err := startStack(s.root)
		if err != nil {
			return fmt.Errorf("restarting the stack: %w", err)
		}
		s.stack, s.watch, s.broken = st, st.Processes(), false
	}
	err := step()
	if err == nil || s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	fmt.Fprintf(os.Stderr, "  FAILED %s: %v\n", what, err)
	s.Failures = append(s.Failures, failure{what, err.Error()})
	s.broken = true
	return nil
}

type probe struct {
	Scenario   string      `json:"scenario"`
	Steps      []probeStep `json:"steps"`
	Saturation float64     `json:"saturation"`
	// AtCeiling: even the probe's highest rate held; the saturation is beyond it.
	AtCeiling bool `json:"atCeiling,omitempty"`
}

type probeStep struct {
	Rate    float64        `json:"rate"`
	OK      bool           `json:"ok"`
	Why     string         `json:"why,omitempty"`
	Summary report.Summary `json:"summary"`
}

type comparison struct {
	Scenario string         `json:"scenario"`
	Level    string         `json:"level"`
	Dir      string         `json:"dir"`
	Summary  report.Summary `json:"summary"`
}

type overload struct {
	Protocol string         `json:"protocol"`
	Tenant   string         `json:"tenant"`
	Mode     string         `json:"mode"`
	Limit    float64        `json:"limit"`
	Offered  float64        `json:"offered"`
	Dir      string         `json:"dir"`
	Summary  report.Summary `json:"summary"`
}

type neighbour struct {
	Scenario string `json:"scenario"`
	// Victim and Noisy: the tenants (between tenants) or the clients of one tenant (within).
	Victim    string         `json:"victim"`
	Noisy     string         `json:"noisy"`
	Within    bool           `json:"withinTenant"`
	Rate      float64        `json:"rate"`
	Alone     report.Summary `json:"alone"`
	WithNoisy report.Summary `json:"withNeighbour"`
	Neighbour report.Summary `json:"neighbour"`
	DirAlone  string         `json:"dirAlone"`
	DirNoisy  string         `json:"dirWithNeighbour"`
}

func (s *suite) gateway() scenario.Endpoint {
	return scenario.Endpoint{Name: "gateway", NATS: s.stack.Addr("NATS_PORT"), Kafka: s.stack.Addr("KAFKA_PORT")}
}

// direct is the brokers themselves; Kafka through its listener that advertises itself.
func (s *suite) direct() scenario.Endpoint {
	return scenario.Endpoint{Name: "direct", NATS: s.stack.Addr("NATS_UPSTREAM_PORT"), Kafka: s.stack.Addr("KAFKA_DIRECT_PORT"), PinKafka: true, AsBaseline: true}
}

// tcpProxy is Envoy's NATS listener without the filter: what the filter itself costs is the
// gateway's difference from it.
func (s *suite) tcpProxy() scenario.Endpoint {
	return scenario.Endpoint{Name: "tcp-proxy", NATS: s.stack.Addr("NATS_PLAIN_PORT"), AsBaseline: true}
}

func config(t tenant, runID, topic string) scenario.Config {
	return scenario.Config{
		Connections: 4, Size: 128, Timeout: 10 * time.Second, RunID: runID,
		NATSUser: t.natsUser, NATSPassword: t.natsPassword, NATSName: t.natsName,
		DirectNATSUser: baseline.natsUser, DirectNATSPassword: baseline.natsPassword,
		DirectKafkaUser: baseline.natsUser, DirectKafkaPassword: baseline.natsPassword,
		KafkaClientID: t.kafkaClientID, KafkaTopic: topic,
	}
}

func (s *suite) plan(rate float64, warmup, duration time.Duration) engine.Plan {
	return engine.Plan{
		Rate: rate, Arrivals: schedule.Fixed, Warmup: warmup, Duration: duration, Phase: s.timing.phase,
		Connections: 4, MaxInFlight: 300_000, Drain: s.timing.drain,
	}
}

// measure runs one measurement and, if dir is not empty, writes its report under runs/dir.
func (s *suite) measure(label, dir string, o bench.Options) (report.Summary, error) {
	o.Watch = s.watch
	o.Progress = func(p engine.Progress) {
		if int(p.Elapsed.Seconds())%5 == 0 {
			fmt.Fprintf(os.Stderr, "    %s: %.0fs/%.0fs, %.0f/s, p99 %.3f ms\n", label, p.Elapsed.Seconds(), p.Total.Seconds(), p.Rate, float64(p.P99)/1e6)
		}
	}
	sum, err := bench.Measure(s.ctx, o)
	if err != nil {
		return sum, fmt.Errorf("%s: %w", label, err)
	}
	if dir != "" {
		if err := report.Write(filepath.Join(s.out, "runs", dir), sum); err != nil {
			return sum, err
		}
	}
	fmt.Fprintf(os.Stderr, "  %s: %s\n", label, oneLine(sum))
	return sum, nil
}

func oneLine(sum report.Summary) string {
	line := ""
	for _, t := range sum.Targets {
		p := t.LatencyMicros
		line += fmt.Sprintf("%s p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms, %.0f/s; ", t.Name, ms(p.P50), ms(p.P99), ms(p.P999), ms(p.Max), t.AchievedRate)
	}
	if !sum.Valid {
		line += "INVALID"
	}
	return line
}

func ms(us int64) float64 { return float64(us) / 1000 }

// probeSaturation raises the rate through the gateway (doubling, then one step between the last
// good and the first bad rate) until it no longer keeps up: it delivers under 97% of the rate,
// p99 passes 50 ms, or anything fails. A step whose harness was late beyond its 1 ms slack is
// flagged invalid in the table but does not stop the probe, unless the harness was so late
// (10 ms at p99) that it, not the gateway, was the limit: on a VM that wakes threads late the
// slack is exceeded at any rate, and the probe is here to find the gateway's limit.
func (s *suite) probeSaturation(scen string, start float64) (probe, error) {
	p := probe{Scenario: scen}
	try := func(rate float64) (bool, error) {
		o := bench.Options{
			Scenario: scen, Plan: s.plan(rate, s.timing.probeWarmup, s.timing.probeLength),
			Config:    config(acme, fmt.Sprintf("probe%d", len(p.Steps)), "weighstation-bench-probe"),
			Endpoints: []scenario.Endpoint{s.gateway()},
		}
		sum, err := s.measure(fmt.Sprintf("probe %s %.0f/s", scen, rate), "", o)
		if err != nil {
			return false, err
		}
		step := probeStep{Rate: rate, Summary: sum, OK: true}
		t := sum.Targets[0]
		switch {
		case sum.Generator.LagMicros.P99 > 10_000:
			step.OK, step.Why = false, harnessBehind
		case t.Errors+t.Timeouts+t.Refused > 0:
			step.OK, step.Why = false, fmt.Sprintf("%d failed, %d timed out, %d refused", t.Errors, t.Timeouts, t.Refused)
		case t.AchievedRate < 0.97*rate:
			step.OK, step.Why = false, fmt.Sprintf("delivered %.0f/s", t.AchievedRate)
		case t.LatencyMicros.P99 > 50_000:
			step.OK, step.Why = false, fmt.Sprintf("p99 %.1f ms", ms(t.LatencyMicros.P99))
		}
		p.Steps = append(p.Steps, step)
		return step.OK, nil
	}
	good, bad := 0.0, 0.0
	for rate := start; rate <= 64*start; rate *= 2 {
		ok, err := try(rate)
		if err != nil {
			return p, err
		}
		if !ok {
			bad = rate
			break
		}
		good = rate
	}
	if good > 0 && bad > 0 {
		mid := (good + bad) / 2
		ok, err := try(mid)
		if err != nil {
			return p, err
		}
		if ok {
			good = mid
		}
	}
	p.Saturation = good
	p.AtCeiling = bad == 0 && good > 0
	if good == 0 {
		p.Saturation = start / 2 // not even the first step held: the levels below are guesses
	}
	return p, nil
}

const harnessBehind = "harness over 10 ms behind schedule"

// warmUp sends scen through the gateway for a while and discards the figures.
func (s *suite) warmUp(scen string) error {
	o := bench.Options{
		Scenario: scen, Plan: s.plan(1000, s.timing.probeLength, s.timing.probeLength),
		Config:    config(acme, "warmup", "weighstation-bench-probe"),
		Endpoints: []scenario.Endpoint{s.gateway()},
	}
	_, err := s.measure("warm-up "+scen, "", o)
	return err
}

// levels are the three fixed rates of the comparisons, as shares of the probed saturation.
var levels = []struct {
	name  string
	share float64
}{{"light", 0.1}, {"medium", 0.4}, {"near saturation", 0.8}}

// roundRate keeps two significant digits, at least 100/s.
func roundRate(r float64) float64 {
	if r < 100 {
		return 100
	}
	mag := math.Pow(10, math.Floor(math.Log10(r))-1)
	return math.Round(r/mag) * mag
}

// compare alternates the load between the broker itself, (for NATS) Envoy without the filter,
// and the gateway, each holding it for phasesPerTarget phases.
func (s *suite) compare(scen, level string, rate float64) error {
	dir := fmt.Sprintf("%s-%s-%.0f", scen, slug(level), rate)
	endpoints := []scenario.Endpoint{s.direct(), s.tcpProxy(), s.gateway()}
	if scenario.IsKafka(scen) {
		endpoints = []scenario.Endpoint{s.direct(), s.gateway()}
	}
	duration := s.timing.phase * time.Duration(len(endpoints)*s.timing.phasesPerTarget)
	o := bench.Options{
		Scenario: scen, Plan: s.plan(rate, s.timing.warmup, duration),
		Config:    config(acme, slug(dir), "weighstation-bench"),
		Endpoints: endpoints,
	}
	sum, err := s.measure(fmt.Sprintf("%s %s %.0f/s, %d targets alternating", scen, level, rate, len(endpoints)), dir, o)
	if err != nil {
		return err
	}
	s.Comparisons = append(s.Comparisons, comparison{Scenario: scen, Level: level, Dir: "runs/" + dir, Summary: sum})
	return nil
}

// overload offers a limited tenant a multiple of its limit through the gateway.
func (s *suite) overload(scen string, t tenant, factor float64) error {
	rate := factor * tenantLimit
	dir := fmt.Sprintf("overload-%s-%s-%.0fx", scen, t.name, factor)
	s.settle(t.name)
	o := bench.Options{
		Scenario: scen, Plan: s.plan(rate, s.timing.limitWarmup, s.timing.limitLength),
		Config:    config(t, slug(dir), "weighstation-bench-"+t.name),
		Endpoints: []scenario.Endpoint{s.gateway()},
	}
	// What counts is what the gateway let through to the broker, so the subscriber is there.
	o.Config.SubscribeVia = s.direct().NATS
	o.Plan.Drain = 2 * s.timing.drain
	sum, err := s.measure(fmt.Sprintf("%s %s (%s) at %.0f× its limit", scen, t.name, t.mode, factor), dir, o)
	if err != nil {
		return err
	}
	s.Overloads = append(s.Overloads, overload{Protocol: scen, Tenant: t.name, Mode: t.mode, Limit: tenantLimit, Offered: rate, Dir: "runs/" + dir, Summary: sum})
	return nil
}

// noisyNeighbour measures acme at rate alone, then again while globex offers 10× its limit.
func (s *suite) noisyNeighbour(scen string, rate float64) error {
	return s.neighbours(neighbour{Scenario: scen, Rate: rate, Victim: acme.name, Noisy: globex.name}, acme, globex, 10*tenantLimit)
}

// clientNeighbour measures client billing-b of tenant billing at half its client limit alone,
// then again while billing-a, a client of the same tenant, offers 10× its own.
func (s *suite) clientNeighbour(scen string) error {
	n := neighbour{Scenario: scen, Rate: clientLimit / 2, Victim: billingB.natsName, Noisy: billingA.natsName, Within: true}
	return s.neighbours(n, billingB, billingA, 10*clientLimit)
}

// neighbours measures victim at n.Rate alone, then again while noisy offers noisyRate.
func (s *suite) neighbours(n neighbour, victimTenant, noisyTenant tenant, noisyRate float64) error {
	scen, rate := n.Scenario, n.Rate
	s.settle(victimTenant.name)
	s.settle(noisyTenant.name)
	victim := func(dir string) bench.Options {
		return bench.Options{
			Scenario: scen, Plan: s.plan(rate, s.timing.limitWarmup, s.timing.limitLength),
			Config:    config(victimTenant, slug(dir), "weighstation-bench-"+slug(n.Victim)),
			Endpoints: []scenario.Endpoint{s.gateway()},
		}
	}
	kind := "neighbour-"
	if n.Within {
		kind = "client-neighbour-"
	}
	n.DirAlone = "runs/" + kind + scen + "-alone"
	var err error
	if n.Alone, err = s.measure(scen+" "+n.Victim+" alone", n.DirAlone[len("runs/"):], victim(n.DirAlone[len("runs/"):])); err != nil {
		return err
	}
	// The neighbour starts first and outlasts the victim's whole run.
	lead := time.Second
	noisyPlan := s.plan(noisyRate, s.timing.limitWarmup, s.timing.limitLength+2*lead)
	noisyPlan.Warmup = 0
	noisyOpts := bench.Options{
		Scenario: scen, Plan: noisyPlan,
		Config:    config(noisyTenant, kind+slug(scen), "weighstation-bench-"+slug(n.Noisy)),
		Endpoints: []scenario.Endpoint{s.gateway()}, Watch: s.watch,
	}
	noisyOpts.Config.SubscribeVia = s.direct().NATS
	var wg sync.WaitGroup
	var noisyErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.Neighbour, noisyErr = bench.Measure(s.ctx, noisyOpts)
	}()
	time.Sleep(lead)
	n.DirNoisy = "runs/" + kind + scen + "-with-" + slug(n.Noisy) + "-10x"
	n.WithNoisy, err = s.measure(scen+" "+n.Victim+" next to "+n.Noisy+" at 10×", n.DirNoisy[len("runs/"):], victim(n.DirNoisy[len("runs/"):]))
	wg.Wait()
	if err != nil {
		return err
	}
	if noisyErr != nil {
		return fmt.Errorf("the noisy neighbour: %w", noisyErr)
	}
	s.Neighbours = append(s.Neighbours, n)
	return nil
}

// slug makes a name safe as a directory and as a NATS subject token.
func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}
