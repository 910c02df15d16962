package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// teamClient is a ServiceAccount of team-a allowed to manage LimitPolicies in team-a only.
func teamClient(t *testing.T, k *k8sStack) dynamic.Interface {
	t.Helper()
	ctx := context.Background()
	rbac := k.kube.RbacV1()
	if _, err := rbac.Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "limitpolicy-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"weighstation.io"}, Resources: []string{"limitpolicies"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dynamicClient(t, boundServiceAccount(t, k, "team-a", "writer", rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "limitpolicy-writer"}))
}

// boundServiceAccount makes ServiceAccount name in ns, binds it there to role, and returns a
// kubeconfig of its token.
func boundServiceAccount(t *testing.T, k *k8sStack, ns, name string, role rbacv1.RoleRef) string {
	t.Helper()
	ctx := context.Background()
	if _, err := k.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		RoleRef:    role,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := k.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := k.api.Kubeconfig(ns+"-"+name, tok.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func testTeamCannotReachAnotherTenant(t *testing.T, k *k8sStack) {
	team := teamClient(t, k)
	// The API server refuses what RBAC does not grant.
	forbidden := []struct {
		what string
		do   func() error
	}{
		{"a LimitPolicy in another team's namespace", func() error {
			_, err := apply(team, lpGVR, obj(t, `{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: mine, namespace: team-b}, spec: {tenant: acme}}`))
			return err
		}},
		{"an edit of another team's LimitPolicy", func() error {
			_, err := apply(team, lpGVR, obj(t, `{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: globex, namespace: team-b}, spec: {tenant: globex, limits: {maxMessageBytes: 1MiB}}}`))
			return err
		}},
		{"a delete of another team's LimitPolicy", func() error {
			return team.Resource(lpGVR).Namespace("team-b").Delete(context.Background(), "globex", metav1.DeleteOptions{})
		}},
		{"an edit of the GatewayDefaults (its grants)", func() error {
			_, err := apply(team, gwdGVR, obj(t, `{apiVersion: weighstation.io/v1alpha1, kind: GatewayDefaults, metadata: {name: default}, spec: {defaultTenant: k8s-default, grants: [{namespaces: [team-a], tenants: ["*"]}]}}`))
			return err
		}},
		{"a status written by the team", func() error {
			_, err := team.Resource(lpGVR).Namespace("team-a").Patch(context.Background(), "acme", "application/merge-patch+json",
				[]byte(`{"status":{"conditions":[]}}`), metav1.PatchOptions{}, "status")
			return err
		}},
	}
	for _, f := range forbidden {
		if err := f.do(); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%s: want the API server to refuse it (forbidden), got %v", f.what, err)
		}
	}
	// What RBAC lets through, the grants refuse: NotPermitted, and nothing changes.
	before, _ := k.stack.ControlPlaneStatus()
	for i, c := range []struct{ spec, why string }{
		{`{tenant: globex, identify: {nats: {users: [k8s-acme-3]}}}`, `define tenant "globex"`},
		{`{tenant: acme, identify: {nats: {users: [k8s-globex]}}}`, `claim NATS user "k8s-globex"`},
		{`{tenant: acme, identify: {nats: {nkeys: [UAFHG6FUD2UU4SDFVAFUL5LDFO2XM4WYM76UNXIPJTMDQJBFYUZ7QRYR]}}}`, `claim NATS nkey`},
		{`{tenant: acme, identify: {nats: {accounts: [ADLOM3MSL4CRX3AIAHNE7Y2WK7TKUR3DTJ4YZS5RDZJEFHDXKXQYE3SM]}}}`, `claim NATS account`},
		{`{tenant: acme, identify: {kafka: {saslPrincipals: [globex]}}}`, `claim SASL principal "globex"`},
		{`{tenant: acme, identify: {kafka: {clientIdPrefixes: [globex-]}}}`, `claim client.id prefix "globex-"`},
		{`{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme]}}}`, `claim client.id prefix "acme"`},
		{`{tenant: acme, identify: {tls: {subjects: ["CN=globex,O=Globex"]}}}`, `claim certificate subject "CN=globex,O=Globex"`},
		{`{tenant: acme, identify: {tls: {sans: ["spiffe://globex/orders"]}}}`, `claim certificate SAN "spiffe://globex/orders"`},
	} {
		name := fmt.Sprintf("claim-%d", i)
		if _, err := apply(team, lpGVR, obj(t, "{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: "+name+", namespace: team-a}, spec: "+c.spec+"}")); err != nil {
			t.Fatalf("RBAC lets team-a write its own LimitPolicies: %v", err)
		}
		waitCondition(t, k.admin, lpGVR, "team-a", name, "Accepted", metav1.ConditionFalse, "NotPermitted", c.why, 2*time.Second)
		if err := team.Resource(lpGVR).Namespace("team-a").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := k.stack.ControlPlaneStatus()
	if before.Active == nil || after.Active == nil || before.Active.Version != after.Active.Version {
		t.Errorf("policies outside their grant changed the version in force: %+v then %+v", before.Active, after.Active)
	}
	if got := k.maxPayload(t, "k8s-globex"); got != 8<<10 {
		t.Errorf("globex's connections saw max_payload %d, want 8192", got)
	}
}
