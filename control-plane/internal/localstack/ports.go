// Package localstack starts and stops the whole local stack: nats-server, a single-node KRaft
// Kafka (or a cluster), the control plane and Envoy with the filter. `make run` and the
// integration tests both use it, so the stack the tests prove is the one developers run.
package localstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// Ports are the stack's listen ports on 127.0.0.1: each is the first of its span (PortSpan).
// Layout with Config.KafkaBrokers N > 1 (ForReplicas, README "The local stack"): broker i
// listens on every Kafka broker port + i (KafkaUpstream, KafkaController, KafkaDirect,
// KafkaSASLUp, KafkaSSLUp, KafkaSASLSSLUp; by default blocks of ten from 19092), and the
// gateway's listener for it of each kind (KafkaBroker fronting DIRECT, KafkaSASL, KafkaTLS,
// KafkaSASLSSL, KafkaGatewayBroker fronting GATEWAY) is GatewayBrokerPort: a block of one port
// per replica per broker, after the block of the kind's bootstrap listener. Every span keeps
// room for broker N (AddKafkaBroker).
type Ports struct {
	NATS            int // Envoy's NATS listener
	Kafka           int // Envoy's Kafka listener (and a single broker's advertised GATEWAY port)
	Admin           int // Envoy admin
	NATSUpstream    int // nats-server
	NATSMonitor     int // nats-server's monitoring endpoint (/connz, /varz)
	NATSCluster     int // nats-server's cluster (route) listener, with more than one server
	KafkaUpstream   int // Kafka broker (its GATEWAY listener)
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
	// KafkaGatewayBroker is the Envoy listener fronting each broker's GATEWAY listener, with
	// more than one broker only: a cluster's brokers advertise their own GATEWAY addresses (a
	// single broker advertises Kafka), which the gateway rewrites to these as it does DIRECT's.
	KafkaGatewayBroker int

	// Optional (0: none): Envoy NATS and Kafka listeners, like NATSPlain and KafkaPlain, whose
	// filter does nothing: the no-op Wasm module or the no-op dynamic module (Config.NoopWasmFile,
	// NoopNativeFile).
	NATSNoopWasm, NATSNoopNative, KafkaNoopWasm, KafkaNoopNative int
}

// PortSpan says how many consecutive ports, from a PortEnv variable's port, the stack listens on.
type PortSpan int

const (
	OnePort       PortSpan = iota // a single port
	PerReplica                    // Envoy's: with several replicas, replica i listens on port + i
	PerNATSServer                 // nats-server's: with several servers, server i listens on port + i
	// PerKafkaBroker is a Kafka broker listener's: with several brokers, broker i listens on
	// port + i, and one port more is kept for a broker added later (Stack.AddKafkaBroker).
	PerKafkaBroker
	// PerReplicaPerKafkaBroker is a gateway listener kind fronting every broker: with one
	// broker on its port, with several the bootstrap listener on port and broker i on
	// port + (i+1)·replicas, on which replica r listens + r (GatewayBrokerPort); one block more
	// is kept for a broker added later.
	PerReplicaPerKafkaBroker
	// PerRedisStore is the quota store's: its data nodes, then its sentinels or its nodes'
	// cluster bus ports (redisPorts).
	PerRedisStore
)

// Counts is how many of each process a stack runs (0 counts as 1): they decide how wide each
// span is.
type Counts struct {
	Replicas     int // Envoys (Config.Replicas)
	NATSServers  int // nats-servers (Config.NATSServers)
	KafkaBrokers int // Kafka brokers (Config.KafkaBrokers)
	// RedisMode is how the quota store runs (Config.RedisMode): its nodes take consecutive ports.
	RedisMode redisclient.Mode
}

// Counts is how many of each process the stack runs, for its ports (FreePortsFor).
func (c Config) Counts() Counts {
	return Counts{Replicas: c.Replicas, NATSServers: c.NATSServers, KafkaBrokers: c.KafkaBrokers, RedisMode: c.RedisMode}
}

