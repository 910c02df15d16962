package e2equota

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// The Sentinel smoke (make test): three gateway replicas on a global tenant offered 10x its
// limit over connections 1:2:7, the quota store a primary, a replica and three sentinels (TLS,
// a data password, the sentinels' own user). The primary is killed (SIGKILL). While shares are
// missing every replica falls back to limit ÷ 3 and none goes above it; the quota service
// follows the replica the sentinels promote, and every replica is back on shares within a bound
// of the sentinels' down-after (1 s) plus their election, the filter's report period and the
// client's reconnect. What the tenant was admitted is counted at the broker throughout.
func TestQuotaFollowsSentinelFailover(t *testing.T) {
	const (
		limit, burst = 300.0, 30.0
		replicas     = 3
		// backWithin bounds kill → every replica on shares again: down-after 1 s, a vote and
		// promotion (1-2 s here), go-redis asking the sentinels again, a report period (1 s).
		backWithin = 10 * time.Second
	)
	s, p := startStack(t, redisclient.Sentinel, replicas, map[string]string{
		"spread": fmt.Sprintf("scope: global\n  onLimit: reject\n  limits:\n    rate: { messagesPerSecond: %d, burstMessages: %d }\n", int(limit), int(burst)),
	})
	b := countAtBroker(t, p, "quota.spread", replicas)
	fb := sampleFallbacks(t, p, replicas, "spread")
	conns := []int{1, 2, 7}
	publishLoad(t, p, "spread", "quota.spread", conns, limit)

	// On shares first: settled within a few reports.
	waitFor(t, 15*time.Second, "every replica on shares", func() bool {
		last, err := fb.lastSample()
		return err == nil && len(last.fallbacks) == replicas && last.count() == 0
	})
	time.Sleep(3 * time.Second)
	from := time.Now()
	time.Sleep(5 * time.Second)
	onShares := rate(b.between(-1, from, time.Now()), from, time.Now())
	t.Logf("on shares (store: primary on %d): %.1f msg/s admitted against %.0f (%+.1f%%), by replica %v",
		p.Redis, onShares, limit, (onShares-limit)/limit*100, byReplica(b, replicas, from, time.Now()))

	// The shares in force when the store goes: each replica keeps its own until its report fails.
	shares := make([]float64, replicas)
	for i := range replicas {
		ppm, err := stat(p, i, "weighstation_quota_share_ppm.protocol.nats.tenant.spread")
		if err != nil {
			t.Fatal(err)
		}
		shares[i] = ppm / 1e6
	}
	// A sentinel lost costs nothing: the one the quota service was asking is killed, the
	// service asks another, and no replica falls back.
	asked := sentinelInUse(t, s, p)
	if asked < 0 {
		t.Fatal("no sentinel has the quota service's connection")
	}
	sentinelKilled := time.Now()
	if err := s.Sentinels[asked].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	for _, sample := range fb.after(sentinelKilled) {
		if sample.count() != 0 {
			t.Fatalf("sentinel-%d killed: %d replicas fell back %s later", asked, sample.count(), sample.at.Sub(sentinelKilled).Round(10*time.Millisecond))
		}
	}
	t.Logf("sentinel-%d, the one the quota service asked, killed: no replica fell back in 3 s", asked)
	alive := p.Redis + 2 + (asked+1)%3

	// The primary is killed: the two sentinels left (a quorum of 2) promote the replica.
	killed := time.Now()
	if err := s.Redis.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	promotedAt := waitFor(t, 30*time.Second, "the sentinels promote the replica", func() bool {
		return sentinelsPrimary(t, s, alive) == strconv.Itoa(p.Redis+1)
	})
	t.Logf("the sentinels named the replica (port %d) primary %s after the kill", p.Redis+1, promotedAt.Round(10*time.Millisecond))
	// Back: every replica on shares for 2 s running, after the promotion.
	var back time.Time
	waitFor(t, backWithin+5*time.Second, "every replica back on shares for 2 s", func() bool {
		samples := fb.after(killed.Add(promotedAt))
		for i := len(samples) - 1; i >= 0; i-- {
			if samples[i].count() != 0 {
				return false
			}
			if samples[len(samples)-1].at.Sub(samples[i].at) >= 2*time.Second {
				back = lastFallback(fb.after(killed), killed)
				return true
			}
		}
		return false
	})
	gap := back.Sub(killed)
	windows := fallbackWindows(fb.after(killed), replicas)
	t.Logf("shares missing: every replica back on shares %s after the kill; fallback windows by replica %v", gap.Round(10*time.Millisecond), windows)
	if gap > backWithin {
		t.Errorf("replicas were back on shares %s after the kill: more than %s", gap.Round(10*time.Millisecond), backWithin)
	}

	// What the tenant was admitted from the kill to the last replica's return. Each replica
	// enforces its share until its own report fails, then limit ÷ 3 until its first answer from
	// the promoted store, whose first shares count only the reports it has: at each edge, for up
	// to a report period, a replica on a share meets others on limit ÷ 3 and their sum is above
	// the limit (by at most (N−1)/N of it). Beyond those edges and a burst, never more.
	admitted := b.between(-1, killed, back)
	allowed := limit * gap.Seconds()
	edges := 2 * reportPeriod.Seconds() * limit * (replicas - 1) / replicas
	t.Logf("kill → back on shares (%s): %d admitted; the limit allows %.0f (%+.1f%%), the replicas enforced %.0f (shares before %.3f, limit ÷ %d on fallback)",
		gap.Round(10*time.Millisecond), admitted, allowed, (float64(admitted)-allowed)/allowed*100,
		enforcedBetween(fb.after(killed.Add(-time.Second)), killed, back, limit), shares, replicas)
	if float64(admitted) > allowed+edges+burst {
		t.Errorf("%d admitted in %s: above the limit's %.0f by more than the mixed edges (%.0f) and a burst (%.0f)", admitted, gap.Round(10*time.Millisecond), allowed, edges, burst)
	}
	// Each replica, while it fell back, held to limit ÷ 3 (plus a burst of its own: its bucket
	// keeps what it held on its share, and the fallback gauge is sampled every 50 ms).
	for i, ws := range windows {
		for _, w := range ws {
			got := b.between(i, w.from, w.to)
			held := limit / replicas * w.to.Sub(w.from).Seconds()
			t.Logf("replica %d on fallback for %s: %d admitted against limit ÷ %d = %.0f", i, w.to.Sub(w.from).Round(10*time.Millisecond), got, replicas, held)
			if float64(got) > held+burst {
				t.Errorf("replica %d admitted %d in its %s on fallback: above limit ÷ %d (%.0f) by more than a burst", i, got, w.to.Sub(w.from).Round(10*time.Millisecond), replicas, held)
			}
		}
	}

	// On shares again, through the promoted replica: the limit exactly, as before.
	if !quotaHealthy(p) {
		t.Error("the quota service's /healthz fails after the failover")
	}
	time.Sleep(2 * time.Second)
	from = time.Now()
	time.Sleep(5 * time.Second)
	after := rate(b.between(-1, from, time.Now()), from, time.Now())
	t.Logf("after the failover: %.1f msg/s admitted against %.0f (%+.1f%%)", after, limit, (after-limit)/limit*100)
	if math.Abs(after-limit)/limit > 0.05 {
		t.Errorf("after the failover the tenant was admitted %.1f msg/s: outside ±5%% of %.0f", after, limit)
	}
}

