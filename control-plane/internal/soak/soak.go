package soak

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// Config says what to soak and where to write the report.
type Config struct {
	Root     string        // the repository: .tools/, the built filter, policies/
	Duration time.Duration // how long the load runs
	Out      string        // report.md, resources.svg, and the stack's work directory
	Log      io.Writer     // progress
}

// warmUp is how long after Envoy's restart its resources are not yet judged: the first minute
// of a lifetime fills caches, V8 heaps and connection pools.
const warmUp = time.Minute

// judgedDrift is the shortest run whose resource drift is judged: a shorter one has too few
// samples after warm-up to call anything flat.
const judgedDrift = 5 * time.Minute

// bufferLimitKiB is the local stack's per_connection_buffer_limit_bytes (weighstation serve's
// --buffer-limit-bytes default).
const bufferLimitKiB = 32

// Result is a soak's account.
type Result struct {
	Start     time.Time // when the load started
	Duration  time.Duration
	Rows      []Row
	Total     Row
	Refusals  []RefusalCheck
	Events    []Event
	Flips     int
	Restarts  map[string]int64
	Samples   []Sample
	Drifts    []Drift
	Probes    []LengthProbe
	Hostile   HostileSummary
	EndGauges map[string]float64
	ReadBack  map[string]int
	// ClientErrors are the errors each flow's client saw, by tenant/kind.
	ClientErrors map[string]map[string]int
	Failures     []string
	ReportPath   string
	PlotPath     string
}

// RefusalCheck compares the refusals the clients saw with the gateway's count of them.
type RefusalCheck struct {
	Tenant, Protocol    string
	ClientSeen, Counted float64
	WouldRefuse         float64
}

// HostileSummary is what the hostile clients did and met.
type HostileSummary struct {
	SlowlorisOpened, SlowlorisPeak, SlowlorisClosedByGateway int
	BigNATS, BigNATSClosed, BigKafka, BigKafkaClosed         int
	BigNATSBytesMax, BigKafkaBytesMax                        int64
	BigNATSReplies                                           map[string]int
	Garbage, GarbageClosed                                   int
	Floods, FloodAdmitted, FloodRefused, FloodAdmittedMax    int
	// Unavailable are attempts that could not connect or handshake (a component was down).
	Unavailable    int
	UnavailableWhy []string
}

