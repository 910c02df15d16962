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

func TestSharesFollowConnectionsAcrossReplicasAndStopWithTheStore(t *testing.T) {
	redisCmd, addr := startRedis(t)
	now := time.Now()
	svc := &Service{Store: NewStore(redis.NewClient(&redis.Options{Addr: addr})), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	report := func(replica string, connections int) (int, SharesResponse) {
		return post(t, srv.URL, SharesRequest{Replica: replica, Limits: []LimitReport{{
			Key: "nats/globex/rate/1", PerSecond: 500, Admitted: 160, Connections: connections, Saturated: true,
		}}})
	}
	for _, r := range []struct {
		replica     string
		connections int
	}{{"envoy-1", 1}, {"envoy-2", 2}, {"envoy-3", 7}} {
		if code, _ := report(r.replica, r.connections); code != http.StatusOK {
			t.Fatalf("%s: status %d", r.replica, code)
		}
	}
	// Every replica has reported: each gets its connections' part.
	for _, r := range []struct {
		replica     string
		connections int
		want        float64
	}{{"envoy-1", 1, 0.1}, {"envoy-2", 2, 0.2}, {"envoy-3", 7, 0.7}} {
		_, resp := report(r.replica, r.connections)
		if len(resp.Limits) != 1 || math.Abs(resp.Limits[0].Share-r.want) > 1e-9 || resp.Limits[0].Replicas != 3 {
			t.Errorf("%s: %+v, want share %.1f of 3 replicas", r.replica, resp.Limits, r.want)
		}
	}

	// envoy-3 stops reporting: after the TTL the others divide the limit between them.
	now = now.Add(reportTTL + time.Second)
	report("envoy-1", 1)
	if _, resp := report("envoy-2", 2); math.Abs(resp.Limits[0].Share-2.0/3) > 1e-9 || resp.Limits[0].Replicas != 2 {
		t.Errorf("after envoy-3 went quiet: %+v, want 2/3 of 2 replicas", resp.Limits)
	}

	// The store goes away: the service says so at once rather than guess.
	_ = redisCmd.Process.Kill()
	_ = redisCmd.Wait()
	if code, _ := report("envoy-1", 1); code != http.StatusServiceUnavailable {
		t.Errorf("with Redis gone: status %d, want 503", code)
	}
}
