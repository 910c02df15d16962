package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weighstation/weighstation/control-plane/internal/apiserver"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

const platformNS = "weighstation"

// The platform's objects: the default tenant (64KiB messages) and grants for two teams.
const k8sDefaults = `
apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: {name: default}
spec:
  defaultTenant: k8s-default
  grants:
  - namespaces: [team-a]
    tenants: [acme]
    identities:
      natsUsers: ["k8s-acme*"]
      clientIdPrefixes: ["acme-"]
      saslPrincipals: [acme]
      tlsSubjects: ["CN=acme,O=Acme"]
      tlsSans: ["spiffe://acme/*"]
  - namespaces: [team-b]
    tenants: [globex]
    identities: {natsUsers: [k8s-globex]}
`

const k8sDefaultTenant = `
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: default-tenant, namespace: weighstation}
spec:
  tenant: k8s-default
  limits: {maxMessageBytes: 64KiB}
`

const k8sGlobex = `
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: globex, namespace: team-b}
spec:
  tenant: globex
  identify: {nats: {users: [k8s-globex]}}
  limits: {maxMessageBytes: 8KiB}
`

// acmePolicy is team-a's policy: messagesPerSecond in reject mode, and a maxMessageBytes each
// connection sees as its max_payload.
func acmePolicy(maxBytes string, perSecond int) string {
	return fmt.Sprintf(`
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: acme, namespace: team-a}
spec:
  tenant: acme
  identify: {nats: {users: [k8s-acme]}}
  onLimit: reject
  limits:
    maxMessageBytes: %s
    rate: {messagesPerSecond: %d, burstMessages: %d}
`, maxBytes, perSecond, perSecond)
}

// k8sStack is a real kube-apiserver and etcd, and a local stack (Envoy, nats-server) whose
// control plane takes its policies from them.
type k8sStack struct {
	api      *apiserver.Server
	admin    dynamic.Interface
	kube     kubernetes.Interface
	stack    *localstack.Stack
	ports    localstack.Ports
	wasmFile string
	// controlPlaneKubeconfig is the chart's control plane ServiceAccount, with the RBAC the
	// chart renders and nothing more.
	controlPlaneKubeconfig string
}