// Run starts a supervised local stack of its own, runs the soak and writes its report. The
// error is for a soak that could not run; a soak that ran and found a fault returns its
// Failures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "soak: "+format+"\n", args...) }
	work := filepath.Join(cfg.Out, "stack")
	_ = os.RemoveAll(work)
	policyDir := filepath.Join(work, "policies")
	if err := localstack.CopyPolicies(filepath.Join(cfg.Root, "policies"), policyDir); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(policyDir, "soak.yaml"), PolicyYAML(StepBase)); err != nil {
		return nil, err
	}
	ports, err := localstack.FreePorts()
	if err != nil {
		return nil, err
	}
	logf("starting the stack (nats-server, kafka, control plane, envoy) in %s", work)
	stack, err := localstack.Start(ctx, localstack.Config{
		ToolsDir:         filepath.Join(cfg.Root, ".tools"),
		WasmFile:         filepath.Join(cfg.Root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"),
		PolicyDir:        policyDir,
		WorkDir:          work,
		Ports:            ports,
		EnvoyConcurrency: 2,
		WithKafka:        true,
		ExtraNATSUsers:   Tenants,
		Supervise:        true,
	})
	if err != nil {
		return nil, err
	}
	defer stack.Stop()

	present := newPresence()
	side, err := startNATSSide(fmt.Sprintf("nats://127.0.0.1:%d", ports.NATSUpstream), present)
	if err != nil {
		return nil, err
	}
	defer side.close()
	var natsClients []*natsClient
	var producers []*kafkaProducer
	for _, tenant := range LoadTenants {
		c, err := startNATSClient(fmt.Sprintf("nats://127.0.0.1:%d", ports.NATS), tenant)
		if err != nil {
			return nil, fmt.Errorf("%s through the gateway: %w", tenant, err)
		}
		defer c.conn.Close()
		natsClients = append(natsClients, c)
		for _, kind := range []string{KindAcks1, KindAcksAll} {
			p, err := startKafkaProducer(fmt.Sprintf("127.0.0.1:%d", ports.Kafka), tenant, kind)
			if err != nil {
				return nil, err
			}
			warmCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = p.warm(warmCtx)
			cancel()
			if err != nil {
				p.client.Close()
				return nil, fmt.Errorf("creating topic %s: %w", topic(tenant, kind), err)
			}
			producers = append(producers, p)
		}
	}
	scraper := NewScraper(ports.Admin)
	if err := scraper.Scrape(); err != nil {
		return nil, err
	}
	baseline := map[Series]float64{}
	for _, tenant := range LoadTenants {
		for _, proto := range []string{"nats", "kafka"} {
			for _, name := range []string{"weighstation_messages_refused", "weighstation_dryrun_would_refuse"} {
				baseline[Series{name, proto, tenant}] = scraper.Total(name, proto, tenant)
			}
		}
	}

	logf("load for %s: %d tenants × (NATS pub %.0f/s, request %.0f/s, JetStream %.0f/s; Kafka acks=1 %.0f/s, acks=all %.0f/s), faults %d, policy flip every %s",
		cfg.Duration, len(LoadTenants), NATSRates[KindPub], NATSRates[KindRequest], NATSRates[KindJS], KafkaRates[KindAcks1], KafkaRates[KindAcksAll], len(Schedule), FlipEvery)
	start := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	stopAux := make(chan struct{})
	var aux sync.WaitGroup
	flt := &faults{stack: stack, ports: ports, policyDir: policyDir, scraper: scraper, start: start}
	smp := &sampler{start: start, scraper: scraper,
		envoyPID: func() int { return stack.Envoy.PID() }, cpPID: func() int { return stack.ControlPlane.PID() }}
	host := &hostile{natsAddr: fmt.Sprintf("127.0.0.1:%d", ports.NATS), kafkaAddr: fmt.Sprintf("127.0.0.1:%d", ports.Kafka)}
	var probes []LengthProbe
	aux.Add(5)
	go func() { defer aux.Done(); scraper.Run(time.Second, stopAux) }()
	go func() { defer aux.Done(); smp.sample(); smp.run(stopAux) }()
	go func() { defer aux.Done(); flt.run(cfg.Duration, stopAux) }()
	go func() { defer aux.Done(); host.run(loadCtx) }()
	go func() {
		defer aux.Done()
		select {
		case <-loadCtx.Done():
		case <-time.After(cfg.Duration / 5):
			// After the Envoy restart (at 0.15 of the run), within the new Envoy's warm-up: the
			// probe tenant's first keys are not growth. Wait until it serves again.
			_ = waitFor(60*time.Second, func() bool { return stack.Envoy.Restarts() > 0 && tcpUp(ports.NATS) && tcpUp(ports.Kafka) })
			probes = probeLengths(host.natsAddr, host.kafkaAddr, func() int { return stack.Envoy.PID() }, bufferLimitKiB)
		}
	}()
	var outstanding, load sync.WaitGroup
	for _, c := range natsClients {
		load.Add(1)
		go func(c *natsClient) { defer load.Done(); c.run(loadCtx, &outstanding) }(c)
	}
	for _, p := range producers {
		load.Add(1)
		go func(p *kafkaProducer) { defer load.Done(); p.run(loadCtx) }(p)
	}
	load.Wait()
	logf("load done after %s; waiting for every outstanding message's outcome", time.Since(start).Round(time.Second))
	var finish sync.WaitGroup
	for _, p := range producers {
		finish.Add(1)
		go func(p *kafkaProducer) { defer finish.Done(); p.finish() }(p)
	}
	outstanding.Wait()
	finish.Wait()
	close(stopAux)
	aux.Wait()
	time.Sleep(2 * time.Second) // a refusal's -ERR may trail its request's timeout
	smp.sample()
	_ = scraper.Scrape()

	res := &Result{Start: start, Duration: cfg.Duration, ReadBack: map[string]int{}, ClientErrors: map[string]map[string]int{}}
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if n, err := side.readStream(readCtx); err != nil {
		res.Failures = append(res.Failures, "reading the JetStream stream back: "+err.Error())
	} else {
		res.ReadBack["JetStream stream "+streamName] = n
	}
	kafkaFlows := map[string][]string{}
	for _, t := range LoadTenants {
		kafkaFlows[t] = []string{KindAcks1, KindAcksAll}
	}
	if n, err := readTopics(readCtx, fmt.Sprintf("127.0.0.1:%d", ports.KafkaDirect), kafkaFlows, present); err != nil {
		res.Failures = append(res.Failures, "reading the Kafka topics back: "+err.Error())
	} else {
		res.ReadBack["Kafka topics (with the warm-up records)"] = n
	}

	windows, events, faultErrs, steps := flt.results()
	res.Events, res.Flips = events, len(steps)-1
	for _, e := range faultErrs {
		res.Failures = append(res.Failures, "fault schedule: "+e.Error())
	}
	onPath := func(protocol string) []Window {
		var out []Window
		for _, w := range windows {
			if kinds := faultKinds[w.What][protocol]; kinds != nil {
				w.Kinds = kinds
				out = append(out, w)
			}
		}
		return out
	}
	for _, c := range natsClients {
		for _, r := range []*recorder{c.pub, c.req, c.jsPub} {
			msgs := r.snapshot()
			res.ClientErrors[r.tenant+" "+r.kind] = r.errors()
			res.Rows = append(res.Rows, Account(Flow{Tenant: r.tenant, Kind: r.kind, Messages: msgs,
				Present: present.of(r.tenant, r.kind, len(msgs)), Faults: onPath("nats"), Unacknowledged: unacknowledged}))
		}
	}
	for _, p := range producers {
		msgs := p.rec.snapshot()
		res.ClientErrors[p.tenant+" "+p.kind] = p.rec.errors()
		res.Rows = append(res.Rows, Account(Flow{Tenant: p.tenant, Kind: p.kind, Messages: msgs,
			Present: present.of(p.tenant, p.kind, len(msgs)), Faults: onPath("kafka")}))
	}
	res.Total = Total(res.Rows)
	res.checkLedger()
	res.checkDelayRefusals(natsClients, producers, steps, start.Add(cfg.Duration), onPath)

	// What the gateway counted during the soak (the warm-up before it is not the soak's).
	counted := func(name, protocol, tenant string) float64 {
		return scraper.Total(name, protocol, tenant) - baseline[Series{name, protocol, tenant}]
	}
	for _, c := range natsClients {
		res.Refusals = append(res.Refusals, RefusalCheck{Tenant: c.tenant, Protocol: "nats", ClientSeen: float64(c.seenRefusals()),
			Counted:     counted("weighstation_messages_refused", "nats", c.tenant),
			WouldRefuse: counted("weighstation_dryrun_would_refuse", "nats", c.tenant)})
	}
	for _, tenant := range LoadTenants {
		seen := 0
		for _, r := range res.Rows {
			if r.Tenant == tenant && strings.HasPrefix(r.Kind, "kafka-") {
				seen += r.Refused
			}
		}
		res.Refusals = append(res.Refusals, RefusalCheck{Tenant: tenant, Protocol: "kafka", ClientSeen: float64(seen),
			Counted:     counted("weighstation_messages_refused", "kafka", tenant),
			WouldRefuse: counted("weighstation_dryrun_would_refuse", "kafka", tenant)})
	}
	res.checkRefusals()

	res.Restarts = map[string]int64{"envoy": stack.Envoy.Restarts(), "control plane": stack.ControlPlane.Restarts(),
		"nats-server": stack.NATSServer.Restarts(), "kafka": stack.Kafka.Restarts()}
	want := map[string]int64{}
	for _, f := range Schedule {
		want[map[string]string{faultEnvoy: "envoy", faultCP: "control plane", faultNATS: "nats-server", faultKafka: "kafka"}[f.Name]]++
	}
	for name, n := range res.Restarts {
		if n != want[name] {
			res.Failures = append(res.Failures, fmt.Sprintf("%s was started again %d times; the schedule restarted it %d times", name, n, want[name]))
		}
	}
	if b, err := os.ReadFile(filepath.Join(stack.LogDir(), "envoy.log")); err == nil {
		for _, needle := range []string{"panicked", "wasm trap", "Function: proxy_on_"} {
			if strings.Contains(string(b), needle) {
				res.Failures = append(res.Failures, fmt.Sprintf("Envoy's log has %q: the filter failed (%s)", needle, filepath.Join(stack.LogDir(), "envoy.log")))
			}
		}
	}

	host.mu.Lock()
	res.Hostile = HostileSummary{SlowlorisOpened: host.slowlorisOpen, SlowlorisPeak: host.slowlorisPeak, SlowlorisClosedByGateway: host.slowlorisClosedByGateway,
		BigNATS: host.bigNATS, BigNATSClosed: host.bigNATSClosed, BigKafka: host.bigKafka, BigKafkaClosed: host.bigKafkaClosed,
		BigNATSBytesMax: host.bigNATSBytesMax, BigKafkaBytesMax: host.bigKafkaBytesMax, BigNATSReplies: host.bigNATSReplies, Garbage: host.garbage, GarbageClosed: host.garbageClosed,
		Floods: host.floods, FloodAdmitted: host.floodAdmitted, FloodRefused: host.floodRefused, FloodAdmittedMax: host.floodAdmittedMax,
		Unavailable: host.unavailableCount, UnavailableWhy: host.unavailableWhy}
	host.mu.Unlock()
	if res.Hostile.FloodAdmittedMax > 5 {
		res.Failures = append(res.Failures, fmt.Sprintf("a CONNECT flood of %d had %d connections admitted at once; the hostile tenant's limit is 5", floodSize, res.Hostile.FloodAdmittedMax))
	}

	res.Probes = probes
	for _, p := range probes {
		if p.Opened == 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("the %s 2 GiB probe opened no connection", p.Protocol))
		} else if !p.WithinBufferLimit {
			res.Failures = append(res.Failures, fmt.Sprintf("a 2 GiB %s length cost Envoy %.0f KiB per connection over an idle one; the per-connection buffer is %d KiB", p.Protocol, p.ExtraPerConnKiB, bufferLimitKiB))
		}
	}

	res.Samples = smp.all()
	res.Drifts = Drifts(res.Samples, warmUp)
	res.checkResources(cfg.Duration)

	// Every client closed, nothing of the soak's tenants may stay counted.
	for _, c := range natsClients {
		c.conn.Close()
	}
	res.EndGauges = map[string]float64{}
	gauges := []string{"weighstation_connections_active", "weighstation_in_flight", "weighstation_queue_depth"}
	settled := waitFor(15*time.Second, func() bool {
		if scraper.Scrape() != nil {
			return false
		}
		clear(res.EndGauges)
		all := 0.0
		for _, tenant := range LoadTenants {
			for _, proto := range []string{"nats", "kafka"} {
				for _, g := range gauges {
					v := scraper.Total(g, proto, tenant)
					res.EndGauges[g+"{"+proto+","+tenant+"}"] = v
					all += math.Abs(v)
				}
			}
		}
		return all == 0
	})
	if settled != nil {
		for k, v := range res.EndGauges {
			if v != 0 {
				res.Failures = append(res.Failures, fmt.Sprintf("%s = %v with every client gone: leaked", k, v))
			}
		}
	}

	if err := res.write(cfg.Out); err != nil {
		return res, err
	}
	return res, nil
}