// kafkaSlots is how many brokers the Kafka spans have room for: a cluster's, and one more.
func (c Counts) kafkaSlots() int {
	if c.KafkaBrokers <= 1 {
		return 1
	}
	return c.KafkaBrokers + 1
}

// width is how many ports the span covers in a stack of these counts.
func (k PortSpan) width(c Counts) int {
	switch k {
	case PerReplica:
		return max(c.Replicas, 1)
	case PerNATSServer:
		return max(c.NATSServers, 1)
	case PerKafkaBroker:
		return c.kafkaSlots()
	case PerReplicaPerKafkaBroker:
		return max(c.Replicas, 1) * c.kafkaGatewayBlocks()
	case PerRedisStore:
		return redisPorts(c.RedisMode)
	}
	return 1
}

// kafkaGatewayBlocks is how many blocks (of one port per replica) a gateway listener kind
// spans: one broker's; or a cluster's bootstrap listener and every broker's.
func (c Counts) kafkaGatewayBlocks() int {
	if c.KafkaBrokers <= 1 {
		return 1
	}
	return c.kafkaSlots() + 1
}

// GatewayBrokerPort is where replica 0 of the gateway listens for broker i on a
// PerReplicaPerKafkaBroker listener kind whose first port is first: a single broker at first;
// in a cluster, each broker (node id i+1) in block i+1 of one port per replica, after the
// bootstrap listener's block, so no replica's port of one broker is another broker's.
func GatewayBrokerPort(first, broker int, c Counts) int {
	if c.KafkaBrokers <= 1 {
		return first + broker*max(c.Replicas, 1)
	}
	return first + (broker+1)*max(c.Replicas, 1)
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
	{"KAFKA_UPSTREAM_PORT", 19092, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaUpstream }},
	{"KAFKA_CONTROLLER_PORT", 19093, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaController }},
	{"XDS_PORT", 18000, OnePort, func(p *Ports) *int { return &p.XDS }},
	{"CONTROL_PLANE_PORT", 18080, OnePort, func(p *Ports) *int { return &p.ControlPlane }},
	{"KAFKA_DIRECT_PORT", 19094, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaDirect }},
	{"KAFKA_BROKER_PORT", 9093, PerReplicaPerKafkaBroker, func(p *Ports) *int { return &p.KafkaBroker }},
	{"KAFKA_SASL_PORT", 9192, PerReplicaPerKafkaBroker, func(p *Ports) *int { return &p.KafkaSASL }},
	{"KAFKA_SASL_UPSTREAM_PORT", 19095, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaSASLUp }},
	{"NATS_TLS_PORT", 4322, PerReplica, func(p *Ports) *int { return &p.NATSTLS }},
	{"KAFKA_TLS_PORT", 9292, PerReplicaPerKafkaBroker, func(p *Ports) *int { return &p.KafkaTLS }},
	{"KAFKA_SASL_SSL_PORT", 9392, PerReplicaPerKafkaBroker, func(p *Ports) *int { return &p.KafkaSASLSSL }},
	{"KAFKA_SSL_UPSTREAM_PORT", 19096, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaSSLUp }},
	{"KAFKA_SASL_SSL_UPSTREAM_PORT", 19097, PerKafkaBroker, func(p *Ports) *int { return &p.KafkaSASLSSLUp }},
	{"REDIS_PORT", 16379, PerRedisStore, func(p *Ports) *int { return &p.Redis }},
	{"QUOTA_PORT", 18090, OnePort, func(p *Ports) *int { return &p.Quota }},
	{"OTLP_PORT", 14318, OnePort, func(p *Ports) *int { return &p.OTLP }},
	{"NATS_PLAIN_PORT", 0, PerReplica, func(p *Ports) *int { return &p.NATSPlain }},
	{"KAFKA_PLAIN_PORT", 0, PerReplica, func(p *Ports) *int { return &p.KafkaPlain }},
	{"NATS_NOOP_WASM_PORT", 0, PerReplica, func(p *Ports) *int { return &p.NATSNoopWasm }},
	{"NATS_NOOP_NATIVE_PORT", 0, PerReplica, func(p *Ports) *int { return &p.NATSNoopNative }},
	{"KAFKA_NOOP_WASM_PORT", 0, PerReplica, func(p *Ports) *int { return &p.KafkaNoopWasm }},
	{"KAFKA_NOOP_NATIVE_PORT", 0, PerReplica, func(p *Ports) *int { return &p.KafkaNoopNative }},
	{"KAFKA_GATEWAY_BROKER_PORT", 9492, PerReplicaPerKafkaBroker, func(p *Ports) *int { return &p.KafkaGatewayBroker }},
}

