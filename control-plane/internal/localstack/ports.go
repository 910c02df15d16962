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
	KafkaUpstream   int // Kafka broker
	KafkaController int // Kafka KRaft controller
	XDS             int // control plane ADS
	ControlPlane    int // control plane HTTP
	NATSPlain       int // optional: Envoy NATS listener without the filter (0: none)
	KafkaDirect     int // Kafka's second listener, advertising itself (direct clients, benchmarks)
	KafkaBroker     int // Envoy listener fronting KafkaDirect: broker addresses are rewritten
}

// PortEnv names the environment variable that overrides each port, with its default (contract §1).
var PortEnv = []struct {
	Name    string
	Default int
	field   func(*Ports) *int
}{
	{"NATS_PORT", 4222, func(p *Ports) *int { return &p.NATS }},
	{"KAFKA_PORT", 9092, func(p *Ports) *int { return &p.Kafka }},
	{"ADMIN_PORT", 9901, func(p *Ports) *int { return &p.Admin }},
	{"NATS_UPSTREAM_PORT", 14222, func(p *Ports) *int { return &p.NATSUpstream }},
	{"KAFKA_UPSTREAM_PORT", 19092, func(p *Ports) *int { return &p.KafkaUpstream }},
	{"KAFKA_CONTROLLER_PORT", 19093, func(p *Ports) *int { return &p.KafkaController }},
	{"XDS_PORT", 18000, func(p *Ports) *int { return &p.XDS }},
	{"CONTROL_PLANE_PORT", 18080, func(p *Ports) *int { return &p.ControlPlane }},
	{"KAFKA_DIRECT_PORT", 19094, func(p *Ports) *int { return &p.KafkaDirect }},
	{"KAFKA_BROKER_PORT", 9093, func(p *Ports) *int { return &p.KafkaBroker }},
	{"NATS_PLAIN_PORT", 0, func(p *Ports) *int { return &p.NATSPlain }},
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
func FreePorts() (Ports, error) {
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
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return p, err
		}
		held = append(held, l)
		*e.field(&p) = l.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