// chartRBAC applies the RBAC the chart renders for policy objects (release gw in platformNS)
// and returns a kubeconfig of the control plane's ServiceAccount.
func (k *k8sStack) chartRBAC(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, ".tools/bin/helm"), "template", "gw", filepath.Join(root, "helm/weighstation"),
		"-n", platformNS, "--set", "policies.source=kubernetes", "--show-only", "templates/rbac.yaml").Output()
	if err != nil {
		t.Fatalf("helm template (make tools-helm installs helm): %v", err)
	}
	gvrs := map[string]schema.GroupVersionResource{
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	applied := 0
	for _, doc := range strings.Split(string(out), "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
			continue
		}
		u := obj(t, doc)
		gvr, ok := gvrs[u.GetKind()]
		if !ok {
			t.Fatalf("the chart's RBAC renders a %s", u.GetKind())
		}
		ns := ""
		if strings.HasPrefix(u.GetKind(), "Role") {
			ns = platformNS
			u.SetNamespace(ns)
		}
		if _, err := resource(k.admin, gvr, ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		applied++
	}
	if applied != 5 {
		t.Fatalf("the chart's RBAC: %d objects, want 5", applied)
	}
	const sa = "gw-weighstation-control-plane"
	if _, err := k.kube.CoreV1().ServiceAccounts(platformNS).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := k.kube.CoreV1().ServiceAccounts(platformNS).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := k.api.Kubeconfig("control-plane", tok.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func startK8sStack(t *testing.T) *k8sStack {
	t.Helper()
	bin := filepath.Join(root, ".tools/k8s/bin")
	api, err := apiserver.Start(t.TempDir(), filepath.Join(bin, "kube-apiserver"), filepath.Join(bin, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	kubeconfig, err := api.Kubeconfig("admin", apiserver.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	k := &k8sStack{api: api, admin: dynamicClient(t, kubeconfig)}
	cfg, _ := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if k.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	installCRDs(t, k.admin)
	for _, ns := range []string{platformNS, "team-a", "team-b"} {
		if _, err := k.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k.controlPlaneKubeconfig = k.chartRBAC(t)
	mustApply(t, k.admin, gwdGVR, k8sDefaults)
	mustApply(t, k.admin, lpGVR, k8sDefaultTenant)
	mustApply(t, k.admin, lpGVR, k8sGlobex)

	work := t.TempDir()
	if k.ports, err = localstack.FreePorts(); err != nil {
		t.Fatal(err)
	}
	k.wasmFile = filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm")
	k.stack, err = localstack.Start(context.Background(), localstack.Config{
		ToolsDir: filepath.Join(root, ".tools"), WasmFile: k.wasmFile, WorkDir: work, Ports: k.ports, EnvoyConcurrency: 1,
		ExtraNATSUsers: []string{"k8s-acme", "k8s-globex", "k8s-nobody"},
		Kubernetes:     &localstack.KubernetesPolicies{Kubeconfig: k.controlPlaneKubeconfig, Namespace: platformNS},
	})
	if err != nil {
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.stack.Stop()
		if t.Failed() {
			localstack.PrintLogTails(k.stack.LogDir())
		}
	})
	return k
}

// nacked says whether the control plane's /status shows a gateway refusing its version.
func (k *k8sStack) nacked() bool {
	st, err := k.stack.ControlPlaneStatus()
	if err != nil || st.Active == nil {
		return false
	}
	for _, n := range st.Nodes {
		if n.Connected && n.NackedVersion != "" && n.NackedVersion == st.Active.Version {
			return true
		}
	}
	return false
}

// maxPayload is the max_payload a new connection of user is told: its tenant's maxMessageBytes.
func (k *k8sStack) maxPayload(t *testing.T, user string) int64 {
	t.Helper()
	nc := connectNATS(t, k.ports.NATS, user, user+"-secret")
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc.MaxPayload()
}

// waitMaxPayload waits until new connections of user see want, and returns how long it took.
func (k *k8sStack) waitMaxPayload(t *testing.T, user string, want int64, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got int64
	for time.Since(start) < timeout {
		if got = k.maxPayload(t, user); got == want {
			return time.Since(start)
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("connections of %s saw max_payload %d, not %d, for %s", user, got, want, timeout)
	return 0
}

// publisher is one open connection that counts the refusals it is told of.
type publisher struct {
	nc      *nats.Conn
	refused atomic.Int64
}

func (k *k8sStack) publisher(t *testing.T, user string) *publisher {
	p := &publisher{}
	p.nc = connectNATS(t, k.ports.NATS, user, user+"-secret", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if strings.Contains(err.Error(), "Permissions Violation") {
			p.refused.Add(1)
		}
	}))
	return p
}

// burst publishes n messages at once and returns how many were refused.
func (p *publisher) burst(t *testing.T, n int) int64 {
	t.Helper()
	before := p.refused.Load()
	for i := range n {
		if err := p.nc.Publish("k8s.orders", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the refusals' -ERRs follow the PONG on the same connection
	return p.refused.Load() - before
}

func TestKubernetesPolicies(t *testing.T) {
	k := startK8sStack(t)
	a := k.admin
	whole := t // connections that outlive a subtest
	programmedWithin := 2 * time.Second

	t.Run("a bad object is refused at apply with its field path", func(t *testing.T) {
		for _, c := range []struct{ spec, path, reason string }{
			{`{tenant: bad, limits: {inFlight: 0}}`, "spec.limits.inFlight", "must be at least 1"},
			{`{tenant: bad, limits: {queue: {maxMessages: -1}}}`, "spec.limits.queue.maxMessages", "must not be negative"},
			{`{tenant: bad, limits: {maxMessageBytes: 1MB}}`, "spec.limits.maxMessageBytes", "should match"},
			{`{tenant: bad, identify: {nats: {nkeys: [nope]}}}`, "spec.identify.nats.nkeys[0]", "should match"},
			{`{tenant: bad, mode: fast}`, "spec.mode", "Unsupported value"},
			{`{tenant: Bad_Name}`, "spec.tenant", "should match"},
			{`{tenant: bad, limitz: {}}`, "spec.limitz", "unknown field"},
			{`{tenant: bad, identify: {kafka: {oauthClaim: sub}}}`, "spec.identify.kafka.oauthClaim", "set saslPrincipals too"},
			{`{tenant: bad, overrides: [{match: {nats: [a.>]}, limits: {queue: {maxMessages: 5}}}]}`, "spec.overrides[0].limits.queue", "unknown field"},
			{`{tenant: bad, overrides: [{match: {}, limits: {}}]}`, "spec.overrides[0].match", "name at least one nats or kafka pattern"},
		} {
			_, err := apply(a, lpGVR, obj(t, "{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: bad, namespace: team-a}, spec: "+c.spec+"}"))
			if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("spec %s: want a refusal naming %s (%s), got %v", c.spec, c.path, c.reason, err)
			}
		}
		_, err := apply(a, gwdGVR, obj(t, `{apiVersion: weighstation.io/v1alpha1, kind: GatewayDefaults, metadata: {name: bad}, spec: {defaultTenant: x, quotaService: {address: "q:1", timeout: 9s}}}`))
		if err == nil || !strings.Contains(err.Error(), "spec.quotaService.timeout") || !strings.Contains(err.Error(), "10ms..5s") {
			t.Errorf("a 9s quota timeout: want a refusal naming spec.quotaService.timeout, got %v", err)
		}
	})

	var acme *publisher
	t.Run("a LimitPolicy applied is enforced within 2s and Programmed 1/1", func(t *testing.T) {
		if got := k.maxPayload(t, "k8s-acme"); got != 64<<10 {
			t.Fatalf("before its policy, acme's user is the default tenant's (max_payload 65536), got %d", got)
		}
		start := time.Now()
		mustApply(t, a, lpGVR, acmePolicy("4KiB", 20))
		k.waitMaxPayload(t, "k8s-acme", 4<<10, programmedWithin)
		enforced := time.Since(start)
		waitCondition(t, a, lpGVR, "team-a", "acme", "Accepted", metav1.ConditionTrue, "Accepted", "", programmedWithin)
		waitCondition(t, a, lpGVR, "team-a", "acme", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", programmedWithin-time.Since(start))
		t.Logf("enforced on new connections %s after the apply; Programmed=True 1/1 after %s", enforced.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		acme = k.publisher(whole, "k8s-acme")
		if refused := acme.burst(t, 100); refused < 50 {
			t.Errorf("100 messages at once against 20/s (burst 20) in reject mode: %d refused, want at least 50", refused)
		}
	})

	t.Run("an edit applies to connections already open", func(t *testing.T) {
		time.Sleep(time.Second) // a second of rate back in the bucket
		mustApply(t, a, lpGVR, acmePolicy("4KiB", 5000))
		waitCondition(t, a, lpGVR, "team-a", "acme", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", programmedWithin)
		if refused := acme.burst(t, 100); refused != 0 {
			t.Errorf("after raising the rate to 5000/s, the open connection had %d of 100 refused", refused)
		}
		mustApply(t, a, lpGVR, acmePolicy("4KiB", 20))
		waitCondition(t, a, lpGVR, "team-a", "acme", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", programmedWithin)
		if refused := acme.burst(t, 100); refused < 50 {
			t.Errorf("after lowering the rate to 20/s again, the open connection had %d of 100 refused, want at least 50", refused)
		}
	})

	t.Run("a conflicting object is refused while the rest stays enforced", func(t *testing.T) {
		mustApply(t, a, lpGVR, `{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: acme-again, namespace: team-a}, spec: {tenant: acme, identify: {nats: {users: [k8s-acme-2]}}}}`)
		waitCondition(t, a, lpGVR, "team-a", "acme-again", "Accepted", metav1.ConditionFalse, "Conflicted", `tenant "acme" already has a LimitPolicy at LimitPolicy team-a/acme`, programmedWithin)
		mustApply(t, a, lpGVR, `{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: stealer, namespace: weighstation}, spec: {tenant: stealer, identify: {nats: {users: [k8s-acme]}}}}`)
		waitCondition(t, a, lpGVR, platformNS, "stealer", "Accepted", metav1.ConditionFalse, "Conflicted", `NATS user "k8s-acme" already identifies tenant "acme"`, programmedWithin)
		waitCondition(t, a, lpGVR, platformNS, "stealer", "Programmed", metav1.ConditionFalse, "NotInForce", "", programmedWithin)
		// The others stay in force and keep being updated.
		mustApply(t, a, lpGVR, acmePolicy("2KiB", 20))
		k.waitMaxPayload(t, "k8s-acme", 2<<10, programmedWithin)
		waitCondition(t, a, lpGVR, "team-a", "acme", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", programmedWithin)
		if got := k.maxPayload(t, "k8s-globex"); got != 8<<10 {
			t.Errorf("globex's connections saw max_payload %d, want 8192", got)
		}
		deleteObject(t, a, lpGVR, "team-a", "acme-again")
		deleteObject(t, a, lpGVR, platformNS, "stealer")
	})

	t.Run("a client burst that can empty its tenant's is accepted with a warning naming its field", func(t *testing.T) {
		mustApply(t, a, lpGVR, `{apiVersion: weighstation.io/v1alpha1, kind: LimitPolicy, metadata: {name: warned, namespace: weighstation},
			spec: {tenant: warned, identify: {nats: {users: [k8s-warned]}}, limits: {rate: {messagesPerSecond: 300, burstMessages: 50}},
			clients: {named: [{match: {nats: [warned-a]}, limits: {rate: {messagesPerSecond: 100, burstMessages: 100}}}]}}}`)
		_, c := waitCondition(t, a, lpGVR, platformNS, "warned", "Accepted", metav1.ConditionTrue, "Accepted",
			"in force; warning: spec.clients.named[0].limits.rate.burstMessages: 100 is at least the tenant's burst (50)", programmedWithin)
		t.Logf("Accepted: %s", c.Message)
		waitCondition(t, a, lpGVR, platformNS, "warned", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", programmedWithin)
		with, err := k.stack.ControlPlaneStatus()
		if err != nil || with.Active == nil {
			t.Fatalf("control plane status: %v %+v", err, with.Active)
		}
		deleteObject(t, a, lpGVR, platformNS, "warned")
		// The next subtest compares versions: the one without it is published first.
		eventually(t, programmedWithin, "the set without the warned policy published", func() bool {
			st, err := k.stack.ControlPlaneStatus()
			return err == nil && st.Active != nil && st.Active.Version != with.Active.Version
		})
	})

	t.Run("a team cannot reach another tenant", func(t *testing.T) { testTeamCannotReachAnotherTenant(t, k) })
	t.Log("kubectl get limitpolicies -A:\n" + k.table(t, "/apis/weighstation.io/v1alpha1/limitpolicies"))

	t.Run("a delete returns the tenant's traffic to the default tenant", func(t *testing.T) {
		start := time.Now()
		deleteObject(t, a, lpGVR, "team-a", "acme")
		k.waitMaxPayload(t, "k8s-acme", 64<<10, programmedWithin)
		t.Logf("acme's new connections were the default tenant's %s after the delete", time.Since(start).Round(time.Millisecond))
		p := k.publisher(t, "k8s-acme")
		if refused := p.burst(t, 100); refused != 0 {
			t.Errorf("as the default tenant (10000/s), %d of 100 were refused", refused)
		}
	})

	t.Run("control plane replicas take turns writing status", func(t *testing.T) { testReplicasTakeTurns(t, k) })

	t.Run("a NACK shows on status, and status converges after a restart", func(t *testing.T) {
		notAModule := filepath.Join(t.TempDir(), "not-a-module.wasm")
		if err := os.WriteFile(notAModule, []byte("not wasm"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := k.stack.RestartControlPlane("--wasm-file", notAModule); err != nil {
			t.Fatal(err)
		}
		// The NACK as the control plane's /status records it, then the object's status.
		deadline := time.Now().Add(20 * time.Second)
		for !k.nacked() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		took, c := waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionFalse, "Rejected", "0/1 gateways", 2*time.Second)
		t.Logf("with a filter module Envoy cannot load, %s after the NACK: %s", took.Round(time.Millisecond), c.Message)
		if got := k.maxPayload(t, "k8s-globex"); got != 8<<10 {
			t.Errorf("while its configuration was refused, Envoy kept the last one: want max_payload 8192, got %d", got)
		}
		if err := k.stack.RestartControlPlane(); err != nil {
			t.Fatal(err)
		}
		for _, o := range []struct{ ns, name string }{{"team-b", "globex"}, {platformNS, "default-tenant"}} {
			waitCondition(t, a, lpGVR, o.ns, o.name, "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 20*time.Second)
			waitCondition(t, a, lpGVR, o.ns, o.name, "Accepted", metav1.ConditionTrue, "Accepted", "", 2*time.Second)
		}
		waitCondition(t, a, gwdGVR, "", "default", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 2*time.Second)
	})

	t.Run("an invalid edit leaves the last accepted generation in force, across a restart", func(t *testing.T) {
		gen := mustApply(t, a, lpGVR, strings.Replace(k8sGlobex, "maxMessageBytes: 8KiB", "maxMessageBytes: 8KiB, rate: {bytesPerSecond: 1MiB, burstBytes: 1KiB}", 1)).GetGeneration()
		_, c := waitCondition(t, a, lpGVR, "team-b", "globex", "Accepted", metav1.ConditionFalse, "Invalid", fmt.Sprintf("(generation %d stays in force)", gen-1), 2*time.Second)
		t.Logf("generation %d: %s", gen, c.Message)
		if err := k.stack.RestartControlPlane(); err != nil {
			t.Fatal(err)
		}
		// The restarted control plane has only the status to know generation gen-1 by; once
		// Envoy holds what it publishes, globex's connections show what is in force.
		if err := k.stack.WaitInSync(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionTrue, "Programmed", fmt.Sprintf("1/1 gateways (generation %d)", gen-1), 20*time.Second)
		if got := k.maxPayload(t, "k8s-globex"); got != 8<<10 {
			t.Errorf("after the restart, globex's connections saw max_payload %d, want generation %d's 8192", got, gen-1)
		}
		mustApply(t, a, lpGVR, k8sGlobex)
		waitCondition(t, a, lpGVR, "team-b", "globex", "Accepted", metav1.ConditionTrue, "Accepted", "", 2*time.Second)
	})

	t.Run("a tenant team sees its limits at work", func(t *testing.T) { testTeamSeesItsLimitsAtWork(t, k) })
}
