package localstack

import (
	"fmt"
	"sort"
)

// QuotaTestPolicies is a policy file for the tests of global limits: the defaults, pointing
// at the stack's quota service, a default tenant, and a tenant per entry of tenants whose NATS
// user has its name (its spec given after `tenant:` and `identify:`); and those users, sorted.
func QuotaTestPolicies(quotaPort int, tenants map[string]string) (doc string, users []string) {
	doc = fmt.Sprintf(`apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: { name: defaults }
spec:
  defaultTenant: anonymous
  quotaService: { address: "127.0.0.1:%d" }
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: anonymous }
spec:
  tenant: anonymous
`, quotaPort)
	for name := range tenants {
		users = append(users, name)
	}
	sort.Strings(users)
	for _, name := range users {
		doc += fmt.Sprintf("---\napiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: %s }\nspec:\n  tenant: %s\n  identify: { nats: { users: [%s] } }\n  %s", name, name, name, tenants[name])
	}
	return doc, users
}
