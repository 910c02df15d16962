package cluster

import (
	"fmt"
	"strings"
)

const (
	// TeamNS is team-a's namespace.
	TeamNS = "team-a"
	// Editor is team-a's policy editor: a user bound in team-a to the chart's limitpolicy-editor
	// ClusterRole, acting through kubectl (impersonated by the admin identity).
	Editor = "alice@team-a"
	// OrdersRate is orders' limit on each gateway replica (perGateway scope, the default).
	OrdersRate = 100
)

// TeamPolicies are team-a's LimitPolicies: orders, held to rate on every gateway replica and
// refused above it; shipments, held to OrdersRate and delayed above it (its clients slowed to
// the limit, by TCP when the queue is long); and payments, far under its limit.
func TeamPolicies(rate int) string {
	return fmt.Sprintf(`apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: orders, namespace: team-a}
spec:
  tenant: orders
  identify:
    nats: {users: [orders]}
    kafka: {clientIdPrefixes: ["orders-"]}
  onLimit: reject
  limits:
    rate: {messagesPerSecond: %d}
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
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: shipments, namespace: team-a}
spec:
  tenant: shipments
  identify:
    nats: {users: [shipments]}
    kafka: {clientIdPrefixes: ["shipments-"]}
  onLimit: delay
  limits:
    rate: {messagesPerSecond: %d, burstMessages: 500}
    queue: {maxMessages: 10000, maxWait: 10s}
`, rate, OrdersRate)
}

// SetUpTeam makes team-a's namespace, binds its editor there to the role the chart gives tenant
// teams, and has the editor apply the team's policies.
func (k *Kube) SetUpTeam() error {
	if _, err := k.Run("", "create", "namespace", TeamNS); err != nil {
		return err
	}
	out, err := k.Run("", "get", "clusterrole", "-l", "app.kubernetes.io/instance="+Release, "-o", "name")
	if err != nil {
		return err
	}
	var role string
	for _, name := range strings.Fields(out) {
		if strings.HasSuffix(name, "-limitpolicy-editor") {
			role = strings.TrimPrefix(name, "clusterrole.rbac.authorization.k8s.io/")
		}
	}
	if role == "" {
		return fmt.Errorf("the chart made no limitpolicy-editor ClusterRole")
	}
	if _, err := k.Run("", "-n", TeamNS, "create", "rolebinding", "policy-editors", "--clusterrole", role, "--user", Editor); err != nil {
		return err
	}
	return k.Apply("team-a.yaml", TeamPolicies(OrdersRate), Editor)
}

// AsEditor runs kubectl as team-a's editor.
func (k *Kube) AsEditor(args ...string) (string, error) {
	return k.Run("", append([]string{"--as", Editor}, args...)...)
}
