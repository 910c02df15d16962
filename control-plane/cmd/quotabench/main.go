// Command weighstation-quotabench is `make bench-quota`: the quota service at scale. For each
// store mode (one Redis; a primary, a replica and three sentinels; a Cluster of three primaries
// and three replicas, those two with TLS and passwords as the local stack runs them) it starts
// the store and the real quota service (`weighstation quota`) on free loopback ports, then posts
// the filter's own reports as 100 gateway replicas (then, on a fresh store, as 10), each once a
// second (open loop, spread over the second), all on the same global limits, up a ladder of
// limits per replica. Each rung:
// answer latency p50/p99 (from when a report was due), the data nodes' commands per second, and
// the quota service's and the store's CPU time per report answered. A mode's ladder stops at the
// first rung it does not sustain.
//
// The table goes to <out>/README.md; whether p99 ≤ 50 ms and the cost per limit reported does
// not grow up the ladder is printed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

type config struct {
	root, out               string
	modes                   []redisclient.Mode
	ladder                  []int
	replicaCounts           []int
	period, warmup, measure time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.root, "root", ".", "repository root (holds .tools/bin: weighstation, redis-server, redis-sentinel, redis-cli)")
	flag.StringVar(&c.out, "out", "docs/benchmarks/quota", "where the table goes")
	modes := flag.String("modes", "single,sentinel,cluster", "comma-separated store modes, one ladder each")
	ladder := flag.String("limits", "10,30,100,1000,10000", "comma-separated global limits per replica, one rung each")
	replicas := flag.String("replicas", "100,10", "comma-separated gateway replica counts, one ladder each on a fresh store")
	flag.DurationVar(&c.period, "period", time.Second, "how often each replica reports")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "reports before the measurement (every hash fills with every replica's report)")
	flag.DurationVar(&c.measure, "measure", 10*time.Second, "measurement per rung")
	flag.Parse()
	err := c.parse(*modes, *ladder, *replicas)
	if err == nil {
		c.root, err = filepath.Abs(c.root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-quotabench:", err)
		os.Exit(2)
	}
	// Goals not met are evidence for the table, not a failure of the run (as bench-tenants).
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-quotabench:", err)
		os.Exit(1)
	}
}

func (c *config) parse(modes, ladder, replicas string) error {
	for _, m := range strings.Split(modes, ",") {
		mode := redisclient.Mode(strings.TrimSpace(m))
		if !slices.Contains(redisclient.Modes, mode) {
			return fmt.Errorf("-modes: %q is none of %v", mode, redisclient.Modes)
		}
		c.modes = append(c.modes, mode)
	}
	var err error
	if c.ladder, err = counts("-limits", ladder); err == nil {
		c.replicaCounts, err = counts("-replicas", replicas)
	}
	if err == nil && (c.period <= 0 || c.measure <= 0) {
		err = fmt.Errorf("-period and -measure must be positive")
	}
	return err
}

// counts parses a flag's comma-separated positive counts.
func counts(flagName, list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a count", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run measures every mode's ladder, writes the table and prints it.
func run(c config) error {
	began := time.Now()
	var ladders [][]rung
	for _, mode := range c.modes {
		for _, replicas := range c.replicaCounts {
			fmt.Fprintf(os.Stderr, "store in %s mode, %d replicas…\n", mode, replicas)
			rungs, err := ladderOf(c, mode, replicas)
			if err != nil {
				return fmt.Errorf("%s, %d replicas: %w", mode, replicas, err)
			}
			ladders = append(ladders, rungs)
		}
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	md := markdown(c, ladders, time.Since(began))
	fmt.Print(md)
	return os.WriteFile(filepath.Join(c.out, "README.md"), []byte(md), 0o644)
}

// ladderOf starts the store in mode and the quota service, and climbs the ladder with replicas
// reporting until a rung is not sustained.
func ladderOf(c config, mode redisclient.Mode, replicas int) ([]rung, error) {
	ports, err := localstack.FreePortsFor(localstack.Counts{RedisMode: mode})
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "weighstation-quotabench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	s, err := localstack.StartQuotaService(localstack.Config{
		ToolsDir: filepath.Join(c.root, ".tools"), WorkDir: work, Ports: ports, WithQuota: true, RedisMode: mode,
	})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	nodes, err := dataNodes(s, mode)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	m := meter{quotaPID: s.Quota.PID(), redisPIDs: s.RedisProcessIDs(), nodes: nodes}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/shares", ports.Quota)
	var rungs []rung
	for _, limits := range c.ladder {
		r, err := measure(c, mode, replicas, limits, url, m)
		if err != nil {
			return nil, fmt.Errorf("%d limits: %w", limits, err)
		}
		fmt.Fprintln(os.Stderr, "  "+r.line())
		rungs = append(rungs, r)
		if r.whyNotSustained() != "" {
			break
		}
	}
	return rungs, nil
}

// dataNodes are clients of each of the store's data nodes, for INFO.
func dataNodes(s *localstack.Stack, mode redisclient.Mode) ([]*redis.Client, error) {
	var opts redis.Options
	if mode != redisclient.Single {
		tlsCfg, err := s.RedisTLS()
		if err != nil {
			return nil, err
		}
		opts.TLSConfig, opts.Password = tlsCfg, localstack.RedisPassword
	}
	var nodes []*redis.Client
	for _, port := range s.RedisDataPorts() {
		o := opts
		o.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		nodes = append(nodes, redis.NewClient(&o))
	}
	return nodes, nil
}

// measure runs one rung: the replicas' open loop, with the costs read at the edges of its
// measurement window.
func measure(c config, mode redisclient.Mode, replicas, limits int, url string, m meter) (rung, error) {
	all, err := limitsJSON(limits, replicas)
	if err != nil {
		return rung{}, err
	}
	bodies := make([]reportBody, replicas)
	for i := range bodies {
		bodies[i] = newReportBody(fmt.Sprintf("bench-replica-%03d", i), replicas, all)
	}
	// One kept-alive connection per replica, as each Envoy keeps its own to the service; the
	// timeout is a report's worth of patience beyond the service's own 500 ms store deadline.
	transport := &http.Transport{MaxIdleConnsPerHost: replicas, MaxConnsPerHost: replicas}
	defer transport.CloseIdleConnections()
	sched := schedule{start: time.Now().Add(100 * time.Millisecond), period: c.period, warmup: c.warmup, measure: c.measure, replicas: replicas}
	load := &replicaLoad{client: &http.Client{Transport: transport, Timeout: 5 * time.Second}, url: url, limits: limits, sched: sched}

	ctx := context.Background()
	readings := make(chan usage, 2)
	errs := make(chan error, 1)
	go func() {
		var first usage
		for i, at := range []time.Time{sched.windowStart(), sched.windowEnd()} {
			time.Sleep(time.Until(at))
			u, err := m.read(ctx)
			if err != nil {
				errs <- err
				return
			}
			if i == 0 {
				first = u
				continue
			}
			readings <- u.minus(first)
		}
	}()
	res := load.run(bodies)
	select {
	case err := <-errs:
		return rung{}, fmt.Errorf("reading the costs: %w", err)
	case cost := <-readings:
		return rung{mode: mode, limits: limits, replicas: replicas, window: c.measure, load: res, cost: cost}, nil
	}
}
