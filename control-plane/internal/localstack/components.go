package localstack

import (
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
)

// BaselineNATSUser is the NATS user that reaches nats-server directly (its password is
// "<user>-secret"): benchmark baselines and tests that read what the gateway let through. No
// policy may name it. BaselineKafkaUser is its Kafka counterpart, the only user of the broker's
// DIRECT listener (SASL PLAIN).
const (
	BaselineNATSUser  = "baseline"
	BaselineKafkaUser = "baseline"
)

// kafkaConfig: one KRaft node acting as broker and controller, or one node of a cluster
// (kafkaNode). No listener admits a tenant's client around the gateway:
//   - GATEWAY, behind the gateway's plaintext listener, advertises that listener, so every client
//     that bootstraps through Envoy comes back through Envoy (a cluster's brokers advertise
//     themselves instead, and the gateway fronts each one's GATEWAY listener as it does DIRECT);
//   - SASL and SASLSSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with Kafka's unsecured JWT
//     validator, fit for a local broker only; every SASL user <name> has the password
//     <name>-secret) and SSL advertise themselves and are fronted by the gateway with address
//     rewriting;
//   - these four are SSL or SASL_SSL and require a client certificate from the broker CA, which
//     only the gateway holds: behind them the gateway originates TLS (its SASL listener meets
//     clients in SASL_PLAINTEXT, its SASL_SSL and mTLS listeners in TLS);
//   - DIRECT advertises itself, as the brokers of an existing cluster do, for direct clients
//     (benchmark baselines, tests that read what the gateway let through) and the gateway's
//     rewriting listener in front of it: SASL_PLAINTEXT PLAIN, its one user BaselineKafkaUser,
//     a principal of no tenant (also the broker's own, between its listeners).
//
// A cluster's topics default to three replicas, two in sync (kafkaNode.Replication, MinISR).
var kafkaConfig = template.Must(template.New("kafka").Parse(`process.roles={{.Roles}}
node.id={{.NodeID}}
controller.quorum.voters={{.Voters}}
listeners=GATEWAY://127.0.0.1:{{.Broker}}{{with .Controller}},CONTROLLER://127.0.0.1:{{.}}{{end}},DIRECT://127.0.0.1:{{.Direct}},SASL://127.0.0.1:{{.SASL}},SSL://127.0.0.1:{{.SSL}},SASLSSL://127.0.0.1:{{.SASLSSL}}
advertised.listeners=GATEWAY://127.0.0.1:{{.Advertised}},DIRECT://127.0.0.1:{{.Direct}},SASL://127.0.0.1:{{.SASL}},SSL://127.0.0.1:{{.SSL}},SASLSSL://127.0.0.1:{{.SASLSSL}}
controller.listener.names=CONTROLLER
listener.security.protocol.map=GATEWAY:SSL,CONTROLLER:PLAINTEXT,DIRECT:SASL_PLAINTEXT,SASL:SASL_SSL,SSL:SSL,SASLSSL:SASL_SSL
{{- range $l := .SASLListeners}}
listener.name.{{$l}}.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.{{$l}}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{{range $.SASLUsers}} user_{{.}}="{{.}}-secret"{{end}};
listener.name.{{$l}}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.{{$l}}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.{{$l}}.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
{{- end}}
listener.name.direct.sasl.enabled.mechanisms=PLAIN
listener.name.direct.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="{{.Baseline}}" password="{{.Baseline}}-secret" user_{{.Baseline}}="{{.Baseline}}-secret";
sasl.mechanism.inter.broker.protocol=PLAIN
ssl.keystore.type=PEM
ssl.keystore.location={{.TLSDir}}/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location={{.TLSDir}}/broker-ca.crt
listener.name.gateway.ssl.client.auth=required
listener.name.sasl.ssl.client.auth=required
listener.name.ssl.ssl.client.auth=required
listener.name.saslssl.ssl.client.auth=required
inter.broker.listener.name=DIRECT
log.dirs={{.Dir}}/data
num.partitions=1
offsets.topic.replication.factor={{.Replication}}
offsets.topic.num.partitions=4
transaction.state.log.replication.factor={{.Replication}}
transaction.state.log.min.isr={{.MinISR}}
share.coordinator.state.topic.replication.factor={{.Replication}}
{{- if gt .Replication 1}}
share.coordinator.state.topic.min.isr={{.MinISR}}
default.replication.factor={{.Replication}}
min.insync.replicas={{.MinISR}}
{{- end}}
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
message.max.bytes=8388608
`))

const kafkaLog4j = `Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
`

