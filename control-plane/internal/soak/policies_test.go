package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// Every step of the flip cycle is a valid policy beside the shipped defaults, and the cycle
// returns to where it began.
func TestEveryPolicyStepLoads(t *testing.T) {
	defaults, err := os.ReadFile("../../../policies/defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	step := StepBase
	for range policySteps {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "defaults.yaml"), defaults, 0o644); err != nil {
			t.Fatal(err)
		}
		yaml := PolicyYAML(step)
		if err := os.WriteFile(filepath.Join(dir, "soak.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.LoadDir(dir); err != nil {
			t.Fatalf("step %s: %v", step, err)
		}
		if seen[yaml] {
			t.Errorf("step %s repeats an earlier step", step)
		}
		seen[yaml] = true
		for _, tenant := range Tenants {
			if !strings.Contains(yaml, "tenant: "+tenant+"\n") {
				t.Errorf("step %s has no policy for %s", step, tenant)
			}
		}
		step = step.Next()
	}
	if step != StepBase {
		t.Errorf("the cycle ends at %s", step)
	}
}
