package e2ecluster

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

const (
	tenantLimited = "cluster-limited"
	tenantApp     = "cluster-app"
	// limitedRate is cluster-limited's messagesPerSecond (testdata/tenants.yaml).
	limitedRate = 200
	// reconnectWait is every client's: "connected again within its ReconnectWait plus 2 s".
	reconnectWait = 500 * time.Millisecond
)

// client is a nats.go connection through the gateway that records what its user would see:
// each disconnect and reconnect, a close (never expected: it would be for good), and the
// asynchronous errors the gateway's refusals arrive as.
type client struct {
	name string
	nc   *nats.Conn

	mu          sync.Mutex
	disconnects []time.Time
	reconnects  []time.Time
	closed      atomic.Bool
	// closing: the test closes it; its own disconnect is no outage.
	closing     atomic.Bool
	refusals    atomic.Int64
	otherErrors []string
}

func gatewayURLs() string {
	var urls []string
	for _, a := range gatewayAddrs() {
		urls = append(urls, "nats://"+a)
	}
	return strings.Join(urls, ",")
}

// connectClient connects user through the gateway as nats.go users do, reconnecting forever.
func connectClient(t *testing.T, name, user string) *client {
	t.Helper()
	c := &client{name: name}
	nc, err := nats.Connect(gatewayURLs(),
		nats.UserInfo(user, user+"-secret"),
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(0, 0),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			if c.closing.Load() {
				return
			}
			c.mu.Lock()
			c.disconnects = append(c.disconnects, time.Now())
			c.mu.Unlock()
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.mu.Lock()
			c.reconnects = append(c.reconnects, time.Now())
			c.mu.Unlock()
		}),
		nats.ClosedHandler(func(*nats.Conn) { c.closed.Store(!c.closing.Load()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if strings.Contains(err.Error(), "Permissions Violation") {
				c.refusals.Add(1)
				return
			}
			c.mu.Lock()
			c.otherErrors = append(c.otherErrors, err.Error())
			c.mu.Unlock()
		}),
	)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.nc = nc
	return c
}

// outage is one disconnect and the reconnect that ended it.
type outage struct {
	down, up time.Time
}

// outages pairs each disconnect with the reconnect after it; a disconnect never followed by one
// has a zero up.
func (c *client) outages() []outage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []outage
	for _, d := range c.disconnects {
		o := outage{down: d}
		for _, r := range c.reconnects {
			if !r.Before(d) {
				o.up = r
				break
			}
		}
		out = append(out, o)
	}
	return out
}

// connected says whether the client is connected now, through the gateway.
func (c *client) connected() bool {
	return c.nc.IsConnected() && slices.Contains(gatewayAddrs(), hostPort(c.nc.ConnectedUrl()))
}

// checkLearntOnlyTheGateway fails if the client's server pool holds anything but the gateway.
func (c *client) checkLearntOnlyTheGateway(t *testing.T) {
	t.Helper()
	gw := gatewayAddrs()
	for _, u := range append(c.nc.Servers(), c.nc.DiscoveredServers()...) {
		if !slices.Contains(gw, hostPort(u)) {
			t.Errorf("%s learnt %s, which is no gateway address", c.name, u)
		}
	}
}

func hostPort(url string) string {
	return strings.TrimPrefix(strings.TrimPrefix(url, "nats://"), "tls://")
}

// baseline connects to the servers directly as the baseline user (no tenant's): the verifier
// that reads what the gateway let through.
func baseline(t *testing.T) *nats.Conn {
	t.Helper()
	var urls []string
	for i := range natsServers {
		urls = append(urls, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.NATSUpstream+i)))
	}
	u := localstack.BaselineNATSUser
	nc, err := nats.Connect(strings.Join(urls, ","), nats.UserInfo(u, u+"-secret"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Name("baseline"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
