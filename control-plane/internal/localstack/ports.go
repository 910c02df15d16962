// Package localstack starts and stops the whole local stack: nats-server, a single-node KRaft
// Kafka, the control plane and Envoy with the filter. `make run` and the integration tests both
// use it, so the stack the tests prove is the one developers run.
package localstack

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// Ports are the stack's listen ports on 127.0.0.1.
type Ports struct {
	NATS            int // Envoy's NATS listener
	Kafka           int // Envoy's Kafka listener (and Kafka's advertised port)
	Admin           int // Envoy admin
	NATSUpstream    int // nats-server
	NATSMonitor     int // nats-server's monitoring endpoint (/connz, /varz)
	NATSCluster     int // nats-server's cluster (route) listener, with more than one server
	KafkaUpstream   int // Kafka broker
	KafkaController int // Kafka KRaft controller
	XDS             int // control plane ADS
	ControlPlane    int // control plane HTTP
	NATSPlain       int // optional: Envoy NATS listener without the filter (0: none)
	KafkaPlain      int // optional: Envoy Kafka listener without the filter, to the broker listener behind Kafka (0: none)
	KafkaDirect     int // Kafka's second listener, advertising itself (direct clients, benchmarks)
	KafkaBroker     int // Envoy listener fronting KafkaDirect: broker addresses are rewritten
	KafkaSASL       int // Envoy listener fronting KafkaSASLUp: clients authenticate with SASL
	KafkaSASLUp     int // Kafka's SASL listener (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) in SASL_SSL, admitting only the gateway's client certificate; advertising itself
	NATSTLS         int // Envoy's TLS-first NATS listener
	KafkaTLS        int // Envoy listener (mTLS: client certificate required) fronting KafkaSSLUp
	KafkaSASLSSL    int // Envoy listener (TLS) fronting KafkaSASLSSLUp: SASL_SSL for clients
	KafkaSSLUp      int // Kafka's SSL listener, which admits only the gateway's client certificate
	KafkaSASLSSLUp  int // Kafka's SASL_SSL listener, which admits only the gateway's client certificate
	Redis           int // the quota store (with the quota service, for global limits)
	Quota           int // the quota service (weighstation quota)
	OTLP            int // the OpenTelemetry Collector's OTLP/HTTP receiver (Config.WithCollector)
}

// PortSpan says how many consecutive ports, from a PortEnv variable's port, the stack listens on.
type PortSpan int

const (
	OnePort       PortSpan = iota // a single port
	PerReplica                    // Envoy's: with several replicas, replica i listens on port + i
	PerNATSServer                 // nats-server's: with several servers, server i listens on port + i
)

// width is how many ports the span covers in a stack of this many replicas and nats-servers.
func (k PortSpan) width(replicas, natsServers int) int {
	switch k {
	case PerReplica:
		return max(replicas, 1)
	case PerNATSServer:
		return max(natsServers, 1)
	}
	return 1
}

// PortEnv names the environment variable that overrides each port, with its default (contract §1)
// and its span.
var PortEnv = []struct {
	Name    string
	Default int
	Span    PortSpan
	field   func(*Ports) *int
}{
	{"NATS_PORT", 4222, PerReplica, func(p *Ports) *int { return &p.NATS }},
	{"KAFKA_PORT", 9092, PerReplica, func(p *Ports) *int { return &p.Kafka }},
	{"ADMIN_PORT", 9901, PerReplica, func(p *Ports) *int { return &p.Admin }},
	{"NATS_UPSTREAM_PORT", 14222, PerNATSServer, func(p *Ports) *int { return &p.NATSUpstream }},
	{"NATS_MONITOR_PORT", 18222, PerNATSServer, func(p *Ports) *int { return &p.NATSMonitor }},
	{"NATS_CLUSTER_PORT", 16222, PerNATSServer, func(p *Ports) *int { return &p.NATSCluster }},
	{"KAFKA_UPSTREAM_PORT", 19092, OnePort, func(p *Ports) *int { return &p.KafkaUpstream }},
	{"KAFKA_CONTROLLER_PORT", 19093, OnePort, func(p *Ports) *int { return &p.KafkaController }},
	{"XDS_PORT", 18000, OnePort, func(p *Ports) *int { return &p.XDS }},
	{"CONTROL_PLANE_PORT", 18080, OnePort, func(p *Ports) *int { return &p.ControlPlane }},
	{"KAFKA_DIRECT_PORT", 19094, OnePort, func(p *Ports) *int { return &p.KafkaDirect }},
	{"KAFKA_BROKER_PORT", 9093, PerReplica, func(p *Ports) *int { return &p.KafkaBroker }},
	{"KAFKA_SASL_PORT", 9192, PerReplica, func(p *Ports) *int { return &p.KafkaSASL }},
	{"KAFKA_SASL_UPSTREAM_PORT", 19095, OnePort, func(p *Ports) *int { return &p.KafkaSASLUp }},
	{"NATS_TLS_PORT", 4322, PerReplica, func(p *Ports) *int { return &p.NATSTLS }},
	{"KAFKA_TLS_PORT", 9292, PerReplica, func(p *Ports) *int { return &p.KafkaTLS }},
	{"KAFKA_SASL_SSL_PORT", 9392, PerReplica, func(p *Ports) *int { return &p.KafkaSASLSSL }},
	{"KAFKA_SSL_UPSTREAM_PORT", 19096, OnePort, func(p *Ports) *int { return &p.KafkaSSLUp }},
	{"KAFKA_SASL_SSL_UPSTREAM_PORT", 19097, OnePort, func(p *Ports) *int { return &p.KafkaSASLSSLUp }},
	{"REDIS_PORT", 16379, OnePort, func(p *Ports) *int { return &p.Redis }},
	{"QUOTA_PORT", 18090, OnePort, func(p *Ports) *int { return &p.Quota }},
	{"OTLP_PORT", 14318, OnePort, func(p *Ports) *int { return &p.OTLP }},
	{"NATS_PLAIN_PORT", 0, PerReplica, func(p *Ports) *int { return &p.NATSPlain }},
	{"KAFKA_PLAIN_PORT", 0, PerReplica, func(p *Ports) *int { return &p.KafkaPlain }},
}

