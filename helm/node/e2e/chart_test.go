package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/node"
)

// The release as a platform team installs it.
const (
	release   = "ws"
	gatewayNS = "weighstation"
	envoySvc  = "ws-weighstation-envoy"
	// natsNodePort is the clients' Service's fixed node port for NATS: clients on the node
	// connect to NodeIP:natsNodePort, and nats.advertise names it.
	natsNodePort = 30422
	teamNS       = "team-a"
)

func envoyHost() string { return envoySvc + "." + gatewayNS + ".svc.cluster.local" }

// gateway is what the chart's install set up.
type gateway struct {
	envoys, controlPlanes int
	caPEM                 []byte
	readyAfter            time.Duration
}

// installChart installs the chart with the values a platform team writes: the NATS cluster by
// its servers' names, Kafka discovered from its bootstrap Service, TLS from a Secret, policies
// as Kubernetes objects with the CRDs, and a GatewayDefaults whose grants admit team-a.
func installChart(t *testing.T, natsN, envoys int, drainSeconds int) *gateway {
	t.Helper()
	g := &gateway{envoys: envoys, controlPlanes: 2}
	k.must(t, "", "create", "namespace", gatewayNS)
	g.caPEM = tlsSecret(t, "gateway-tls", gatewayNS, []string{envoyHost(), envoySvc + "." + gatewayNS, envoySvc}, []string{node.NodeIP})

	values := fmt.Sprintf(`controlPlane:
  image: {repository: weighstation, tag: dev, pullPolicy: IfNotPresent}
  replicas: %[1]d
envoy:
  image: {repository: %[7]s, tag: "%[8]s", pullPolicy: IfNotPresent}
  replicas: %[2]d
  drainSeconds: %[3]d
  concurrency: 1
  resources:
    requests: {cpu: 50m, memory: 64Mi}
    limits: {memory: 512Mi}
  service:
    type: NodePort
    nodePorts: {nats: %[4]d}
nats:
  servers: [%[5]s]
  # The node's address: clients on the node and in pods alike reach the gateway there.
  advertise: ["%[6]s:%[4]d"]
kafka:
  brokers: []
  cluster:
    enabled: true
    bootstrap: kafka-bootstrap.kafka.svc.cluster.local:9092
    nodeIds: {first: 0, last: 2}
tls:
  secretName: gateway-tls
  nats:
    enabled: true
    port: 4443
policies:
  source: kubernetes
crds:
  install: true
`, g.controlPlanes, envoys, drainSeconds, natsNodePort, strings.Join(natsServers(natsN), ", "), node.NodeIP,
		repository(envoyImage), tagOf(envoyImage))
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	k.runHelm(t, "install", release, filepath.Join(root, "helm", "weighstation"), "-n", gatewayNS, "-f", valuesFile)
	// The platform's objects, once the release has installed the CRDs: the default tenant's
	// policy in the release's namespace, and grants by which team-a's namespace may define the
	// tenants orders and payments for its own identities.
	k.apply(t, `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: {name: default}
spec:
  defaultTenant: anonymous
  grants:
  - namespaces: [team-a]
    tenants: [orders, payments]
    identities:
      natsUsers: [orders, payments]
      clientIdPrefixes: ["orders-", "payments-"]
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: anonymous, namespace: weighstation}
spec:
  tenant: anonymous
  onLimit: reject
  limits: {maxMessageBytes: 64KiB, rate: {messagesPerSecond: 100}}
`)
	k.waitReady(t, gatewayNS, "app.kubernetes.io/component=control-plane", g.controlPlanes, 3*time.Minute)
	k.waitReady(t, gatewayNS, "app.kubernetes.io/component=envoy", envoys, 3*time.Minute)
	g.readyAfter = time.Since(begin)
	return g
}

// tlsSecret issues a certificate for names and ips from a CA of its own and stores it as the
// kubernetes.io/tls Secret name in ns; it returns the CA's PEM, which clients verify against.
func tlsSecret(t *testing.T, name, ns string, names, ips []string) []byte {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "team-platform-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, parseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	crt, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	k.must(t, "", "-n", ns, "create", "secret", "tls", name, "--cert", crt, "--key", keyFile)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func repository(image string) string { r, _, _ := strings.Cut(image, ":"); return r }
func tagOf(image string) string      { _, t, _ := strings.Cut(image, ":"); return t }
