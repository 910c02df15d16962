package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/helm/node/cluster"
	"github.com/weighstation/weighstation/helm/node/node"
)

// TestTheChartOnANode sets up the brokers and the chart as a platform team does and team-a's
// policies as its editor does (package cluster, the quick start of docs/operations.md), then
// runs the team's clients as pods through the gateway's Service: held to the limit on each Envoy
// pod, then an Envoy rollout under fixed-rate load, counted at the brokers.
func TestTheChartOnANode(t *testing.T) {
	g, err := k.Setup(root+"/helm/weighstation", topo, im, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	setup := append([]string(nil), k.Transcript...)
	t.Run("the quick start lists the commands run, in order", func(t *testing.T) { quickStartMatches(t, setup) })
	createStream(t, topo.NATS)
	createTopic(t, topo.Kafka)
	t.Run("a client on the node connects through the NodePort", nodePortClient)
	t.Run("a TLS client verifies the gateway's certificate from the Secret", func(t *testing.T) { tlsClient(t, g.CA) })
	t.Run("each Envoy pod holds its clients to the limit", func(t *testing.T) { heldToTheLimit(t, topo.Envoys) })
	t.Run("an Envoy rollout under load loses and duplicates nothing", func(t *testing.T) { rolloutUnderLoad(t, topo.Envoys, topo.DrainSeconds) })
	if full() {
		theTable(t)
	}
}

// testLog writes to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// heldToTheLimit offers orders four times its limit over eight NATS connections, which the
// Service spreads over the Envoy pods. Every pod that refused some was admitting exactly its
// limit (±5%), counted from its own metrics over a steady window.
func heldToTheLimit(t *testing.T, envoys int) {
	offered := 4 * cluster.OrdersRate * envoys
	pub := startClient(t, "orders-pub", "--mode", "nats-pub", "--url", "nats://"+cluster.EnvoyHost()+":4222", "--user", "orders",
		"--subject", "orders.created", "--rate", strconv.Itoa(offered), "--duration", "25s", "--connections", "8")
	names := []string{"weighstation_messages_accepted", "weighstation_messages_refused"}
	time.Sleep(8 * time.Second) // connected, past the first burst
	begin, t0 := envoyCounters(t, names...), time.Now()
	time.Sleep(10 * time.Second)
	end, t1 := envoyCounters(t, names...), time.Now()
	r := pub.wait(t, 2*time.Minute)
	learntOnlyTheGateway(t, r)
	if r.Refused == 0 || r.Errors > 0 {
		t.Errorf("orders-pub, 4× over its limit: %+v", r)
	}
	limited := 0
	for pod := range end {
		key := "weighstation_messages_accepted{nats,orders}"
		accepted := (end[pod][key] - begin[pod][key]) / t1.Sub(t0).Seconds()
		refused := end[pod]["weighstation_messages_refused{nats,orders}"] - begin[pod]["weighstation_messages_refused{nats,orders}"]
		t.Logf("%s: orders admitted %.1f/s (limit %d/s), %0.f refused", pod, accepted, cluster.OrdersRate, refused)
		if refused == 0 {
			continue
		}
		limited++
		if accepted < 0.95*cluster.OrdersRate || accepted > 1.05*cluster.OrdersRate {
			t.Errorf("%s admitted orders at %.1f/s while refusing: not its limit %d/s ±5%%", pod, accepted, cluster.OrdersRate)
		}
	}
	if limited == 0 {
		t.Error("no Envoy pod was over orders' limit: the load did not reach the gateway")
	}
	// status.usage and kubectl describe show it to the team.
	describe := asEditor(t, "-n", cluster.TeamNS, "describe", "limitpolicy", "orders")
	if !strings.Contains(describe, "Usage") {
		t.Errorf("kubectl describe limitpolicy orders shows no usage:\n%s", describe)
	}
}

// rolloutUnderLoad runs payments' JetStream and Kafka publishers at a fixed rate, rolls the
// Envoy pods with a values change (helm upgrade), and counts at the brokers: nothing lost or
// duplicated, every client back through the Service, and each old pod drained (its listeners)
// before its SIGTERM.
func rolloutUnderLoad(t *testing.T, envoys, drain int) {
	old := podIPs(t, cluster.GatewayNS, cluster.EnvoyLabels)
	logs := followLogs(t, old)
	// Long enough for every pod to be replaced (about drainSeconds plus a few seconds each).
	duration := fmt.Sprintf("%ds", 20+envoys*(drain+8))
	js := startClient(t, "payments-js", "--mode", "nats-js", "--url", "nats://"+cluster.EnvoyHost()+":4222", "--user", "payments",
		"--subject", "orders.paid", "--rate", "50", "--duration", duration)
	kp := startClient(t, "payments-kafka", "--mode", "kafka", "--bootstrap", cluster.EnvoyHost()+":9092", "--topic", topicName,
		"--rate", "50", "--duration", duration)
	time.Sleep(10 * time.Second)
	begin := time.Now()
	helm(t, "upgrade", cluster.Release, root+"/helm/weighstation", "-n", cluster.GatewayNS, "--reuse-values",
		"--set-string", "envoy.podAnnotations.weighstation\\.io/rollout="+begin.Format("150405"))
	kubectl(t, "-n", cluster.GatewayNS, "rollout", "status", "deployment/"+cluster.EnvoySvc, "--timeout", "5m")
	t.Logf("rollout of %d Envoy pods done in %.1fs", envoys, time.Since(begin).Seconds())
	jsReport, kafkaReport := js.wait(t, 5*time.Minute), kp.wait(t, 5*time.Minute)

	stored := storedMsgIDs(t)
	keys := storedKeys(t)
	for _, c := range []struct {
		r      report
		stored map[string]int
	}{{jsReport, stored}, {kafkaReport, keys}} {
		lost, dup := ledger(t, c.r, c.stored)
		t.Logf("%s: sent %d, acknowledged %d, gave up %d, lost %d, duplicated %d, reconnects %d, longest gap %dms",
			c.r.Client, c.r.Sent, c.r.Acked, c.r.GaveUp, lost, dup, c.r.Reconnects, c.r.LongestGapMs)
		if lost > 0 || dup > 0 || c.r.GaveUp > 0 || c.r.Acked != c.r.Sent {
			t.Errorf("%s through the rollout: %+v, lost %d, duplicated %d", c.r.Client, c.r, lost, dup)
		}
		learntOnlyTheGateway(t, c.r)
	}
	for pod := range old {
		logs.check(t, pod, drain)
	}
}

// podLogs follows the drain and Envoy containers of pods, stamping each line with when it came.
type podLogs struct {
	mu    sync.Mutex
	lines map[string][]stamped
}

type stamped struct {
	at   time.Time
	text string
}

func followLogs(t *testing.T, pods map[string]string) *podLogs {
	t.Helper()
	l := &podLogs{lines: map[string][]stamped{}}
	for pod := range pods {
		for _, c := range []string{"drain", "envoy"} {
			cmd := exec.Command(k.Kubectl, "--kubeconfig", k.Kubeconfig, "-n", cluster.GatewayNS, "logs", "-f", pod, "-c", c)
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					l.mu.Lock()
					l.lines[pod+"/"+c] = append(l.lines[pod+"/"+c], stamped{time.Now(), sc.Text()})
					l.mu.Unlock()
				}
			}()
		}
	}
	return l
}

