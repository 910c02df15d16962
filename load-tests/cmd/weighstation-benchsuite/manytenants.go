package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// manyTenants is how many LimitPolicies the "gateway-10k-tenants" target adds beside the
// benchmark's own: what a message costs when the gateway knows that many tenants (the
// attribution tables and every per-tenant lookup are that big).
const manyTenants = 10_000

// withTenants makes the stack's policy directory hold the benchmark's policies and, if many,
// manyTenants more (one NATS user each, none connecting), and waits until Envoy acknowledged
// the set. Switching back and forth between targets keeps their rounds alternating in one run.
func (s *suite) withTenants(ctx context.Context, many bool) error {
	dir := s.stack.PolicyDir()
	marker := filepath.Join(dir, "many-0.yaml")
	if _, err := os.Stat(marker); (err == nil) == many {
		return nil
	}
	before, err := s.ackedVersion()
	if err != nil {
		return err
	}
	for i := range manyTenants {
		f := filepath.Join(dir, "many-"+strconv.Itoa(i)+".yaml")
		if !many {
			if err := os.Remove(f); err != nil {
				return err
			}
			continue
		}
		doc := fmt.Sprintf("apiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: many-%[1]d }\nspec:\n  tenant: many-%[1]d\n  identify: { nats: { users: [many-%[1]d] } }\n  limits: { rate: { messagesPerSecond: 1000 } }\n", i)
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if v, err := s.ackedVersion(); err == nil && v != before && v != "" {
			// Every worker has installed it by the acknowledgement; a second more lets Envoy
			// finish with the configuration it replaced before the CPU is read.
			time.Sleep(time.Second)
			return nil
		}
	}
	return fmt.Errorf("Envoy did not acknowledge the policies with%s %d more tenants within a minute", map[bool]string{true: "", false: "out"}[many], manyTenants)
}

// ackedVersion is the policy version the stack's Envoy last acknowledged.
func (s *suite) ackedVersion() (string, error) {
	resp, err := http.Get("http://" + s.stack.Addr("CONTROL_PLANE_PORT") + "/status")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Nodes []struct {
			AckedVersion string `json:"ackedVersion"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", err
	}
	if len(st.Nodes) == 0 {
		return "", fmt.Errorf("no Envoy in the control plane's /status")
	}
	return st.Nodes[0].AckedVersion, nil
}
