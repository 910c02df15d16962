package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/cluster"
)

// load is the fixed-rate load of one event: payments' JetStream publishers (Nats-Msg-Id,
// retried until acknowledged) and idempotent Kafka producers, each a pod of its own, which the
// Service spreads over the Envoy pods.
type load struct {
	name    string
	clients []clientPod
}

// startLoad starts nats JetStream clients and kafka producers named after the event, each at
// rate for d.
func startLoad(t *testing.T, event string, nats, kafka, rate int, d time.Duration) *load {
	t.Helper()
	l := &load{name: event}
	for i := 0; i < nats; i++ {
		l.clients = append(l.clients, startClient(t, fmt.Sprintf("payments-%s-js-%d", event, i), "--mode", "nats-js",
			"--url", "nats://"+cluster.EnvoyHost()+":4222", "--user", "payments", "--subject", "orders.paid",
			"--rate", fmt.Sprint(rate), "--duration", d.String()))
	}
	for i := 0; i < kafka; i++ {
		l.clients = append(l.clients, startClient(t, fmt.Sprintf("payments-%s-kafka-%d", event, i), "--mode", "kafka",
			"--bootstrap", cluster.EnvoyHost()+":9092", "--topic", topicName, "--rate", fmt.Sprint(rate), "--duration", d.String()))
	}
	return l
}

// finish waits for every client and checks them against the brokers: nothing lost or
// duplicated, nothing given up, every client told only the gateway's addresses. It logs one
// line per client (the table's figures) and returns the reports by client.
func (l *load) finish(t *testing.T) map[string]report {
	t.Helper()
	reports := map[string]report{}
	for _, c := range l.clients {
		reports[c.name] = c.wait(t, 5*time.Minute)
	}
	stored, keys := storedMsgIDs(t), storedKeys(t)
	for _, c := range l.clients {
		r := reports[c.name]
		ids := stored
		if r.Mode == "kafka" {
			ids = keys
		}
		lost, dup := ledger(t, r, ids)
		t.Logf("%s: sent %d, acknowledged %d, gave up %d, lost %d, duplicated %d, reconnects %d, longest gap %dms",
			r.Client, r.Sent, r.Acked, r.GaveUp, lost, dup, r.Reconnects, r.LongestGapMs)
		if lost > 0 || dup > 0 || r.GaveUp > 0 || r.Acked != r.Sent {
			t.Errorf("%s through %s: %+v, lost %d, duplicated %d", r.Client, l.name, r, lost, dup)
		}
		learntOnlyTheGateway(t, r)
	}
	return reports
}

// natsConnections maps NATS client names to the address nats-server sees them from (the Envoy
// pod that carries them), asked of every server's /connz.
func natsConnections(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ip := range podIPs(t, "nats", "app=nats") {
		resp, err := http.Get("http://" + ip + ":8222/connz?limit=4096")
		if err != nil {
			t.Fatalf("connz: %v", err)
		}
		var connz struct {
			Connections []struct {
				Name string `json:"name"`
				IP   string `json:"ip"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&connz)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range connz.Connections {
			if c.Name != "" {
				out[c.Name] = c.IP
			}
		}
	}
	return out
}

// controlPlaneStatus is one control plane replica's /status: the active policy version and
// the version each Envoy connected to it acknowledged.
type controlPlaneStatus struct {
	Active struct {
		Version string `json:"version"`
	} `json:"active"`
	Nodes []struct {
		ID            string `json:"id"`
		Connected     bool   `json:"connected"`
		AckedVersion  string `json:"ackedVersion"`
		NackedVersion string `json:"nackedVersion"`
		NackReason    string `json:"nackReason"`
		Workers       []struct {
			Protocol string `json:"protocol"`
			Version  string `json:"version"`
			Replicas int    `json:"replicas"`
		} `json:"workers"`
	} `json:"nodes"`
}

func statusOf(ip string) (controlPlaneStatus, error) {
	var s controlPlaneStatus
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + ip + ":18080/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// versionHash is the content part of a policy version (<generation>-<hash>): the same policies
// have the same hash on every control plane replica, whatever its generation count.
func versionHash(v string) string {
	_, h, _ := strings.Cut(v, "-")
	return h
}