// checkDelayRefusals bounds the delay tenant's refusals by its policy steps (DelayRefusals).
func (r *Result) checkDelayRefusals(nats []*natsClient, kafka []*kafkaProducer, steps []StepAt, end time.Time, onPath func(string) []Window) {
	refusedSent := map[string][]time.Time{}
	collect := func(protocol string, rec *recorder) {
		for _, m := range rec.snapshot() {
			if m.Refused {
				refusedSent[protocol] = append(refusedSent[protocol], m.Sent)
			}
		}
	}
	for _, c := range nats {
		if c.tenant == TenantDelay {
			for _, rec := range []*recorder{c.pub, c.req, c.jsPub} {
				collect("nats", rec)
			}
		}
	}
	for _, p := range kafka {
		if p.tenant == TenantDelay {
			collect("kafka", p.rec)
		}
	}
	for _, protocol := range []string{"nats", "kafka"} {
		if why := DelayRefusals(protocol, refusedSent[protocol], steps, end, onPath(protocol)); why != "" {
			r.Failures = append(r.Failures, TenantDelay+" over "+why)
		}
	}
}

func (r *Result) checkLedger() {
	if r.Total.Unaccounted != 0 {
		for _, row := range r.Rows {
			if row.Unaccounted != 0 {
				span := row.UnaccountedSent
				r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %d of %d messages unaccounted (%d acknowledged but missing, %d refused but delivered, %d failed outside any fault), sent from %s to %s after the load started (%s to %s)",
					row.Tenant, row.Kind, row.Unaccounted, row.Sent, row.AckedMissing, row.RefusedDelivered, row.FailedNoFault,
					span.Start.Sub(r.Start).Round(100*time.Millisecond), span.End.Sub(r.Start).Round(100*time.Millisecond),
					span.Start.Format("15:04:05.000"), span.End.Format("15:04:05.000")))
			}
		}
	}
	for _, row := range r.Rows {
		if (row.Tenant == TenantDryRun || row.Tenant == TenantFree) && row.Refused != 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %d refused; the tenant is never over a limit it enforces", row.Tenant, row.Kind, row.Refused))
		}
		if row.Sent == 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s %s: nothing sent", row.Tenant, row.Kind))
		}
		if row.Duplicates != 0 && row.Kind != KindAcks1 {
			// Only a non-idempotent producer resends what was stored: JetStream deduplicates by
			// message id, the idempotent producer by sequence, and NATS never resends.
			r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %d duplicates where the protocol promises none", row.Tenant, row.Kind, row.Duplicates))
		}
	}
}

