package e2e

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// controlPlaneUp reports whether the control plane answers /healthz.
func controlPlaneUp() bool {
	c := http.Client{Timeout: 200 * time.Millisecond}
	resp, err := c.Get("http://" + addr(ports.ControlPlane) + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Killed (SIGKILL), the control plane takes nothing with it: Envoy keeps enforcing the policy
// it last acknowledged — old and new connections alike — and once the control plane is back
// (the stack starts it again, as its Deployment would) Envoy reconnects, acknowledges the
// active version and takes a policy written while it was down.
func TestEnvoyKeepsEnforcingWhileTheControlPlaneIsDown(t *testing.T) {
	restarts := stack.ControlPlane.Restarts()
	before := activeVersion(t)
	if err := stack.ControlPlane.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "the control plane is down", func() bool { return !controlPlaneUp() })

	// While it is down: a new connection of a rate-reject tenant (burst 10) is still limited.
	sink := &errorSink{}
	nc := tenantNATS(t, "rate-reject", sink)
	subject := uniqueSubject("cpdown")
	c := collect(t, subject)
	const sent = 60
	publishBurst(t, nc, subject, sent, "m")
	refusedWhileDown := 0
	eventually(t, 5*time.Second, "every message delivered or refused", func() bool {
		refusedWhileDown = sink.count("rate limit of tenant rate-reject")
		return c.delivered()+refusedWhileDown == sent
	})
	down := !controlPlaneUp()
	// And a policy written now is for the control plane that comes back.
	writePolicy(t, "cp-down.yaml", `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: written-while-down
spec:
  tenant: written-while-down
  identify:
    nats: { users: [written-while-down] }
  limits:
    rate: { messagesPerSecond: 5 }
`)
	t.Cleanup(func() { removePolicy(t, "cp-down.yaml") })
	t.Logf("control plane down: %d of %d refused on a new connection (still down after: %v)", refusedWhileDown, sent, down)
	if refusedWhileDown == 0 || c.delivered() > 20 {
		t.Errorf("without its control plane the gateway let %d of %d through (burst 10)", c.delivered(), sent)
	}

	took := eventually(t, 30*time.Second, "the control plane is back and every Envoy acknowledged a new version", func() bool {
		return controlPlaneUp() && activeVersion(t) != before && stack.WaitInSync(100*time.Millisecond) == nil
	})
	if stack.ControlPlane.Restarts() != restarts+1 {
		t.Errorf("the control plane was started again %d times", stack.ControlPlane.Restarts()-restarts)
	}
	st, err := stack.ControlPlaneStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if !n.Connected || n.AckedVersion != st.Active.Version {
			t.Errorf("node %s: connected %v, acknowledged %q, active %q", n.ID, n.Connected, n.AckedVersion, st.Active.Version)
		}
	}
	t.Logf("back and in sync %s after the kill, on version %s (was %s)", took.Round(time.Millisecond), st.Active.Version, before)
}

// Killed (SIGKILL) and started again, nats-server takes its clients' connections down with it:
// the gateway closes them and gives back their places in the tenant's connection count, and
// the clients reconnect through the gateway and publish again — nothing is leaked.
func TestNATSServerRestartReleasesAndReconnects(t *testing.T) {
	const tenant, n = "iso-a", 3
	labels := map[string]string{"protocol": "nats", "tenant": tenant}
	base := metric(t, "weighstation_connections_active", labels)
	var conns []*nats.Conn
	var reconnects atomic.Int64
	for range n {
		conns = append(conns, gatewayNATS(t, tenant, tenant+"-secret",
			nats.ReconnectWait(200*time.Millisecond), nats.MaxReconnects(-1),
			nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) })))
	}
	eventually(t, 5*time.Second, "the connections are counted", func() bool {
		return metric(t, "weighstation_connections_active", labels) == base+n
	})
	restarts := stack.NATSServer.Restarts()
	if err := stack.NATSServer.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 30*time.Second, "every client reconnected through the gateway", func() bool {
		return reconnects.Load() == n
	})
	eventually(t, 5*time.Second, "the tenant's connection count is its live connections", func() bool {
		return metric(t, "weighstation_connections_active", labels) == base+n
	})
	if stack.NATSServer.Restarts() != restarts+1 {
		t.Errorf("nats-server was started again %d times", stack.NATSServer.Restarts()-restarts)
	}
	for i, nc := range conns {
		publishAndReceive(t, nc, fmt.Sprintf("%s.%d", uniqueSubject("nats-restart"), i), 5)
	}
	t.Logf("nats-server killed: %d clients reconnected through the gateway in %s; connections counted %v", n,
		took.Round(time.Millisecond), metric(t, "weighstation_connections_active", labels)-base)
}
