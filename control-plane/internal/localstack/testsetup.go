package localstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// ClusterMatrix says which events a cluster test package runs (WEIGHSTATION_CLUSTERS): the
// smoke set ("" or "smoke", make test) or every event ("full", make test-clusters).
func ClusterMatrix() (full bool, err error) {
	switch v := os.Getenv("WEIGHSTATION_CLUSTERS"); v {
	case "", "smoke":
		return false, nil
	case "full":
		return true, nil
	default:
		return false, fmt.Errorf("WEIGHSTATION_CLUSTERS=%q: want smoke or full", v)
	}
}

// TestRoot is the repository's root for a test package two directories down
// (WEIGHSTATION_ROOT when set).
func TestRoot() string {
	if root := os.Getenv("WEIGHSTATION_ROOT"); root != "" {
		return root
	}
	root, _ := filepath.Abs("../..")
	return root
}

// TestWorkDir makes a fresh work directory named after prefix, with a policy directory holding
// the repository's policies and the test package's testdata.
func TestWorkDir(root, prefix string) (work, policyDir string, err error) {
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", err
	}
	policyDir = filepath.Join(work, "policies")
	for _, src := range []string{filepath.Join(root, "policies"), "testdata"} {
		if err := CopyPolicies(src, policyDir); err != nil {
			return "", "", err
		}
	}
	return work, policyDir, nil
}
