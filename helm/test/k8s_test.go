//go:build k8s

// `make test-k8s` (not part of make test): the chart installed into a real kube-apiserver, built
// from the k8s.io/kubernetes module with etcd from go.etcd.io/etcd/server/v3 (helm/k8s/tools).
// There are no nodes, controllers or schedulers: what is tested is that the API server accepts
// every object of every value set, server-side dry run first, then for real.

package charttest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	kubeAPIServer = os.Getenv("KUBE_APISERVER")
	etcdBin       = os.Getenv("ETCD")
)

const adminToken = "weighstation-test-admin-token"

func TestK8sAPIServerAcceptsEveryValueSet(t *testing.T) {
	if kubeAPIServer == "" || etcdBin == "" {
		t.Fatal("KUBE_APISERVER and ETCD must name the binaries (make test-k8s builds them)")
	}
	dir := t.TempDir()
	logs := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"etcd.log", "kube-apiserver.log"} {
				b, _ := os.ReadFile(filepath.Join(logs, f))
				t.Logf("%s:\n%s", f, tail(string(b), 4000))
			}
		}
	})
	ports := freePorts(t, 3)
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]

	start(t, filepath.Join(logs, "etcd.log"), etcdBin,
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--unsafe-no-fsync")
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/health", etcdClient), 200, 30*time.Second)

	saKey := filepath.Join(dir, "sa.key")
	writeRSAKey(t, saKey)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, filepath.Join(logs, "kube-apiserver.log"), kubeAPIServer,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(apiPort), "--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/16")
	api := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitAPI(t, client, api+"/readyz", 90*time.Second)

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, api, adminToken)), 0o600); err != nil {
		t.Fatal(err)
	}

	// The Prometheus Operator's kinds must exist for the ServiceMonitors and PrometheusRule.
	// Their fields are checked by the operator's Go types in TestValueSetsLintRenderAndValidateStrictly;
	// here only the API groups are needed.
	for _, crd := range []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}} {
		apiCall(t, client, "POST", api+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": crd.plural + ".monitoring.coreos.com"},
			"spec": map[string]any{
				"group": "monitoring.coreos.com", "scope": "Namespaced",
				"names": map[string]any{"kind": crd.kind, "plural": crd.plural, "singular": strings.ToLower(crd.kind), "listKind": crd.kind + "List"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}, 201)
	}
	time.Sleep(2 * time.Second) // CRD establishment

	// The check can fail: a value only the API server judges (an invalid CIDR) is refused. (Helm's
	// --dry-run=server renders with the server's capabilities but submits nothing: only a real
	// install has the server validate the objects.)
	t.Run("server-side validation", func(t *testing.T) {
		_, stderr, code := run(t, nil, helmBin, "install", "bad", chartDir, "--kubeconfig", kubeconfig, "-n", "ws-bad", "--create-namespace",
			"--set", "envoy.service.type=LoadBalancer", "--set", "envoy.service.loadBalancerSourceRanges={10.0.0.0/33}")
		if code == 0 || !strings.Contains(stderr, `"10.0.0.0/33": must be a valid CIDR`) {
			t.Errorf("an invalid CIDR was not refused by the API server: exit %d %s", code, stderr)
		}
	})

	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			ns := "ws-" + name
			// Objects in another namespace (networkPolicy.brokers, networkPolicy.natsServers:
			// the brokers' and the NATS servers' own) need it to exist, as it does in a cluster.
			for _, o := range mustRender(t, []string{file}) {
				if other, _ := get(o, "metadata", "namespace").(string); other != "" && other != namespace {
					if code, out := apiRequest(t, client, "POST", api+"/api/v1/namespaces", map[string]any{
						"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": other}}); code != 201 && code != 409 {
						t.Fatalf("namespace %s: %d %s", other, code, out)
					}
				}
			}
			base := []string{"install", "gw", chartDir, "--kubeconfig", kubeconfig, "-n", ns, "--create-namespace", "-f", file}
			if out, stderr, code := run(t, nil, helmBin, append(base, "--dry-run=server")...); code != 0 {
				t.Fatalf("helm install --dry-run=server: exit %d\n%s%s", code, tail(out, 2000), stderr)
			}
			if out, stderr, code := run(t, nil, helmBin, base...); code != 0 {
				t.Fatalf("helm install: exit %d\n%s%s", code, tail(out, 2000), stderr)
			}
			// Every rendered object is now stored by the API server.
			manifest, stderr, code := run(t, nil, helmBin, "get", "manifest", "gw", "--kubeconfig", kubeconfig, "-n", ns)
			if code != 0 {
				t.Fatalf("helm get manifest: %s", stderr)
			}
			objs := parseManifests(t, manifest)
			for _, o := range objs {
				path := objectPath(o, ns)
				if got := apiGet(t, client, api+path); got != 200 {
					t.Errorf("%s %s: GET %s returned %d", o.kind(), o.name(), path, got)
				}
			}
			t.Logf("%d objects accepted", len(objs))
		})
	}
}

var resourcePaths = map[string]string{
	"ServiceAccount":          "/api/v1/namespaces/%s/serviceaccounts/",
	"Service":                 "/api/v1/namespaces/%s/services/",
	"ConfigMap":               "/api/v1/namespaces/%s/configmaps/",
	"Deployment":              "/apis/apps/v1/namespaces/%s/deployments/",
	"PodDisruptionBudget":     "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/",
	"HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/%s/horizontalpodautoscalers/",
	"NetworkPolicy":           "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies/",
	"ServiceMonitor":          "/apis/monitoring.coreos.com/v1/namespaces/%s/servicemonitors/",
	"PrometheusRule":          "/apis/monitoring.coreos.com/v1/namespaces/%s/prometheusrules/",
}

// objectPath is where the API server keeps an object: in its own namespace when it names one,
// else in the release's.
func objectPath(o object, ns string) string {
	p, ok := resourcePaths[o.kind()]
	if !ok {
		return "/unknown-kind/" + o.kind()
	}
	if own, _ := get(o, "metadata", "namespace").(string); own != "" {
		ns = own
	}
	return fmt.Sprintf(p, ns) + o.name()
}

func writeRSAKey(t *testing.T, path string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func apiRequest(t *testing.T, c *http.Client, method, url string, body any) (int, string) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.String()
}

func apiCall(t *testing.T, c *http.Client, method, url string, body any, want int) {
	t.Helper()
	if code, out := apiRequest(t, c, method, url, body); code != want {
		t.Fatalf("%s %s: %d %s", method, url, code, out)
	}
}

func apiGet(t *testing.T, c *http.Client, url string) int {
	code, _ := apiRequest(t, c, "GET", url, nil)
	return code
}

func waitAPI(t *testing.T, c *http.Client, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := apiRequest(t, c, "GET", url, nil)
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s after %v", url, code, tail(body, 1000), timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
