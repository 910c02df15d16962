package e2e

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// spoofNATS is the attack of issue 13: raw connections that claim a tenant's user with a wrong
// password and pipeline PUBs behind the CONNECT, reconnecting in a loop, `rate` PUBs a second in
// all, until stop closes. It returns how many connections it made.
func spoofNATS(t *testing.T, user string, rate int, stop <-chan struct{}) *atomic.Int64 {
	t.Helper()
	var conns atomic.Int64
	const perConn = 50
	connect := []byte(`CONNECT {"user":"` + user + `","pass":"wrong","verbose":false,"pedantic":false}` + "\r\n")
	pub := []byte("PUB spoof.orders 5\r\nhello\r\n")
	batch := append([]byte{}, connect...)
	for range perConn {
		batch = append(batch, pub...)
	}
	go func() {
		tick := time.NewTicker(time.Second * perConn / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			c, err := net.DialTimeout("tcp", addr(ports.NATS), time.Second)
			if err != nil {
				continue
			}
			conns.Add(1)
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err == nil { // INFO
				_, _ = c.Write(batch)
				_, _ = r.ReadString('\n') // -ERR 'Authorization Violation'
			}
			c.Close()
		}
	}()
	return &conns
}

// publishAtRate publishes `rate` messages a second for d through one gateway connection as the
// tenant's real user and returns how many it sent and how many refusals it was told of.
func publishAtRate(t *testing.T, tenant string, rate float64, d time.Duration) (sent, refused int) {
	t.Helper()
	sink := &errorSink{}
	nc := tenantNATS(t, tenant, sink)
	onSchedule(rate, d, func(n int) bool {
		if err := nc.Publish("victim.orders", []byte("m")); err != nil {
			t.Errorf("publish: %v", err)
			return false
		}
		sent++
		return true
	})
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	nc.Close()
	return sent, sink.count("Permissions Violation")
}

// A client that knows only a tenant's name cannot spend its budget: its PUBs wait for
// nats-server's verdict on its CONNECT, which refuses it, so they are never forwarded nor charged.
func TestNATSSpooferWithoutThePasswordChargesNoTenant(t *testing.T) {
	const tenant, limit = "spoof-victim", 400.0
	labels := map[string]string{"protocol": "nats", "tenant": tenant}
	accepted0 := metric(t, "weighstation_messages_accepted", labels)
	failures0 := metric(t, "weighstation_auth_failures_total", map[string]string{"protocol": "nats"})

	alone, refusedAlone := publishAtRate(t, tenant, limit, 4*time.Second)
	stop := make(chan struct{})
	conns := spoofNATS(t, tenant, int(10*limit), stop)
	attacked, refusedAttacked := publishAtRate(t, tenant, limit, 4*time.Second)
	close(stop)
	time.Sleep(200 * time.Millisecond)

	t.Logf("alone: sent %d, refused %d; under attack (%d spoofing connections, %.0f PUBs/s): sent %d, refused %d",
		alone, refusedAlone, conns.Load(), 10*limit, attacked, refusedAttacked)
	if refusedAlone != 0 || refusedAttacked > attacked/50 {
		t.Errorf("the real tenant was refused %d of %d alone and %d of %d under attack (allowed: 2%%)",
			refusedAlone, alone, refusedAttacked, attacked)
	}
	admitted := metric(t, "weighstation_messages_accepted", labels) - accepted0
	if want := float64(alone + attacked - refusedAlone - refusedAttacked); admitted != want {
		t.Errorf("tenant %s charged for %.0f messages, its real user had %.0f admitted: the spoofer was charged", tenant, admitted, want)
	}
	failures := metric(t, "weighstation_auth_failures_total", map[string]string{"protocol": "nats"}) - failures0
	if failures < float64(conns.Load())*0.9 {
		t.Errorf("weighstation_auth_failures_total{protocol=nats} rose by %.0f for %d refused connections", failures, conns.Load())
	}
}

// An nkey user is attributed by its public key once nats-server accepted its signature; the
// same user dialing nats-server directly is refused (proxy_required): only the gateway, which
// signs each CONNECT as a trusted proxy, gets it in.
func TestNATSNkeyUserOnlyThroughTheGateway(t *testing.T) {
	seedFile := filepath.Join(stack.NkeyDir(), "acme.nk")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"protocol": "nats", "tenant": "acme"}
	before := metric(t, "weighstation_messages_accepted", labels)
	nc, err := nats.Connect("nats://"+addr(ports.NATS), opt, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("nkey user through the gateway: %v", err)
	}
	defer nc.Close()
	const n = 20
	publishAndReceive(t, nc, "nkey.orders", n)
	if d := metric(t, "weighstation_messages_accepted", labels) - before; d != n {
		t.Errorf("acme charged %.0f messages for its nkey user's %d", d, n)
	}

	_, err = nats.Connect("nats://"+addr(ports.NATSUpstream), opt, nats.Timeout(5*time.Second), nats.NoReconnect())
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("the nkey user dialing nats-server directly: err = %v, want an authorization violation (proxy_required)", err)
	}
}
