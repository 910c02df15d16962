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
			_, err := p.ForReplicas(Counts{Replicas: c.replicas, NATSServers: c.natsServers}, nil)
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
		counts := Counts{Replicas: c.replicas, NATSServers: c.natsServers}
		p, err := FreePortsFor(counts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.ForReplicas(counts, allExplicit); err != nil {
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

func allExplicit(string) bool { return true }

// A cluster's brokers listen on each broker port + i, so with more than one broker the single
// broker's consecutive defaults (19092..19097) move to blocks of ten, each kept wide enough for
// one broker more; a port the user set stays where it is and is checked. The gateway's listeners
// for the brokers take one block of replicas per broker.
func TestForReplicasLaysOutTheKafkaBrokers(t *testing.T) {
	type upstream struct{ gateway, controller, direct, sasl, ssl, saslSSL int }
	type gateway struct{ direct, sasl, tls, saslSSL, gatewayBroker int }
	for _, c := range []struct {
		name     string
		counts   Counts
		explicit map[string]int // variables the user set, and to what
		upstream upstream
		gateway  gateway
		overlap  string // "" when the layout fits
	}{
		{name: "one broker stays where it always was", counts: Counts{KafkaBrokers: 1},
			upstream: upstream{19092, 19093, 19094, 19095, 19096, 19097}, gateway: gateway{9093, 9192, 9292, 9392, 9492}},
		{name: "zero brokers is one", counts: Counts{},
			upstream: upstream{19092, 19093, 19094, 19095, 19096, 19097}, gateway: gateway{9093, 9192, 9292, 9392, 9492}},
		{name: "one broker, three replicas", counts: Counts{Replicas: 3, KafkaBrokers: 1},
			upstream: upstream{19092, 19093, 19094, 19095, 19096, 19097}, gateway: gateway{9095, 9192, 9292, 9392, 9492}},
		{name: "three brokers: a block per kind", counts: Counts{KafkaBrokers: 3},
			upstream: upstream{19092, 19102, 19112, 19122, 19132, 19142}, gateway: gateway{9093, 9192, 9292, 9392, 9492}},
		{name: "three brokers, three replicas, three servers", counts: Counts{Replicas: 3, NATSServers: 3, KafkaBrokers: 3},
			upstream: upstream{19092, 19102, 19112, 19122, 19132, 19142}, gateway: gateway{9095, 9192, 9292, 9392, 9492}},
		{name: "the blocks follow a moved KAFKA_UPSTREAM_PORT", counts: Counts{KafkaBrokers: 3},
			explicit: map[string]int{"KAFKA_UPSTREAM_PORT": 29092},
			upstream: upstream{29092, 29102, 29112, 29122, 29132, 29142}, gateway: gateway{9093, 9192, 9292, 9392, 9492}},
		{name: "nine brokers fit", counts: Counts{KafkaBrokers: MaxKafkaBrokers},
			upstream: upstream{19092, 19102, 19112, 19122, 19132, 19142}, gateway: gateway{9093, 9192, 9292, 9392, 9492}},
		{name: "ten brokers do not: one more would not fit a block", counts: Counts{KafkaBrokers: 10},
			overlap: "KAFKA_UPSTREAM_PORT (19092..19102) overlaps KAFKA_CONTROLLER_PORT (19102..19112)"},
		{name: "a DIRECT port set by the user stays, and collides", counts: Counts{KafkaBrokers: 3},
			explicit: map[string]int{"KAFKA_DIRECT_PORT": 19094},
			overlap:  "KAFKA_UPSTREAM_PORT (19092..19095) overlaps KAFKA_DIRECT_PORT (19094..19097)"},
		{name: "room for a fourth broker is kept", counts: Counts{KafkaBrokers: 3},
			explicit: map[string]int{"KAFKA_CONTROLLER_PORT": 19095},
			overlap:  "KAFKA_UPSTREAM_PORT (19092..19095) overlaps KAFKA_CONTROLLER_PORT (19095..19098)"},
		{name: "the gateway's blocks per broker and replica", counts: Counts{Replicas: 2, KafkaBrokers: 3},
			explicit: map[string]int{"KAFKA_SASL_PORT": 9100},
			overlap:  "KAFKA_BROKER_PORT (9094..9103) overlaps KAFKA_SASL_PORT (9100..9109)"},
		{name: "the gateway's listener for each GATEWAY listener", counts: Counts{KafkaBrokers: 3},
			explicit: map[string]int{"KAFKA_GATEWAY_BROKER_PORT": 9390},
			overlap:  "KAFKA_SASL_SSL_PORT (9392..9396) overlaps KAFKA_GATEWAY_BROKER_PORT (9390..9394)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := defaultPorts(t)
			for env, port := range c.explicit {
				for _, e := range PortEnv {
					if e.Name == env {
						*e.field(&p) = port
					}
				}
			}
			got, err := p.ForReplicas(c.counts, func(env string) bool { _, ok := c.explicit[env]; return ok })
			if c.overlap != "" {
				if err == nil || !strings.Contains(err.Error(), c.overlap) {
					t.Fatalf("want an error naming %q, got %v", c.overlap, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("layout refused: %v", err)
			}
			up := upstream{got.KafkaUpstream, got.KafkaController, got.KafkaDirect, got.KafkaSASLUp, got.KafkaSSLUp, got.KafkaSASLSSLUp}
			gw := gateway{got.KafkaBroker, got.KafkaSASL, got.KafkaTLS, got.KafkaSASLSSL, got.KafkaGatewayBroker}
			if up != c.upstream || gw != c.gateway {
				t.Errorf("broker ports %+v, gateway ports %+v; want %+v, %+v", up, gw, c.upstream, c.gateway)
			}
		})
	}
}

// Broker i's gateway listener of a kind is in the i-th block of `replicas` ports (in a
// cluster, after the bootstrap listener's block), so replica r (+ r) of one broker is never
// another broker's, nor the bootstrap listener's.
func TestGatewayBrokerPortGivesEachBrokerABlockOfReplicas(t *testing.T) {
	for _, c := range []struct {
		first, broker int
		counts        Counts
		want          int
	}{
		{9192, 0, Counts{}, 9192}, {9192, 0, Counts{Replicas: 3}, 9192},
		{9192, 0, Counts{KafkaBrokers: 3}, 9193}, {9192, 2, Counts{KafkaBrokers: 3}, 9195},
		{9192, 1, Counts{Replicas: 3, KafkaBrokers: 3}, 9198}, {9192, 3, Counts{Replicas: 3, KafkaBrokers: 3}, 9204},
	} {
		if got := GatewayBrokerPort(c.first, c.broker, c.counts); got != c.want {
			t.Errorf("GatewayBrokerPort(%d, %d, %+v) = %d, want %d", c.first, c.broker, c.counts, got, c.want)
		}
	}
	c := Counts{Replicas: 3, KafkaBrokers: 3}
	seen := map[int]bool{9192: true, 9193: true, 9194: true} // the bootstrap listener's
	for b := range c.kafkaSlots() {
		for r := range 3 {
			port := GatewayBrokerPort(9192, b, c) + r
			if seen[port] {
				t.Errorf("broker %d replica %d on %d, as another's", b, r, port)
			}
			if port >= 9192+PerReplicaPerKafkaBroker.width(c) {
				t.Errorf("broker %d replica %d on %d, past the span", b, r, port)
			}
			seen[port] = true
		}
	}
}

// A test stack's Kafka spans are free and consecutive, the added broker's ports too.
func TestFreePortsForKeepsRoomForOneMoreBroker(t *testing.T) {
	for _, counts := range []Counts{{KafkaBrokers: 3}, {Replicas: 2, KafkaBrokers: 3}} {
		p, err := FreePortsFor(counts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.ForReplicas(counts, allExplicit); err != nil {
			t.Errorf("%+v: %v", counts, err)
		}
		var want []int
		for _, first := range []int{p.KafkaUpstream, p.KafkaController, p.KafkaDirect, p.KafkaSASLUp, p.KafkaSSLUp, p.KafkaSASLSSLUp} {
			for i := range counts.KafkaBrokers + 1 {
				want = append(want, first+i)
			}
		}
		for _, first := range []int{p.KafkaBroker, p.KafkaSASL, p.KafkaTLS, p.KafkaSASLSSL, p.KafkaGatewayBroker} {
			for i := range (counts.KafkaBrokers + 1) * max(counts.Replicas, 1) {
				want = append(want, first+i)
			}
		}
		for _, port := range want {
			l, err := net.Listen("tcp", addr(port))
			if err != nil {
				t.Errorf("%+v: port %d is not free: %v", counts, port, err)
				continue
			}
			l.Close()
		}
	}
}
