package quota

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis runs a redis-server (from .tools/bin, else PATH) on a free loopback port, without
// persistence, stopped when the test ends.
func startRedis(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	bin := filepath.Join("..", "..", "..", ".tools", "bin", "redis-server")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("redis-server"); err != nil {
			t.Fatal("redis-server not found: run scripts/install-tools.sh")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, addr
		}
	}
	t.Fatal("redis-server did not listen")
	return nil, ""
}

func post(t *testing.T, url string, req SharesRequest) (int, SharesResponse) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+SharesPath, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out SharesResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("response %q: %v", body, err)
		}
	}
	return resp.StatusCode, out
}

// Three replicas of a global limit of 600/s report once a period each, in turn, what their clients wanted and what their shares let through (reject: demand is
// what was offered). The shares settle on the max-min split within two periods of any change;
// a stalled replica's share goes to the others within two periods; the shares in force never
// sum above the limit at any step; a replica that stops reporting holds nothing after the TTL;
// and without the store the service says so rather than guess.
func TestSharesFollowDemandAcrossReplicasAndStopWithTheStore(t *testing.T) {
	redisCmd, addr := startRedis(t)
	now := time.Now()
	svc := &Service{Store: NewStore(redis.NewClient(&redis.Options{Addr: addr})), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	const limit = 600.0
	replicas := []string{"envoy-1", "envoy-2", "envoy-3"}
	connections := map[string]int{"envoy-1": 1, "envoy-2": 2, "envoy-3": 7}
	offered := map[string]float64{"envoy-1": 1000, "envoy-2": 2000, "envoy-3": 7000}
	held := map[string]float64{} // the share each replica enforces
	given := map[string]time.Time{}
	inForce := func() float64 {
		sum := 0.0
		for r, share := range held {
			if now.Sub(given[r]) < 2500*time.Millisecond {
				sum += share
			}
		}
		return sum
	}
	period := func(p int) {
		for _, r := range replicas {
			admitted := min(offered[r], held[r]*limit)
			code, resp := post(t, srv.URL, SharesRequest{Replica: r, Limits: []LimitReport{{
				Key: "nats/globex/rate/1", PerSecond: limit, Admitted: admitted, Demand: &[]float64{offered[r]}[0],
				Connections: connections[r], Saturated: offered[r] > admitted,
			}}})
			if code != http.StatusOK || len(resp.Limits) != 1 {
				t.Fatalf("period %d, %s: status %d, %+v", p, r, code, resp)
			}
			held[r], given[r] = resp.Limits[0].Share, now
			if sum := inForce(); sum > 1+1e-9 {
				t.Fatalf("period %d, after %s: shares in force sum to %.6f: %v", p, r, sum, held)
			}
			now = now.Add(time.Second / time.Duration(len(replicas)))
		}
	}
	settled := func(when string, want map[string]float64) {
		t.Helper()
		for r, w := range want {
			if math.Abs(held[r]-w) > 1e-3 {
				t.Errorf("%s: %s holds %.4f, want %.4f (all: %v)", when, r, held[r], w, held)
			}
		}
	}
	// From nothing, connections 1:2:7 all offered ten times their part: two periods to settle.
	period(0)
	period(1)
	settled("settled at 1:2:7", map[string]float64{"envoy-1": 0.1, "envoy-2": 0.2, "envoy-3": 0.7})

	// envoy-3's connections stall: its share is the others' within two periods (it reports
	// after them: the slowest case), split by connections as both still want more.
	offered["envoy-3"] = 0
	period(2)
	period(3)
	settled("after envoy-3 stalled", map[string]float64{"envoy-1": 1.0 / 3, "envoy-2": 2.0 / 3, "envoy-3": 0})

	// envoy-1 goes quiet altogether; after the TTL the others divide the limit.
	replicas = replicas[1:]
	delete(held, "envoy-1")
	now = now.Add(reportTTL)
	offered["envoy-3"] = 7000
	period(4)
	period(5)
	settled("after envoy-1 left", map[string]float64{"envoy-2": 0.2 / 0.9, "envoy-3": 0.7 / 0.9})

	// The store goes away: the service says so at once rather than guess.
	_ = redisCmd.Process.Kill()
	_ = redisCmd.Wait()
	if code, _ := post(t, srv.URL, SharesRequest{Replica: "envoy-2", Limits: []LimitReport{{Key: "k", PerSecond: 1, Connections: 1}}}); code != http.StatusServiceUnavailable {
		t.Errorf("with Redis gone: status %d, want 503", code)
	}
}
