package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/cluster"
)

// brokerAddresses are the brokers' own addresses, which a client that goes around the gateway
// would dial.
var brokerAddresses = []string{
	"nats-0.nats.nats.svc.cluster.local:4222",
	"kafka-0.kafka.kafka.svc.cluster.local:9092",
	"kafka-bootstrap.kafka.svc.cluster.local:9092",
}

// networkPolicies: with the chart's NetworkPolicies on (networkPolicy.brokers and .natsServers,
// selecting the StatefulSets' pods) and enforced (kube-network-policies), a client pod that
// dials a nats-server or a broker directly is refused, and the same client through the gateway
// is admitted. Before they are on, the same dials connect: the refusal is the policies'.
func networkPolicies(t *testing.T) {
	dial := func(name string) map[string]string {
		return startClient(t, name, "--mode", "dial", "--targets", strings.Join(brokerAddresses, ",")).wait(t, time.Minute).Dials
	}
	for target, outcome := range dial("netpol-before") {
		if outcome != "connected" {
			t.Fatalf("before the NetworkPolicies, %s: %s", target, outcome)
		}
	}
	values, err := k.Write("networkpolicy.yaml", `networkPolicy:
  enabled: true
  brokers:
    enabled: true
    namespace: kafka
    podSelector: {matchLabels: {app.kubernetes.io/name: null, app: kafka}}
    ports: [9092]
  natsServers:
    enabled: true
    namespace: nats
    podSelector: {matchLabels: {app.kubernetes.io/name: null, app: nats}}
    ports: [4222]
`)
	if err != nil {
		t.Fatal(err)
	}
	helm(t, "upgrade", cluster.Release, root+"/helm/weighstation", "-n", cluster.GatewayNS, "--reuse-values", "-f", values)
	time.Sleep(3 * time.Second) // the enforcer's informers
	for target, outcome := range dial("netpol-direct") {
		t.Logf("a team-a pod dialing %s directly: %s", target, outcome)
		if outcome == "connected" {
			t.Errorf("a team-a pod reached %s around the gateway", target)
		}
	}
	l := startLoad(t, "netpol", 1, 1, 20, 10*time.Second)
	for _, c := range l.clients {
		r := c.wait(t, 2*time.Minute)
		t.Logf("%s through the gateway: sent %d, acknowledged %d", r.Client, r.Sent, r.Acked)
		if r.Acked != r.Sent || r.Sent == 0 {
			t.Errorf("%s through the gateway with the NetworkPolicies on: %+v", r.Client, r)
		}
	}
	// The brokers' own traffic (routes, replication, the quorum) is still admitted.
	for _, w := range []struct {
		ns, labels string
		n          int
	}{{"nats", "app=nats", topo.NATS}, {"kafka", "app=kafka", topo.Kafka}} {
		if _, err := k.WaitReady(w.ns, w.labels, w.n, time.Minute); err != nil {
			t.Error(fmt.Errorf("with the NetworkPolicies on: %w", err))
		}
	}
}
