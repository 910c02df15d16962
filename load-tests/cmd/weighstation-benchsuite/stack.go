package main

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weighstation/weighstation/load-tests/internal/localstack"
)

// policies are the benchmark's own tenants: acme enforced but never limited (baselines), globex 1000/s delay and
// the default tenant 1000/s reject (overload and noisy neighbour).
//
//go:embed policies/*.yaml
var policies embed.FS

// startStack starts the local stack with the benchmark's policies and the no-op filters'
// listeners (the CPU floors); reader's and billing's NATS users are added (policies/reader.yaml
// and billing.yaml name them).
func startStack(root string) (*localstack.Stack, error) {
	return localstack.Start(root, copyPolicies, localstack.NoopPortEnv, "EXTRA_NATS_USERS="+reader.natsUser+" "+billingA.natsUser)
}

func copyPolicies(dir string) error {
	return fs.WalkDir(policies, "policies", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := policies.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, d.Name()), b, 0o644)
	})
}
