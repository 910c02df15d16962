package e2equota

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/quota"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// The quota store as a Redis Cluster of three primaries with a replica each (TLS, a password),
// under the reports of 100 global limits from three gateway replicas. The reports are posted to
// the quota service's HTTP API as the filter posts them (one request per replica a second, every
// limit it carries in it, quota.SharesRequest): 100 tenants through three Envoys would measure
// the gateway, not the store. A primary is killed (SIGKILL): its replica is promoted, and then
// every limit's reports go on, all three replicas counted in each. The gap is measured from the
// kill to the first answer of every replica carrying every limit again.
func TestQuotaFollowsClusterFailover(t *testing.T) {
	const (
		limits, replicas = 100, 3
		// backWithin bounds kill → every limit answered again: cluster-node-timeout (1 s), the
		// replica's election, go-redis reloading the slots, a report period.
		backWithin = 10 * time.Second
	)
	s, p := startStack(t, redisclient.Cluster, 1, nil)
	var keys []string
	for i := range limits {
		keys = append(keys, fmt.Sprintf("nats/tenant-%03d/rate", i))
	}
	log := reportAsReplicas(t, p, replicas, keys)

	waitFor(t, 10*time.Second, "every replica's answer carries every limit, with all three replicas", func() bool {
		return log.lastWhole(replicas, len(keys)).After(time.Time{})
	})
	tlsCfg, err := s.RedisTLS()
	if err != nil {
		t.Fatal(err)
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{fmt.Sprintf("127.0.0.1:%d", p.Redis)},
		Password: localstack.RedisPassword, TLSConfig: tlsCfg})
	defer cluster.Close()
	ctx := context.Background()

	// The limits' reports spread over every primary's slots.
	held := map[string]int64{}
	var mu sync.Mutex
	if err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		held[node.Options().Addr] = n
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("keys held by each primary: %v", held)
	if len(held) != 3 {
		t.Fatalf("%d primaries, want 3: %v", len(held), held)
	}
	victim, most := "", int64(0)
	for a, n := range held {
		if n < limits/10 {
			t.Errorf("primary %s holds %d of the %d limits' keys: they are not spread over the slots", a, n, limits)
		}
		if n > most {
			victim, most = a, n
		}
	}
	var port int
	if _, err := fmt.Sscanf(victim, "127.0.0.1:%d", &port); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := s.RedisNodes[port-p.Redis].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the quota service stays ready: the other primaries serve their limits.
	time.Sleep(300 * time.Millisecond)
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", p.Quota)); code != http.StatusOK || !strings.Contains(body, victim) {
		t.Errorf("/healthz with primary %s down answered %d %q: want 200 naming it", victim, code, body)
	}
	waitFor(t, 30*time.Second, "a replica takes the killed primary's slots", func() bool {
		info, err := cluster.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		slots, err := cluster.ClusterSlots(ctx).Result()
		return err == nil && slotsCovered(slots) && !servedBy(slots, victim)
	})
	promoted := time.Since(killed)
	t.Logf("primary %s (%d of the limits' keys) killed; its replica serves its slots %s later", victim, most, promoted.Round(10*time.Millisecond))
	waitFor(t, backWithin+5*time.Second, "every replica's answer carries every limit again", func() bool {
		return log.lastWhole(replicas, len(keys)).After(killed)
	})
	back := log.lastWhole(replicas, len(keys)).Sub(killed)
	failed := log.failedSince(killed)
	fewest := log.fewestSince(killed)
	t.Logf("kill → every limit's reports answered again, all three replicas counted: %s (%d of the replicas' answers lacked some limit meanwhile, the fewest carried %d of %d)",
		back.Round(10*time.Millisecond), failed, fewest, len(keys))
	// The limits on the other primaries were answered all along: only the lost primary's lapse.
	if want := len(keys) - int(most); fewest < want {
		t.Errorf("an answer during the failover carried %d limits: the %d on the other primaries should have been answered all along (answers since the kill by status, 0 for none: %v)",
			fewest, want, log.statusesSince(killed))
	}
	if back > backWithin {
		t.Errorf("the limits' reports went on %s after the kill: more than %s", back.Round(10*time.Millisecond), backWithin)
	}
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", p.Quota)); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz after the failover answered %d %q: want 200 ok", code, body)
	}
}

