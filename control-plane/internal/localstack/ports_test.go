package localstack

import (
	"net"
	"strings"
	"testing"
)

func defaultPorts(t *testing.T) Ports {
	t.Helper()
	for _, e := range PortEnv {
		t.Setenv(e.Name, "")
	}
	p, err := PortsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every nats-server of a cluster listens on the upstream, monitoring and cluster ports + i, so
// each of these spans must stay clear of every other port the stack uses.
func TestForReplicasChecksTheNATSServersSpans(t *testing.T) {
	for _, c := range []struct {
		name                  string
		replicas, natsServers int
		edit                  func(*Ports)
		overlap               string // "" when the layout fits
	}{
		{name: "defaults, one of each", replicas: 1, natsServers: 1},
		{name: "defaults, three servers", replicas: 1, natsServers: 3},
		{name: "defaults, three replicas and three servers", replicas: 3, natsServers: 3},
		{name: "one server is never checked", replicas: 1, natsServers: 1,
			edit: func(p *Ports) { p.NATSCluster = p.Redis }},
		{name: "cluster span reaches redis", replicas: 1, natsServers: 3,
			edit:    func(p *Ports) { p.NATSCluster = p.Redis - 2 },
			overlap: "NATS_CLUSTER_PORT (16377..16379) overlaps REDIS_PORT (16379..16379)"},
		{name: "upstream span reaches the second server's monitoring port", replicas: 1, natsServers: 2,
			edit:    func(p *Ports) { p.NATSMonitor = p.NATSUpstream + 1 },
			overlap: "NATS_UPSTREAM_PORT (14222..14223) overlaps NATS_MONITOR_PORT (14223..14224)"},
		{name: "monitoring span reaches the control plane", replicas: 1, natsServers: 4,
			edit:    func(p *Ports) { p.NATSMonitor = p.ControlPlane - 3 },
			overlap: "NATS_MONITOR_PORT (18077..18080) overlaps CONTROL_PLANE_PORT (18080..18080)"},
		{name: "server span and replica span", replicas: 3, natsServers: 3,
			edit:    func(p *Ports) { p.NATSUpstream = p.NATS - 2 },
			overlap: "NATS_PORT (4222..4224) overlaps NATS_UPSTREAM_PORT (4220..4222)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := defaultPorts(t)
			if c.edit != nil {
				c.edit(&p)
			}
			_, err := p.ForReplicas(c.replicas, c.natsServers, false)
			switch {
			case c.overlap == "" && err != nil:
				t.Fatalf("layout refused: %v", err)
			case c.overlap != "" && (err == nil || !strings.Contains(err.Error(), c.overlap)):
				t.Fatalf("want an error naming %q, got %v", c.overlap, err)
			}
		})
	}
}

// A test stack of several servers gets each nats-server span as consecutive free ports, none
// shared with another role.
func TestFreePortsForGivesEachServerSpanConsecutiveFreePorts(t *testing.T) {
	for _, c := range []struct{ replicas, natsServers int }{{1, 1}, {1, 3}, {2, 3}} {
		p, err := FreePortsFor(c.replicas, c.natsServers)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.ForReplicas(c.replicas, c.natsServers, true); err != nil {
			t.Errorf("%d replicas, %d servers: %v", c.replicas, c.natsServers, err)
		}
		for _, first := range []int{p.NATSUpstream, p.NATSMonitor, p.NATSCluster} {
			for i := range c.natsServers {
				l, err := net.Listen("tcp", addr(first+i))
				if err != nil {
					t.Errorf("%d replicas, %d servers: port %d is not free: %v", c.replicas, c.natsServers, first+i, err)
					continue
				}
				l.Close()
			}
		}
	}
}
