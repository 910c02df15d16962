// Package e2equota drives the quota service against a real store: one server with TLS and an
// ACL user; Redis with Sentinel (a primary, a replica, three sentinels) behind three gateway
// replicas under load on a global tenant; and a Redis Cluster (three primaries, three replicas)
// under the reports of a hundred global limits. The last two start a local stack on free
// loopback ports and kill a primary with SIGKILL; what users would notice is counted at the
// broker (the tenant's admitted messages) or at the quota service's HTTP API (the answers
// replicas get).
//
// `make test` runs the one-server and Sentinel tests (make test-quota-store-smoke); `make
// test-clusters` every test.
package e2equota

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

var root = localstack.TestRoot()

// startStack starts a stack of replicas Envoys whose quota store runs in mode, with a tenant
// (NATS user of the same name) per entry of tenants, each policy's spec given after `tenant:`
// and `identify:`.
func startStack(t *testing.T, mode redisclient.Mode, replicas int, tenants map[string]string) (*localstack.Stack, localstack.Ports) {
	t.Helper()
	p, err := localstack.FreePortsFor(localstack.Counts{Replicas: replicas, RedisMode: mode})
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
		WithQuota:        true,
		RedisMode:        mode,
		ExtraNATSUsers:   users,
	})
	if err != nil {
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		t.Fatalf("starting the stack with the store in %s mode: %v", mode, err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			localstack.PrintLogTails(s.LogDir())
		}
	})
	return s, p
}

// quotaHealthy: the quota service's /healthz answers 200 (its store serves).
func quotaHealthy(p localstack.Ports) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", p.Quota))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
