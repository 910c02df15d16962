package e2e

import (
	"strings"
	"testing"
)

// editor is team-a's policy editor: a user bound in team-a to the chart's limitpolicy-editor
// ClusterRole, acting through kubectl (impersonated by the test's admin identity).
const editor = "alice@team-a"

// setUpTeam makes team-a's namespace and binds its editor there to the role the chart gives
// tenant teams.
func setUpTeam(t *testing.T) {
	t.Helper()
	k.must(t, "", "create", "namespace", teamNS)
	var role string
	for _, name := range strings.Fields(k.must(t, "", "get", "clusterrole", "-l", "app.kubernetes.io/instance="+release, "-o", "name")) {
		if strings.HasSuffix(name, "-limitpolicy-editor") {
			role = strings.TrimPrefix(name, "clusterrole.rbac.authorization.k8s.io/")
		}
	}
	if role == "" {
		t.Fatal("the chart made no limitpolicy-editor ClusterRole")
	}
	k.must(t, "", "-n", teamNS, "create", "rolebinding", "policy-editors", "--clusterrole", role, "--user", editor)
}

// asEditor runs kubectl as team-a's editor.
func asEditor(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return k.must(t, stdin, append([]string{"--as", editor}, args...)...)
}

// teamPolicies are team-a's LimitPolicies: orders, held to perGatewayRate on every gateway
// replica (the default scope), and payments, far under its limit.
func teamPolicies(perGatewayRate int) string {
	return `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: orders, namespace: team-a}
spec:
  tenant: orders
  identify:
    nats: {users: [orders]}
    kafka: {clientIdPrefixes: ["orders-"]}
  onLimit: reject
  limits:
    rate: {messagesPerSecond: ` + itoa(perGatewayRate) + `}
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: payments, namespace: team-a}
spec:
  tenant: payments
  identify:
    nats: {users: [payments]}
    kafka: {clientIdPrefixes: ["payments-"]}
  onLimit: delay
  limits:
    rate: {messagesPerSecond: 2000}
`
}
