package xds

import (
	"reflect"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// Each NATS listener's chain is named, and the filter is told how that listener's clients
// see the gateway: the advertised addresses, else the listener's own.
func TestNATSListenersNameTheGatewayForTheirClients(t *testing.T) {
	tlsOnly := gateway
	tlsOnly.NATSTLSListen = "127.0.0.1:4322"
	tlsOnly.NATSTLS = TLS
	advertised := tlsOnly
	advertised.NATSAdvertise = []string{"gw.example:4222", "gw-1.example:4222"}
	advertised.NATSTLSAdvertise = []string{"gw.example:4322"}
	moved, err := advertised.WithPortOffset(1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		g    Gateway
		want []compile.NATSListener
	}{
		{"listen addresses", tlsOnly, []compile.NATSListener{
			{Chain: "weighstation-nats", Host: "127.0.0.1", Port: 4222},
			{Chain: "weighstation-nats_tls", Host: "127.0.0.1", Port: 4322},
		}},
		{"advertised", advertised, []compile.NATSListener{
			{Chain: "weighstation-nats", Host: "gw.example", Port: 4222, ConnectURLs: []string{"gw.example:4222", "gw-1.example:4222"}},
			{Chain: "weighstation-nats_tls", Host: "gw.example", Port: 4322, ConnectURLs: []string{"gw.example:4322"}},
		}},
		// A replica moved up on one host keeps advertising every replica.
		{"advertised, second replica", moved, []compile.NATSListener{
			{Chain: "weighstation-nats", Host: "gw.example", Port: 4222, ConnectURLs: []string{"gw.example:4222", "gw-1.example:4222"}},
			{Chain: "weighstation-nats_tls", Host: "gw.example", Port: 4322, ConnectURLs: []string{"gw.example:4322"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.g
			g.TLSFiles.CertFile, g.TLSFiles.KeyFile = "/x/tls.crt", "/x/tls.key"
			res, err := Resources(g, examples(t), "1-a")
			if err != nil {
				t.Fatal(err)
			}
			if got := filterConfigFor(t, res, compile.NATS).NATSListeners; !reflect.DeepEqual(got, c.want) {
				t.Errorf("natsListeners = %+v, want %+v", got, c.want)
			}
			chains := map[string]bool{}
			for _, r := range res[resourcev3.ListenerType] {
				for _, fc := range r.(*listenerv3.Listener).FilterChains {
					chains[fc.Name] = true
				}
			}
			for _, l := range c.want {
				if !chains[l.Chain] {
					t.Errorf("no filter chain named %q among %v", l.Chain, chains)
				}
			}
		})
	}
}

// The seed servers are health-checked by the INFO each sends on connect, used in turn, and a
// failed connect is tried on the next server, the failed one set aside.
func TestNATSSeedsAreHealthCheckedAndAFailedConnectRetried(t *testing.T) {
	g := gateway
	g.NATSUpstream = "127.0.0.1:14222,127.0.0.1:14223,127.0.0.1:14224"
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[resourcev3.ClusterType] {
		c := r.(*clusterv3.Cluster)
		checked := len(c.HealthChecks) == 1 && c.HealthChecks[0].GetTcpHealthCheck() != nil
		if nats := c.Name == clusterName(compile.NATS); checked != nats {
			t.Errorf("cluster %s: health-checked %v", c.Name, checked)
		}
		if c.Name != clusterName(compile.NATS) {
			continue
		}
		if got := c.HealthChecks[0].GetTcpHealthCheck().Receive[0].GetText(); got != "494e464f" {
			t.Errorf("health check expects %q, want INFO (494e464f)", got)
		}
		if c.LbPolicy != clusterv3.Cluster_ROUND_ROBIN {
			t.Errorf("lb policy %v, want round robin: a retried connect goes to the next server", c.LbPolicy)
		}
		if od := c.GetOutlierDetection(); od.GetConsecutive_5Xx().GetValue() != 1 {
			t.Errorf("outlier detection %v: a failed connect must set the server aside", od)
		}
	}
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		var tp tcpproxyv3.TcpProxy
		filters := l.FilterChains[0].Filters
		if err := filters[len(filters)-1].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatal(err)
		}
		want := uint32(0)
		if strings.HasPrefix(l.Name, "nats") {
			want = seedConnectAttempts
		}
		if got := tp.GetMaxConnectAttempts().GetValue(); got != want {
			t.Errorf("listener %s: max_connect_attempts %d, want %d", l.Name, got, want)
		}
	}
}

func TestAdvertisedAddressesMustBeHostPort(t *testing.T) {
	for _, bad := range []string{"gw.example", ":4222", "gw.example:port", "gw.example:70000"} {
		g := gateway
		g.NATSAdvertise = []string{"gw.example:4222", bad}
		err := g.Check()
		if err == nil || !strings.Contains(err.Error(), "--nats-advertise") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