// kafkaBlock is how far apart a cluster's broker listener kinds are by default: broker i of
// each kind at its block + i, with room for MaxKafkaBrokers and the one broker added later.
const kafkaBlock = 10

// MaxKafkaBrokers is the most brokers the default layout has room for.
const MaxKafkaBrokers = kafkaBlock - 1

// kafkaBrokerKinds are a broker's listener ports other than its GATEWAY listener, in the order
// of their blocks after KafkaUpstream's.
var kafkaBrokerKinds = []struct {
	env   string
	field func(*Ports) *int
}{
	{"KAFKA_CONTROLLER_PORT", func(p *Ports) *int { return &p.KafkaController }},
	{"KAFKA_DIRECT_PORT", func(p *Ports) *int { return &p.KafkaDirect }},
	{"KAFKA_SASL_UPSTREAM_PORT", func(p *Ports) *int { return &p.KafkaSASLUp }},
	{"KAFKA_SSL_UPSTREAM_PORT", func(p *Ports) *int { return &p.KafkaSSLUp }},
	{"KAFKA_SASL_SSL_UPSTREAM_PORT", func(p *Ports) *int { return &p.KafkaSASLSSLUp }},
}

// ForReplicas checks that c's Envoys, nats-servers and Kafka brokers fit on consecutive ports
// from each listener's port (replica i listens on port + i, its admin on Admin + i; server i
// on NATSUpstream + i, NATSMonitor + i and NATSCluster + i; broker i on each Kafka broker port
// + i, and the gateway's listener for it on GatewayBrokerPort). explicit reports the
// variables set by the user (nil: none); the others move where the defaults would collide:
//   - the default Kafka broker listener (9093) would collide with the second replica's Kafka
//     listener: it moves just past the Kafka listeners;
//   - a single broker's ports are consecutive (19092..19097): with more than one broker each
//     kind moves to a block of its own, KafkaUpstream + kafkaBlock·k (19102 the controllers,
//     19112 DIRECT, 19122 SASL, 19132 SSL, 19142 SASL_SSL), broker i at + i.
func (p Ports) ForReplicas(c Counts, explicit func(env string) bool) (Ports, error) {
	if c.Replicas <= 1 && c.NATSServers <= 1 && c.KafkaBrokers <= 1 && redisPorts(c.RedisMode) == 1 {
		return p, nil
	}
	if explicit == nil {
		explicit = func(string) bool { return false }
	}
	replicas := max(c.Replicas, 1)
	if !explicit("KAFKA_BROKER_PORT") && p.KafkaBroker > p.Kafka && p.KafkaBroker < p.Kafka+replicas {
		p.KafkaBroker = p.Kafka + replicas
	}
	if c.KafkaBrokers > 1 {
		for k, kind := range kafkaBrokerKinds {
			if !explicit(kind.env) {
				*kind.field(&p) = p.KafkaUpstream + kafkaBlock*(k+1)
			}
		}
	}
	return p, p.checkSpans(c)
}