// sentinelClient reaches the sentinel on port as the quota service does.
func sentinelClient(t *testing.T, s *localstack.Stack, port int) *redis.SentinelClient {
	t.Helper()
	tlsCfg, err := s.RedisTLS()
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port),
		Username: localstack.RedisSentinelUser, Password: localstack.RedisSentinelPassword, TLSConfig: tlsCfg})
}

// sentinelsPrimary is the port the sentinel on port names as the primary ("" if it cannot say).
func sentinelsPrimary(t *testing.T, s *localstack.Stack, port int) string {
	t.Helper()
	sc := sentinelClient(t, s, port)
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a, err := sc.GetMasterAddrByName(ctx, localstack.RedisMasterName).Result()
	if err != nil || len(a) != 2 {
		return ""
	}
	return a[1]
}

// sentinelInUse is the index of the sentinel holding the quota service's connections (the
// sentinels name their links to each other sentinel-<id>-cmd; go-redis names none), -1 if none
// does.
func sentinelInUse(t *testing.T, s *localstack.Stack, p localstack.Ports) int {
	t.Helper()
	for j := range s.Sentinels {
		sc := sentinelClient(t, s, p.Redis+2+j)
		cmd := redis.NewStringCmd(context.Background(), "client", "list")
		err := sc.Process(context.Background(), cmd)
		sc.Close()
		if err != nil {
			t.Fatalf("sentinel-%d: CLIENT LIST: %v", j, err)
		}
		for _, line := range strings.Split(cmd.Val(), "\n") {
			if strings.Contains(line, " name= ") && !strings.Contains(line, "cmd=client|list") {
				return j
			}
		}
	}
	return -1
}

// reportPeriod is how often a replica reports (weighstation_core::quota::REPORT_PERIOD_NS).
const reportPeriod = time.Second

// enforcedBetween integrates, over [from, to), the rates the replicas' sampled shares allowed.
func enforcedBetween(samples []fallbackSample, from, to time.Time, limit float64) float64 {
	total := 0.0
	for i, s := range samples {
		start, end := s.at, to
		if i+1 < len(samples) {
			end = samples[i+1].at
		}
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if !end.After(start) {
			continue
		}
		perSecond := 0.0
		for _, share := range s.shares {
			perSecond += share * limit
		}
		total += perSecond * end.Sub(start).Seconds()
	}
	return total
}

type window struct{ from, to time.Time }

func (w window) String() string {
	return w.to.Sub(w.from).Round(10 * time.Millisecond).String()
}

// fallbackWindows are, by replica, the spans in which its samples read fallback.
func fallbackWindows(samples []fallbackSample, replicas int) [][]window {
	out := make([][]window, replicas)
	for i := range replicas {
		var open *window
		for _, s := range samples {
			switch {
			case s.fallbacks[i] && open == nil:
				open = &window{from: s.at, to: s.at}
			case s.fallbacks[i]:
				open.to = s.at
			case open != nil:
				open.to = s.at
				out[i] = append(out[i], *open)
				open = nil
			}
		}
		if open != nil {
			out[i] = append(out[i], *open)
		}
	}
	return out
}

// lastFallback is the end of the last sample span in which any replica read fallback (the
// first sample after it, all on shares); from when none did.
func lastFallback(samples []fallbackSample, from time.Time) time.Time {
	back := from
	for i, s := range samples {
		if s.count() > 0 && i+1 < len(samples) {
			back = samples[i+1].at
		}
	}
	return back
}

func byReplica(b *broker, replicas int, from, to time.Time) []string {
	out := make([]string, replicas)
	for i := range replicas {
		out[i] = fmt.Sprintf("%.0f/s", rate(b.between(i, from, to), from, to))
	}
	return out
}

func rate(n int, from, to time.Time) float64 { return float64(n) / to.Sub(from).Seconds() }

// waitFor polls cond every 20 ms until it holds (and says how long that took) or fails the test.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, timeout)
	return 0
}
