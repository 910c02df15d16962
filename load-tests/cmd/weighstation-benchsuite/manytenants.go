package main

import (
	"context"
	"fmt"
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
	before, err := s.stack.AckedVersion()
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
	if err := s.stack.WaitAcked(ctx, before, time.Minute); err != nil {
		return fmt.Errorf("the policies with%s %d more tenants: %w", map[bool]string{true: "", false: "out"}[many], manyTenants, err)
	}
	// Every worker has installed them by the acknowledgement; a second more lets Envoy finish
	// with the configuration they replaced before the CPU is read.
	time.Sleep(time.Second)
	return nil
}