// checkSpans reports the first two spans that overlap.
func (p Ports) checkSpans(c Counts) error {
	type span struct {
		name  string
		first int
		n     int
	}
	var spans []span
	for _, e := range PortEnv {
		spans = append(spans, span{e.Name, *e.field(&p), e.Span.width(c)})
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.first != 0 && b.first != 0 && a.first < b.first+b.n && b.first < a.first+a.n {
				return fmt.Errorf("with %d gateway replicas, %d nats-servers and %d Kafka brokers %s (%d..%d) overlaps %s (%d..%d): move one",
					max(c.Replicas, 1), max(c.NATSServers, 1), max(c.KafkaBrokers, 1), a.name, a.first, a.first+a.n-1, b.name, b.first, b.first+b.n-1)
			}
		}
	}
	return nil
}

// Holds says whether port is among p's (any span of a stack of counts c): a port picked for
// something else after p must not be.
func (p Ports) Holds(port int, c Counts) bool {
	for _, e := range PortEnv {
		if first := *e.field(&p); first != 0 && port >= first && port < first+e.Span.width(c) {
			return true
		}
	}
	return false
}

// Env is the environment in which `make run` and every tool that honours PortEnv use p.
func (p Ports) Env() []string {
	var env []string
	for _, e := range PortEnv {
		if v := *e.field(&p); v != 0 {
			env = append(env, fmt.Sprintf("%s=%d", e.Name, v))
		}
	}
	return env
}

// Moved maps each default port to p's, for a command written against the defaults.
func (p Ports) Moved() map[int]int {
	moved := map[int]int{}
	for _, e := range PortEnv {
		if v := *e.field(&p); e.Default != 0 && v != 0 {
			moved[e.Default] = v
		}
	}
	return moved
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
func FreePorts() (Ports, error) { return FreePortsFor(Counts{}) }

// FreePort picks one more free loopback port.
func FreePort() (int, error) {
	run, err := consecutive(1)
	if err != nil {
		return 0, err
	}
	defer run[0].Close()
	return run[0].Addr().(*net.TCPAddr).Port, nil
}

// FreePortsFor picks free loopback ports for a stack of these counts: each span (see PortSpan)
// gets as many consecutive ports as it covers, so a cluster's brokers, and the one added later,
// find theirs free.
func FreePortsFor(c Counts) (Ports, error) {
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
		run, err := consecutive(e.Span.width(c))
		if err != nil {
			return p, err
		}
		held = append(held, run...)
		*e.field(&p) = run[0].Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

// consecutive holds n free consecutive loopback ports, outside the kernel's ephemeral range
// (unprivilegedPorts): a port picked there is free now but, released until its server binds
// it, may become the source port of any outgoing connection meanwhile (seen once: a broker's
// connection to another took an Envoy listener's port while the stack started).
func consecutive(n int) ([]net.Listener, error) {
	lo, hi := unprivilegedPorts(n)
	for attempt := 0; attempt < 100; attempt++ {
		base := lo + rand.IntN(hi-lo)
		first, err := net.Listen("tcp", addr(base))
		if err != nil {
			continue
		}
		run := []net.Listener{first}
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

// unprivilegedPorts is the larger of the ranges of bases for n consecutive ports below and
// above the kernel's ephemeral ports (net.ipv4.ip_local_port_range; Linux's default
// 32768–60999 if unreadable), from 10000 up.
func unprivilegedPorts(n int) (lo, hi int) {
	ephemeralLo, ephemeralHi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, errL := strconv.Atoi(f[0])
			h, errH := strconv.Atoi(f[1])
			if errL == nil && errH == nil && l <= h {
				ephemeralLo, ephemeralHi = l, h
			}
		}
	}
	below, above := ephemeralLo-n-10000, 65536-n-(ephemeralHi+1)
	if below >= above {
		return 10000, 10000 + max(below, 1)
	}
	return ephemeralHi + 1, ephemeralHi + 1 + max(above, 1)
}
