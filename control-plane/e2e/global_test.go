package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// Global limits across three gateway replicas, with the quota service and Redis of the local
// stack (GATEWAY_REPLICAS=3): a global tenant whose connections sit 1:2:7 on the replicas,
// offered 10x its limit, gets its limit in total and each replica a share that follows its
// connections; with Redis killed every replica falls back to limit ÷ 3 — the total still near
// the limit — and returns to shares when Redis is back. A global tenant under its limit and a
// per-gateway tenant are never refused.
func TestGlobalLimitAcrossThreeReplicas(t *testing.T) {
	const limit, burst = 600.0, 30.0
	const replicas = 3
	gs := startReplicated(t, replicas, map[string]string{
		"spread": fmt.Sprintf("scope: global\n  onLimit: reject\n  limits:\n    rate: { messagesPerSecond: %d, burstMessages: %d }\n", int(limit), int(burst)),
		"calm":   "scope: global\n  onLimit: reject\n  limits:\n    rate: { messagesPerSecond: 1000 }\n",
		"local":  "onLimit: reject\n  limits:\n    rate: { messagesPerSecond: 200 }\n",
	})
	sub := connectNATS(t, gs.ports.NATSUpstream, localstack.BaselineNATSUser, localstack.BaselineNATSUser+"-secret")
	spread := collectOn(t, sub, "global.spread")
	calm := collectOn(t, sub, "global.calm")
	local := collectOn(t, sub, "global.local")

	// 10 connections of spread, 1:2:7 over the replicas, each offered 600 msg/s: 10x the limit.
	var conns []*nats.Conn
	refusedSpread, refusedOthers := &errorSink{}, &errorSink{}
	for replica, n := range []int{1, 2, 7} {
		for range n {
			conns = append(conns, gs.connect(t, replica, "spread", refusedSpread))
		}
	}
	calmConns := []*nats.Conn{gs.connect(t, 0, "calm", refusedOthers), gs.connect(t, 1, "calm", refusedOthers), gs.connect(t, 2, "calm", refusedOthers)}
	localConn := gs.connect(t, 2, "local", refusedOthers)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Publishers stop before the connections close (cleanups run last first), so that a failure
	// is the last thing the test says, not the publishes its cleanup cut short.
	t.Cleanup(func() { stop(); wg.Wait() })
	sent := map[string]*atomic.Int64{"spread": {}, "calm": {}, "local": {}}
	connSeq := 0
	publish := func(nc *nats.Conn, subject string, rate float64, c *atomic.Int64) {
		connSeq++
		conn := strconv.Itoa(connSeq)
		wg.Add(1)
		go func() {
			defer wg.Done()
			onSchedule(rate, 10*time.Minute, func(n int) bool {
				if ctx.Err() != nil {
					return false
				}
				if err := nc.Publish(subject, []byte(conn+"-"+strconv.Itoa(n))); err != nil && ctx.Err() == nil {
					t.Errorf("publish %s: %v", subject, err)
					return false
				}
				c.Add(1)
				return true
			})
		}()
	}
	for _, nc := range conns {
		publish(nc, "global.spread", limit, sent["spread"])
	}
	for _, nc := range calmConns {
		publish(nc, "global.calm", 100, sent["calm"])
	}
	publish(localConn, "global.local", 150, sent["local"])

	// Shares settle within a few reports (one a second).
	time.Sleep(4 * time.Second)
	shares := gs.shares(t, "spread")
	from := time.Now()
	time.Sleep(10 * time.Second)
	to := time.Now()
	total := spread.deliveredBetween(from, to)
	rate := float64(total) / to.Sub(from).Seconds()
	t.Logf("on shares: spread delivered %.1f msg/s over %s (limit %.0f): %+.2f%%; shares by replica %v (connections 1:2:7)",
		rate, to.Sub(from).Round(time.Millisecond), limit, (rate-limit)/limit*100, shares)
	if math.Abs(rate-limit)/limit > 0.05 {
		t.Errorf("on shares, spread delivered %.1f msg/s: outside ±5%% of %.0f", rate, limit)
	}
	for i, want := range []float64{0.1, 0.2, 0.7} {
		if math.Abs(shares[i]-want) > 0.05 {
			t.Errorf("replica %d holds a share of %.3f, want %.1f (its connections' part)", i, shares[i], want)
		}
	}
	// /usage sums the three replicas' reports: spread at its global limit, refused the rest.
	var seen usage.TenantNow
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("/usage last showed spread at %.0f msg/s over %d replicas, %d connections", seen.MessagesPerSecond, seen.Replicas, seen.Connections)
		}
	})
	eventually(t, 5*time.Second, "/usage sums spread over the three replicas", func() bool {
		for _, u := range readUsageOf(t, gs.ports.ControlPlane) {
			if u.Tenant == "spread" && u.Protocol == "nats" {
				seen = u
			}
		}
		return seen.Replicas == replicas && math.Abs(seen.MessagesPerSecond-limit)/limit < 0.15 && seen.Connections == 10
	})
	t.Logf("/usage: spread %.0f msg/s over %d replicas, %d connections, refused %.0f/s, load %.2f",
		seen.MessagesPerSecond, seen.Replicas, seen.Connections, seen.RefusedPerSecond["rate"], seen.Load)

	// The store goes away: every replica falls back to limit ÷ 3 within 2 s.
	killed := time.Now()
	if err := gs.stack.Redis.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, "every replica falls back", func() bool { return gs.fallbacks(t) == replicas })
	t.Logf("store killed: all %d replicas fell back after %s", replicas, took.Round(10*time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("falling back took %s, more than 2 s", took)
	}
	// The control plane probes the quota service once a second, apart from the filters: its
	// /status says so within a probe period and the service's health-check timeout.
	eventually(t, 3*time.Second, "/status reports the quota service unreachable", func() bool {
		st, err := gs.stack.ControlPlaneStatus()
		return err == nil && st.Quota != nil && !st.Quota.Reachable
	})
	t.Logf("/status showed the quota service unreachable %s after the store was killed", time.Since(killed).Round(10*time.Millisecond))
	from = killed.Add(2 * time.Second)
	time.Sleep(time.Until(from.Add(6 * time.Second)))
	to = time.Now()
	total = spread.deliveredBetween(from, to)
	rate = float64(total) / to.Sub(from).Seconds()
	t.Logf("on fallback: spread delivered %.1f msg/s (limit %.0f): %+.2f%%; shares %v", rate, limit, (rate-limit)/limit*100, gs.shares(t, "spread"))
	if math.Abs(rate-limit)/limit > 0.10 {
		t.Errorf("on fallback, spread delivered %.1f msg/s: outside ±10%% of %.0f", rate, limit)
	}

	// The store comes back: replicas return to shares.
	if err := gs.stack.StartRedis(); err != nil {
		t.Fatal(err)
	}
	took = eventually(t, 10*time.Second, "replicas return to shares", func() bool { return gs.fallbacks(t) == 0 })
	t.Logf("store back: replicas on shares again after %s", took.Round(10*time.Millisecond))
	eventually(t, 3*time.Second, "/status reports the quota service reachable again", func() bool {
		st, err := gs.stack.ControlPlaneStatus()
		return err == nil && st.Quota != nil && st.Quota.Reachable
	})
	// As on shares before: settled within a few reports, then the global limit exactly, split
	// by connections.
	time.Sleep(3 * time.Second)
	shares = gs.shares(t, "spread")
	from = time.Now()
	time.Sleep(6 * time.Second)
	to = time.Now()
	rate = float64(spread.deliveredBetween(from, to)) / to.Sub(from).Seconds()
	t.Logf("after the store's return: spread delivered %.1f msg/s (limit %.0f): %+.2f%%; shares %v", rate, limit, (rate-limit)/limit*100, shares)
	if math.Abs(rate-limit)/limit > 0.05 {
		t.Errorf("after the store's return, spread delivered %.1f msg/s: outside ±5%% of %.0f", rate, limit)
	}
	for i, want := range []float64{0.1, 0.2, 0.7} {
		if math.Abs(shares[i]-want) > 0.05 {
			t.Errorf("after the store's return replica %d holds %.3f, want %.1f", i, shares[i], want)
		}
	}

	stop()
	wg.Wait()
	for _, nc := range append(append(conns, calmConns...), localConn) {
		_ = nc.FlushTimeout(10 * time.Second)
	}
	calm.settle(t)
	local.settle(t)
	if refusedOthers.total() != 0 || int64(calm.delivered()) != sent["calm"].Load() || int64(local.delivered()) != sent["local"].Load() {
		t.Errorf("under-limit tenants lost messages: calm %d/%d, local %d/%d delivered, refusals: %d (%v)",
			calm.delivered(), sent["calm"].Load(), local.delivered(), sent["local"].Load(), refusedOthers.total(), refusedOthers.all())
	}
	if refusedSpread.count("rate limit of tenant spread") == 0 {
		t.Error("spread was never refused")
	}
}