func (s *Stack) startControlPlane() error {
	p := s.cfg.Ports
	args := []string{"serve", "--policy-dir", s.cfg.PolicyDir}
	if k := s.cfg.Kubernetes; k != nil {
		args = []string{"serve", "--policy-source", "kubernetes", "--kubeconfig", k.Kubeconfig, "--platform-namespace", k.Namespace,
			// A stopped control plane releases the Lease; these bound how long a killed one keeps it.
			"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "500ms"}
	}
	tls := func(name string) string { return filepath.Join(s.tls.dir, name) }
	args = append(args, "--nats-tls-listen", addr(p.NATSTLS),
		"--tls-cert-file", tls("gateway.crt"), "--tls-key-file", tls("gateway.key"), "--tls-client-ca-file", tls("ca.crt"),
		"--upstream-tls-ca-file", tls("broker-ca.crt"),
		"--upstream-tls-cert-file", tls("gateway-client.crt"), "--upstream-tls-key-file", tls("gateway-client.key"),
		"--tls-poll", "500ms")
	if s.cfg.NATSUpstreamTLS {
		args = append(args, "--nats-upstream-tls")
	}
	// NATS clients are told every replica's address (never a server's), so they fail over
	// between replicas on one host as they would behind a Service.
	args = append(args, "--nats-advertise", s.replicaAddrs(p.NATS), "--nats-tls-advertise", s.replicaAddrs(p.NATSTLS))
	if s.cfg.WithKafka {
		args = append(args, s.kafkaBrokerArgs()...)
	} else {
		args = append(args, "--kafka-listen", addr(p.Kafka)+",upstream-tls", "--kafka-upstream", s.KafkaBrokerGatewayAddr(0))
	}
	if p.NATSPlain != 0 {
		args = append(args, "--nats-plain-listen", addr(p.NATSPlain))
	}
	if p.KafkaPlain != 0 && s.cfg.WithKafka && !s.cfg.kafkaCluster() {
		args = append(args, "--kafka-plain-listen", addr(p.KafkaPlain))
	}
	args = append(args, s.noopListenArgs()...)
	if s.cfg.WithCollector {
		args = append(args, "--otlp-logs-endpoint", s.collectorEndpoint())
	}
	s.controlPlaneArgs = append(args,
		"--xds-listen", addr(p.XDS), "--http-listen", addr(p.ControlPlane),
		"--nats-listen", addr(p.NATS), "--nats-upstream", s.natsUpstreams(),
		"--wasm-file", s.cfg.WasmFile,
		"--debounce", "100ms", "--poll", "2s",
		// A development stack shows its tenants' busiest clients on /metrics.
		"--client-metrics", "10",
	)
	p2, err := s.startProcess("control-plane", nil, s.tool("weighstation"), s.controlPlaneArgs...)
	if err != nil {
		return err
	}
	s.ControlPlane = p2
	s.procs = append(s.procs, p2)
	return waitHTTP(p2, "http://"+addr(p.ControlPlane)+"/healthz", startTimeout)
}

// noopListenArgs are the no-op listeners asked for (the benchmarks'), each with its module;
// Kafka's as its plain listener's, to the one broker's listener behind the gateway.
func (s *Stack) noopListenArgs() []string {
	p := s.cfg.Ports
	kafka := s.cfg.WithKafka && !s.cfg.kafkaCluster()
	var args []string
	for _, n := range []struct {
		on         bool
		proto      string
		port       int
		kind, file string
	}{
		{true, "nats", p.NATSNoopWasm, "wasm", s.cfg.NoopWasmFile},
		{true, "nats", p.NATSNoopNative, "native", s.cfg.NoopNativeFile},
		{kafka, "kafka", p.KafkaNoopWasm, "wasm", s.cfg.NoopWasmFile},
		{kafka, "kafka", p.KafkaNoopNative, "native", s.cfg.NoopNativeFile},
	} {
		if n.on && n.port != 0 {
			args = append(args, "--noop-listen", n.proto+"="+addr(n.port)+","+n.kind+"="+n.file)
		}
	}
	return args
}

// replicaAddrs is a gateway listener's address on every replica: port, port+1, ...
func (s *Stack) replicaAddrs(port int) string {
	var out []string
	for i := range s.cfg.replicaCount() {
		out = append(out, addr(port+i))
	}
	return strings.Join(out, ",")
}

// RestartControlPlane stops the control plane (SIGTERM, as a rollout does) and starts it again
// with its arguments followed by extra, which override them.
func (s *Stack) RestartControlPlane(extra ...string) error {
	s.StopControlPlane()
	return s.StartControlPlane(extra...)
}

// StopControlPlane stops the control plane as a rollout does (SIGTERM); StartControlPlane
// brings it back.
func (s *Stack) StopControlPlane() { s.ControlPlane.stop(stopGrace) }

// StartControlPlane starts the stopped control plane again with its arguments followed by
// extra, which override them.
func (s *Stack) StartControlPlane(extra ...string) error {
	old := s.ControlPlane
	args := append(append([]string{}, s.controlPlaneArgs...), extra...)
	next, err := s.startProcess("control-plane", nil, s.tool("weighstation"), args...)
	if err != nil {
		return err
	}
	for i, p := range s.procs {
		if p == old {
			s.procs[i] = next
		}
	}
	s.ControlPlane = next
	return waitHTTP(next, "http://"+addr(s.cfg.Ports.ControlPlane)+"/healthz", startTimeout)
}

// StartRedis starts the quota store: Redis without persistence (quota reports live seconds).
// Exported so that tests can kill the store and bring it back.
func (s *Stack) StartRedis() error {
	p, err := s.startProcess("redis", nil, s.tool("redis-server"),
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.cfg.Ports.Redis),
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err != nil {
		return err
	}
	s.Redis = p
	s.procs = append(s.procs, p)
	return waitTCP(p, addr(s.cfg.Ports.Redis), startTimeout)
}

func (s *Stack) startQuota() error {
	store, env, err := s.quotaStoreArgs()
	if err != nil {
		return err
	}
	p, err := s.startProcess("quota", env, s.tool("weighstation"), append([]string{"quota", "--listen", addr(s.cfg.Ports.Quota)}, store...)...)
	if err != nil {
		return err
	}
	s.Quota = p
	s.procs = append(s.procs, p)
	return waitHTTP(p, "http://"+addr(s.cfg.Ports.Quota)+"/healthz", startTimeout)
}
