package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Around each event: steady load before it, and after every client is back, long enough for
// 10 s rate windows that no fault touches.
const (
	steadyBefore = 8 * time.Second
	steadyAfter  = 12 * time.Second
	// backWithin bounds how long after the fault ends every client must be back.
	backWithin = 30 * time.Second
)

// event is one fault of the matrix. It returns when the component it disturbed is back:
// for the gateway, the instant its listener accepts again (what a client's reconnect is
// measured from when no other replica runs); zero when the gateway stayed up.
type event struct {
	name  string
	smoke bool
	run   func(t *testing.T, w *workload) (gatewayBack time.Time)
}

var events = []event{
	{"server-restart", true, restartBusiestServer},
	{"stream-leader-stepdown", true, stepDownStreamLeader},
	{"envoy-kill", true, killEnvoy},
	{"every-server-restarted", false, restartEveryServer},
	{"server-killed", false, killBusiestServer},
	{"server-lame-duck", false, lameDuckBusiestServer},
	{"gateway-replicas-rolled", false, rollGatewayReplicas},
}

// TestNATSClusterEventsAreRiddenThrough runs each event under the fixed-rate load and checks,
// from outside the filter, what its users would notice.
func TestNATSClusterEventsAreRiddenThrough(t *testing.T) {
	for _, ev := range events {
		if !ev.smoke && !full {
			continue // the matrix's other events run in make test-clusters
		}
		t.Run(ev.name, func(t *testing.T) { rideThrough(t, ev) })
	}
}

func rideThrough(t *testing.T, ev event) {
	infos := watchINFOs(tenantApp)
	conns := watchConnections()
	w := startWorkload(t, ev.name)
	time.Sleep(steadyBefore)
	faultAt := time.Now()
	gatewayBack := ev.run(t, w)
	back := waitAllBack(t, w)
	faults := []window{{faultAt, back.Add(2 * time.Second)}}
	t.Logf("fault from %s to %s after the load started", faultAt.Sub(w.start).Round(time.Millisecond), back.Sub(w.start).Round(time.Millisecond))
	time.Sleep(time.Until(faults[0].to.Add(steadyAfter)))
	for _, c := range w.clients {
		c.checkLearntOnlyTheGateway(t)
	}
	end := time.Now()
	w.cli.check(t, faults[0].to)
	stored := w.finish(t)
	conns.check(t)
	infos.check(t)
	checkReconnects(t, w, gatewayBack)
	w.checkJetStream(t, stored, faultAt)
	w.checkRequests(t, faults)
	w.checkRate(t, faults, end)
}