// replicatedStack is a second local stack for one test: NATS only, several Envoys, Redis and the
// quota service.
type replicatedStack struct {
	stack    *localstack.Stack
	ports    localstack.Ports
	replicas int
}

// startReplicated starts it with a tenant (NATS user of the same name) per entry of tenants,
// each policy's spec given after `tenant:` and `identify:`.
func startReplicated(t *testing.T, replicas int, tenants map[string]string) *replicatedStack {
	t.Helper()
	return startReplicatedWithRoom(t, replicas, replicas, tenants)
}

// startReplicatedWithRoom starts it with ports set aside for room replicas, so that more can be
// added (localstack's AddEnvoy).
func startReplicatedWithRoom(t *testing.T, replicas, room int, tenants map[string]string) *replicatedStack {
	t.Helper()
	p, err := localstack.FreePortsFor(localstack.Counts{Replicas: room})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	dir := filepath.Join(work, "policies")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	docs, users := localstack.QuotaTestPolicies(p.Quota, tenants)
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := localstack.Start(context.Background(), localstack.Config{
		ToolsDir:         filepath.Join(root, ".tools"),
		WasmFile:         filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"),
		PolicyDir:        dir,
		WorkDir:          work,
		Ports:            p,
		EnvoyConcurrency: 2,
		Replicas:         replicas,
		ExtraNATSUsers:   users,
	})
	if err != nil {
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		t.Fatalf("starting %d replicas: %v", replicas, err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			localstack.PrintLogTails(s.LogDir())
		}
	})
	return &replicatedStack{stack: s, ports: p, replicas: replicas}
}

