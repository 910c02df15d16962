package cluster

import (
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/weighstation/weighstation/helm/node/node"
)

// The release as a platform team installs it.
const (
	Release   = "ws"
	GatewayNS = "weighstation"
	EnvoySvc  = "ws-weighstation-envoy"
	// NATSNodePort is the clients' Service's fixed node port for NATS: clients on the node
	// connect to NodeIP:NATSNodePort, and nats.advertise names it.
	NATSNodePort = 30422
	EnvoyLabels  = "app.kubernetes.io/component=envoy"
	CPLabels     = "app.kubernetes.io/component=control-plane"
)

// EnvoyHost is the clients' Service's DNS name.
func EnvoyHost() string { return EnvoySvc + "." + GatewayNS + ".svc.cluster.local" }

// Gateway is what the chart's install set up.
type Gateway struct {
	// CA verifies the gateway's TLS certificate (the Secret gateway-tls).
	CA []byte
	// ReadyAfter is the time from helm install to every pod Ready.
	ReadyAfter time.Duration
}

// values are the chart's values as a platform team writes them: the NATS cluster by its
// servers' names, advertised at the node port; Kafka discovered from its bootstrap Service; TLS
// from a Secret; policies as Kubernetes objects, with the CRDs.
func values(t Topology, im Images) string {
	return fmt.Sprintf(`controlPlane:
  # Pinned by the digest make image printed, as docs/operations.md recommends.
  image: {repository: %[1]s, digest: "%[2]s", pullPolicy: IfNotPresent}
  replicas: %[3]d
envoy:
  image: {repository: %[4]s, tag: "%[5]s", pullPolicy: IfNotPresent}
  replicas: %[6]d
  drainSeconds: %[7]d
  concurrency: 1
  resources:
    requests: {cpu: 50m, memory: 64Mi}
    limits: {memory: 512Mi}
  service:
    type: NodePort
    nodePorts: {nats: %[8]d}
nats:
  servers: [%[9]s]
  # The node's address: clients on the node and in pods alike reach the gateway there.
  advertise: ["%[10]s:%[8]d"]
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
`, Repository(im.ControlPlane), im.ControlPlaneDigest, t.ControlPlanes, Repository(im.Envoy), Tag(im.Envoy), t.Envoys,
		t.DrainSeconds, NATSNodePort, strings.Join(NATSServers(t.NATS), ", "), node.NodeIP)
}

// platform is the platform's objects, once the release has installed the CRDs: the default
// tenant's policy in the release's namespace, and grants by which team-a's namespace may define
// the tenants orders, payments and shipments for its own identities.
const platform = `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: {name: default}
spec:
  defaultTenant: anonymous
  grants:
  - namespaces: [team-a]
    tenants: [orders, payments, shipments]
    identities:
      natsUsers: [orders, payments, shipments]
      clientIdPrefixes: ["orders-", "payments-", "shipments-"]
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: anonymous, namespace: weighstation}
spec:
  tenant: anonymous
  onLimit: reject
  limits: {maxMessageBytes: 64KiB, rate: {messagesPerSecond: 100}}
`

// InstallChart installs the chart from chartDir as the platform team does: the TLS Secret, the
// release, the platform's objects; then waits for every pod.
func (k *Kube) InstallChart(chartDir string, t Topology, im Images) (*Gateway, error) {
	g := &Gateway{}
	if _, err := k.Run("", "create", "namespace", GatewayNS); err != nil {
		return nil, err
	}
	crt, key, ca, err := k.certificate([]string{EnvoyHost(), EnvoySvc + "." + GatewayNS, EnvoySvc}, []string{node.NodeIP})
	if err != nil {
		return nil, err
	}
	g.CA = ca
	if _, err := k.Run("", "-n", GatewayNS, "create", "secret", "tls", "gateway-tls", "--cert", crt, "--key", key); err != nil {
		return nil, err
	}
	valuesFile, err := k.Write("values.yaml", values(t, im))
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	if _, err := k.RunHelm("install", Release, chartDir, "-n", GatewayNS, "-f", valuesFile); err != nil {
		return nil, err
	}
	if err := k.Apply("platform.yaml", platform, ""); err != nil {
		return nil, err
	}
	if _, err := k.Run("", "-n", GatewayNS, "rollout", "status", "deployment/"+EnvoySvc, "--timeout", "3m"); err != nil {
		return nil, fmt.Errorf("%w%s", err, k.Diagnose(GatewayNS, EnvoyLabels))
	}
	for _, w := range []struct {
		labels string
		n      int
	}{{CPLabels, t.ControlPlanes}, {EnvoyLabels, t.Envoys}} {
		if _, err := k.WaitReady(GatewayNS, w.labels, w.n, 3*time.Minute); err != nil {
			return nil, err
		}
	}
	g.ReadyAfter = time.Since(begin)
	return g, nil
}

// certificate issues a certificate for names and ips from a CA of its own, written as tls.crt
// and tls.key into Manifests; it returns their paths and the CA's PEM.
func (k *Kube) certificate(names, ips []string) (crtPath, keyPath string, caPEM []byte, err error) {
	ca, err := node.NewCA("team-platform-ca")
	if err != nil {
		return "", "", nil, err
	}
	crt, key, err := ca.Issue(names[0], nil, x509.ExtKeyUsageServerAuth, names, ips)
	if err != nil {
		return "", "", nil, err
	}
	if crtPath, err = k.Write("tls.crt", string(crt)); err != nil {
		return "", "", nil, err
	}
	if keyPath, err = k.Write("tls.key", string(key)); err != nil {
		return "", "", nil, err
	}
	return crtPath, keyPath, ca.PEM, nil
}