// ForReplicas checks that `replicas` Envoys and `natsServers` nats-servers fit on consecutive
// ports from each listener's port (replica i listens on port + i, its admin on Admin + i; server i
// on NATSUpstream + i, NATSMonitor + i and NATSCluster + i). The default Kafka broker listener
// (9093) would collide with the second replica's Kafka listener: unless set explicitly
// (brokerSet), it moves just past the Kafka listeners.
func (p Ports) ForReplicas(replicas, natsServers int, brokerSet bool) (Ports, error) {
	if replicas <= 1 && natsServers <= 1 {
		return p, nil
	}
	if !brokerSet && p.KafkaBroker > p.Kafka && p.KafkaBroker < p.Kafka+replicas {
		p.KafkaBroker = p.Kafka + replicas
	}
	type span struct {
		name  string
		first int
		n     int
	}
	var spans []span
	for _, e := range PortEnv {
		spans = append(spans, span{e.Name, *e.field(&p), e.Span.width(replicas, natsServers)})
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.first != 0 && b.first != 0 && a.first < b.first+b.n && b.first < a.first+a.n {
				return p, fmt.Errorf("with %d gateway replicas and %d nats-servers %s (%d..%d) overlaps %s (%d..%d): move one",
					replicas, max(natsServers, 1), a.name, a.first, a.first+a.n-1, b.name, b.first, b.first+b.n-1)
			}
		}
	}
	return p, nil
}

// PortsFromEnv returns the defaults with any environment overrides applied.
func PortsFromEnv() (Ports, error) {
	var p Ports
	for _, e := range PortEnv {
		*e.field(&p) = e.Default
		if v := os.Getenv(e.Name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return p, fmt.Errorf("%s=%q is not a port", e.Name, v)
			}
			*e.field(&p) = n
		}
	}
	return p, nil
}

// FreePorts picks a free loopback port for each role (for tests).
func FreePorts() (Ports, error) { return FreePortsFor(1, 1) }

// FreePort picks one more free loopback port.
func FreePort() (int, error) {
	run, err := consecutive(1)
	if err != nil {
		return 0, err
	}
	defer run[0].Close()
	return run[0].Addr().(*net.TCPAddr).Port, nil
}

// FreePortsFor picks free loopback ports for a stack of `replicas` Envoys and `natsServers`
// nats-servers: each gateway listener and the admin get `replicas` consecutive ports, each
// nats-server port `natsServers`.
func FreePortsFor(replicas, natsServers int) (Ports, error) {
	var p Ports
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, e := range PortEnv {
		if e.Default == 0 {
			continue // optional listeners stay off in tests
		}
		run, err := consecutive(e.Span.width(replicas, natsServers))
		if err != nil {
			return p, err
		}
		held = append(held, run...)
		*e.field(&p) = run[0].Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

// consecutive holds n free consecutive loopback ports.
func consecutive(n int) ([]net.Listener, error) {
	for attempt := 0; attempt < 100; attempt++ {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		run := []net.Listener{first}
		base := first.Addr().(*net.TCPAddr).Port
		for i := 1; i < n; i++ {
			l, err := net.Listen("tcp", addr(base+i))
			if err != nil {
				break
			}
			run = append(run, l)
		}
		if len(run) == n {
			return run, nil
		}
		for _, l := range run {
			l.Close()
		}
	}
	return nil, fmt.Errorf("no %d consecutive free ports", n)
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