func (g *replicatedStack) connect(t *testing.T, replica int, tenant string, sink *errorSink) *nats.Conn {
	t.Helper()
	return connectNATS(t, g.ports.NATS+replica, tenant, tenant+"-secret",
		nats.FlusherTimeout(30*time.Second), nats.ErrorHandler(sink.handler))
}

func (g *replicatedStack) stat(t *testing.T, replica int, name string) float64 {
	t.Helper()
	v, err := readStat("http://"+addr(g.ports.Admin+replica)+"/stats", "wasmcustom."+name)
	if err != nil {
		t.Fatalf("replica %d stats: %v", replica, err)
	}
	return v
}

// shares is each replica's share of a tenant's global NATS limit.
func (g *replicatedStack) shares(t *testing.T, tenant string) []float64 {
	out := make([]float64, g.replicas)
	for i := range out {
		out[i] = g.stat(t, i, "weighstation_quota_share_ppm.protocol.nats.tenant."+tenant) / 1e6
	}
	return out
}

// fallbacks counts the replicas enforcing limit ÷ replicas.
func (g *replicatedStack) fallbacks(t *testing.T) int {
	n := 0
	for i := range g.replicas {
		if g.stat(t, i, "weighstation_quota_fallback") == 1 {
			n++
		}
	}
	return n
}