// waitAllBack waits until every client is connected through the gateway and a JetStream
// publish has been acknowledged since, and returns when.
func waitAllBack(t *testing.T, w *workload) time.Time {
	t.Helper()
	deadline := time.Now().Add(backWithin)
	w.mu.Lock()
	acked := len(w.acked)
	w.mu.Unlock()
	for time.Now().Before(deadline) {
		all := true
		for _, c := range w.clients {
			all = all && c.connected()
		}
		w.mu.Lock()
		more := len(w.acked) > acked
		w.mu.Unlock()
		if all && more {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	var missing []string
	for _, c := range w.clients {
		switch {
		case c.closed.Load():
			missing = append(missing, c.name+" (closed for good)")
		case !c.connected():
			missing = append(missing, c.name+" (at "+c.nc.ConnectedUrl()+")")
		}
	}
	t.Fatalf("not back through the gateway within %s: %s", backWithin, strings.Join(missing, ", "))
	return time.Time{}
}

// checkReconnects: no client closed (finish checks), and every disconnect was followed by a
// reconnect through the gateway within ReconnectWait + 2 s of the gateway being there.
func checkReconnects(t *testing.T, w *workload, gatewayBack time.Time) {
	t.Helper()
	var report []string
	for _, c := range w.clients {
		for _, o := range c.outages() {
			if o.up.IsZero() {
				t.Errorf("%s disconnected at %s and never reconnected", c.name, o.down.Sub(w.start))
				continue
			}
			// With one replica a client can only come back once it is; with more, the others
			// are there all along.
			from := o.down
			if replicas == 1 && gatewayBack.After(from) {
				from = gatewayBack
			}
			took := o.up.Sub(from)
			report = append(report, fmt.Sprintf("%s %s", strings.TrimPrefix(c.name, w.name+"-"), took.Round(time.Millisecond)))
			if took > reconnectWait+2*time.Second {
				t.Errorf("%s took %s to reconnect, over ReconnectWait + 2 s", c.name, took)
			}
		}
	}
	t.Logf("reconnected through the gateway (after it was back): %s", strings.Join(append(report, "—")[:max(len(report), 1)], ", "))
}

// busiestServer is the server that carries most of the workload's connections (by the names
// its clients gave, from each server's /connz).
func busiestServer(t *testing.T, w *workload) int {
	t.Helper()
	best, most := 0, -1
	for i := range natsServers {
		var connz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		resp, err := http.Get(stack.NATSMonitorURL(i) + "/connz?limit=4096")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&connz)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range connz.Connections {
			if strings.HasPrefix(c.Name, w.name+"-") {
				n++
			}
		}
		if n > most {
			best, most = i, n
		}
	}
	t.Logf("server %d carries %d of the workload's %d connections", best, most, len(w.clients))
	return best
}

func restartBusiestServer(t *testing.T, w *workload) time.Time {
	if err := stack.RestartNATSServer(busiestServer(t, w)); err != nil {
		t.Fatal(err)
	}
	return time.Time{}
}

func restartEveryServer(t *testing.T, w *workload) time.Time {
	for i := range natsServers {
		if err := stack.RestartNATSServer(i); err != nil {
			t.Fatal(err)
		}
		waitAllBack(t, w)
		time.Sleep(2 * time.Second)
	}
	return time.Time{}
}

// newClientsWhileDown are connected through the gateway while a killed server is down.
const newClientsWhileDown = 30

// killBusiestServer kills the busiest server (-9) and, while it is down, connects new clients
// through one gateway address: each must get in at its first try, on another server (Envoy
// skips the dead one by its health check, or tries another when the connect fails).
func killBusiestServer(t *testing.T, w *workload) time.Time {
	i := busiestServer(t, w)
	release, err := stack.KillNATSServer(i)
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats-" + strconv.Itoa(i)
	// Most of them within the second before the health check can notice: the window in which
	// only the connect's retries keep a client from the dead server.
	var took []string
	for k := range newClientsWhileDown {
		start := time.Now()
		nc, err := nats.Connect("nats://"+gatewayAddrs()[0], nats.UserInfo(tenantApp, tenantApp+"-secret"),
			nats.Timeout(2*time.Second), nats.NoReconnect())
		if err != nil {
			t.Errorf("new client %d while %s is down: %v", k, dead, err)
			continue
		}
		if got := nc.ConnectedServerName(); got == dead {
			t.Errorf("new client %d was sent to the dead server %s", k, dead)
		}
		took = append(took, time.Since(start).Round(time.Millisecond).String())
		nc.Close()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d new clients while %s was down, %d at their first try: %s", newClientsWhileDown, dead, len(took), strings.Join(took, ", "))
	release()
	if err := stack.WaitNATSServer(i, time.Minute); err != nil {
		t.Fatal(err)
	}
	return time.Time{}
}

func lameDuckBusiestServer(t *testing.T, w *workload) time.Time {
	i := busiestServer(t, w)
	pid := stack.NATSServerPID(i)
	if err := stack.LameDuckNATSServer(i); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for stack.NATSServerPID(i) == pid && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := stack.WaitNATSServer(i, time.Minute); err != nil {
		t.Fatal(err)
	}
	return time.Time{}
}

// stepDownStreamLeader asks the R3 stream's leader to step down, and checks another took over.
func stepDownStreamLeader(t *testing.T, _ *workload) time.Time {
	js, err := jetstream.New(baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := func() string {
		s, err := js.Stream(ctx, streamName)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Cluster.Leader
	}
	before := leader()
	if _, err := js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+streamName, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for after := leader(); after == before || after == ""; after = leader() {
		if ctx.Err() != nil {
			t.Fatalf("the stream's leader stayed %s", before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}
}

// killEnvoy kills the first gateway replica (-9), keeps it down 3 s, and lets it be started
// again as a crashed pod is.
func killEnvoy(t *testing.T, _ *workload) time.Time {
	release, err := stack.Envoys[0].KillAndHold()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	release()
	return waitGatewayReplica(t, 0)
}

// rollGatewayReplicas restarts each replica in turn (SIGTERM, as a rollout does), each once
// the last is serving again.
func rollGatewayReplicas(t *testing.T, w *workload) time.Time {
	var back time.Time
	for i := range replicas {
		pid := stack.Envoys[i].PID()
		if err := stack.Envoys[i].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for stack.Envoys[i].PID() == pid {
			time.Sleep(20 * time.Millisecond) // the supervisor starts it again after it exits
		}
		back = waitGatewayReplica(t, i)
		waitAllBack(t, w)
	}
	return back
}

// waitGatewayReplica waits until replica i is ready and accepts NATS clients, and returns when.
func waitGatewayReplica(t *testing.T, i int) time.Time {
	t.Helper()
	deadline := time.Now().Add(backWithin)
	ready := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Admin+i)) + "/ready"
	for time.Now().Before(deadline) {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.DialTimeout("tcp", gatewayAddrs()[i], time.Second); err == nil {
					c.Close()
					return time.Now()
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gateway replica %d not back within %s", i, backWithin)
	return time.Time{}
}