func (r *Result) checkRefusals() {
	for _, c := range r.Refusals {
		switch {
		case c.Tenant == TenantDryRun && c.WouldRefuse == 0:
			r.Failures = append(r.Failures, fmt.Sprintf("%s over %s: no would-refuse counted, though its load is 5× its rate", c.Tenant, c.Protocol))
		case (c.Tenant == TenantDryRun || c.Tenant == TenantFree) && c.Counted != 0:
			r.Failures = append(r.Failures, fmt.Sprintf("%s over %s: the gateway counted %.0f refusals", c.Tenant, c.Protocol, c.Counted))
		case c.Protocol == "nats" && math.Abs(c.Counted-c.ClientSeen) > math.Max(2, 0.01*c.Counted):
			// Each NATS refusal is one -ERR to its client: the two counts agree.
			r.Failures = append(r.Failures, fmt.Sprintf("%s over NATS: clients saw %.0f refusals, the gateway counted %.0f", c.Tenant, c.ClientSeen, c.Counted))
		case c.Protocol == "kafka" && c.Counted < c.ClientSeen:
			// A Kafka client retries refusals: the gateway counts each try, the client reports the last.
			r.Failures = append(r.Failures, fmt.Sprintf("%s over Kafka: clients saw %.0f records refused, the gateway counted only %.0f", c.Tenant, c.ClientSeen, c.Counted))
		}
	}
}

func (r *Result) checkResources(d time.Duration) {
	for _, s := range r.Samples {
		if s.Held > QueueBound {
			r.Failures = append(r.Failures, fmt.Sprintf("%.0f messages held at %s; the queues hold at most %d", s.Held, s.At, QueueBound))
		}
	}
	if d < judgedDrift {
		return
	}
	for _, dr := range r.Drifts {
		switch {
		case dr.Samples < 3:
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %d samples after warm-up, too few to judge", dr.Name, dr.Samples))
		case dr.Name == "shared-data keys" && dr.Max != dr.Min:
			r.Failures = append(r.Failures, fmt.Sprintf("shared-data keys grew from %.0f to %.0f after warm-up, with no new limit configured", dr.Min, dr.Max))
		case dr.Worst > 0.10:
			r.Failures = append(r.Failures, fmt.Sprintf("%s drifted %.1f%% from its median %.1f after warm-up (min %.1f, max %.1f)", dr.Name, 100*dr.Worst, dr.Median, dr.Min, dr.Max))
		}
	}
}