// slotsCovered: every hash slot has a primary.
func slotsCovered(slots []redis.ClusterSlot) bool {
	n := 0
	for _, r := range slots {
		n += r.End - r.Start + 1
	}
	return n == 16384
}

// servedBy: some slots' primary is addr.
func servedBy(slots []redis.ClusterSlot, addr string) bool {
	for _, r := range slots {
		if len(r.Nodes) > 0 && r.Nodes[0].Addr == addr {
			return true
		}
	}
	return false
}

// answers records every answer the simulated replicas got.
type answers struct {
	mu  sync.Mutex
	got []answer
}

type answer struct {
	at      time.Time
	replica int
	status  int
	// whole: every limit in the answer, each counting all the replicas.
	whole bool
	// limits is how many limits the answer carried.
	limits int
}

// reportAsReplicas posts, as replicas replicas would, a report of every key once a second
// (staggered over the second), until the test ends.
func reportAsReplicas(t *testing.T, p localstack.Ports, replicas int, keys []string) *answers {
	a := &answers{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	client := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d%s", p.Quota, quota.SharesPath)
	for r := range replicas {
		req := quota.SharesRequest{Replica: fmt.Sprintf("replica-%d", r)}
		for _, k := range keys {
			req.Limits = append(req.Limits, quota.LimitReport{Key: k, PerSecond: 1000, Admitted: 300, Connections: r + 1, Saturated: true})
		}
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(r) * time.Second / time.Duration(replicas))
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for ctx.Err() == nil {
				a.add(r, client, url, body, len(keys), replicas)
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		}()
	}
	return a
}

func (a *answers) add(replica int, client *http.Client, url string, body []byte, keys, replicas int) {
	ans := answer{replica: replica}
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	ans.at = time.Now() // answered (or not) by then
	if err == nil {
		ans.status = resp.StatusCode
		var shares quota.SharesResponse
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&shares) == nil {
			ans.limits = len(shares.Limits)
		}
		if ans.limits == keys {
			ans.whole = true
			for _, l := range shares.Limits {
				if l.Replicas != replicas {
					ans.whole = false
				}
			}
		}
		resp.Body.Close()
	}
	a.mu.Lock()
	a.got = append(a.got, ans)
	a.mu.Unlock()
}

// lastWhole is the latest time by which every replica had a whole answer after the previous
// failure of any (zero: not yet).
func (a *answers) lastWhole(replicas, keys int) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var sinceFail time.Time
	for _, ans := range a.got {
		if !ans.whole {
			sinceFail = ans.at
		}
	}
	seen := map[int]time.Time{}
	for _, ans := range a.got {
		if ans.whole && ans.at.After(sinceFail) {
			if _, ok := seen[ans.replica]; !ok {
				seen[ans.replica] = ans.at
			}
		}
	}
	if len(seen) < replicas {
		return time.Time{}
	}
	var last time.Time
	for _, at := range seen {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// fewestSince is the fewest limits an answer carried after from (every request answered).
func (a *answers) fewestSince(from time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	fewest := -1
	for _, ans := range a.got {
		if ans.at.After(from) && (fewest < 0 || ans.limits < fewest) {
			fewest = ans.limits
		}
	}
	return fewest
}

// statusesSince counts the answers after from by HTTP status (0: no answer).
func (a *answers) statusesSince(from time.Time) map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int]int{}
	for _, ans := range a.got {
		if ans.at.After(from) {
			out[ans.status]++
		}
	}
	return out
}

func (a *answers) failedSince(from time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ans := range a.got {
		if ans.at.After(from) && !ans.whole {
			n++
		}
	}
	return n
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