// check: the pod's drain container drained Envoy's listeners, and Envoy's SIGTERM came
// drainSeconds later (its preStop sleep), not before.
func (l *podLogs) check(t *testing.T, pod string, drain int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	find := func(c, text string) (time.Time, bool) {
		for _, s := range l.lines[pod+"/"+c] {
			if strings.Contains(s.text, text) {
				return s.at, true
			}
		}
		return time.Time{}, false
	}
	drained, ok1 := find("drain", "Envoy is draining its listeners")
	term, ok2 := find("envoy", "caught ENVOY_SIGTERM")
	switch {
	case !ok1:
		t.Errorf("%s: its drain container never drained Envoy: %v", pod, l.lines[pod+"/drain"])
	case !ok2:
		t.Errorf("%s: Envoy never logged its SIGTERM: %v", pod, l.lines[pod+"/envoy"])
	case term.Sub(drained) < time.Duration(drain)*time.Second-time.Second:
		t.Errorf("%s: SIGTERM %v after the drain, before drainSeconds (%ds)", pod, term.Sub(drained), drain)
	default:
		t.Logf("%s: listeners drained, SIGTERM %.1fs later", pod, term.Sub(drained).Seconds())
	}
}

// nodePortClient is nats.go on the node itself (this machine, through the link to the node's
// namespace), at the advertised node port: it is told only that address, and its messages
// are admitted.
func nodePortClient(t *testing.T) {
	url := fmt.Sprintf("nats://%s:%d", node.NodeIP, cluster.NATSNodePort)
	nc, err := nats.Connect(url, nats.UserInfo("payments", ""), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer nc.Close()
	for _, s := range append(nc.Servers(), nc.DiscoveredServers()...) {
		if s != url {
			t.Errorf("the node's client was told %s, not the advertised %s", s, url)
		}
	}
	for i := 0; i < 10; i++ {
		if err := nc.Publish("orders.node", []byte("from the node")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil || nc.LastError() != nil {
		t.Errorf("publishing through the node port: %v %v", err, nc.LastError())
	}
}

// tlsClient is nats.go over the TLS-first listener (tls.nats), through the Service's cluster
// address, verifying the certificate the chart serves from the Secret gateway-tls against its CA
// and the Service's DNS name.
func tlsClient(t *testing.T, ca []byte) {
	ip := strings.TrimSpace(kubectl(t, "-n", cluster.GatewayNS, "get", "service", cluster.EnvoySvc, "-o", "jsonpath={.spec.clusterIP}"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	nc, err := nats.Connect("tls://"+ip+":4443", nats.UserInfo("payments", ""), nats.TLSHandshakeFirst(),
		nats.Secure(&tls.Config{RootCAs: pool, ServerName: cluster.EnvoyHost(), MinVersion: tls.VersionTLS12}), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("TLS through the Service (%s:4443): %v", ip, err)
	}
	defer nc.Close()
	if err := nc.Publish("orders.tls", []byte("over TLS")); err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil || nc.LastError() != nil {
		t.Errorf("publishing over TLS: %v %v", err, nc.LastError())
	}
	state, err := nc.TLSConnectionState()
	if err != nil || len(state.PeerCertificates) == 0 {
		t.Fatalf("no TLS connection state: %v", err)
	}
	t.Logf("TLS %s, the gateway's certificate for %v", tls.VersionName(state.Version), state.PeerCertificates[0].DNSNames)
}
