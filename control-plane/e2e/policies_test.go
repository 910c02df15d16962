package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tenantPolicy is a LimitPolicy document for tenant (also its name): identify and the rest of
// the spec, each given as YAML lines indented for spec.
func tenantPolicy(tenant, identify, spec string) string {
	return fmt.Sprintf("apiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata:\n  name: %[1]s\nspec:\n  tenant: %[1]s\n  identify:\n%[2]s%[3]s",
		tenant, identify, spec)
}

// writePolicies writes documents into dir/file, for tests that generate their tenants.
func writePolicies(dir, file string, docs []string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strings.Join(docs, "---\n")), 0o644)
}
