// Command weighstation-localstack is `make run`: it starts nats-server, Kafka, the control plane
// watching POLICY_DIR and Envoy with the filter, prints the endpoints and stops everything on
// Ctrl-C or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// The filters of the optional no-op listeners (NATS_NOOP_WASM_PORT…), where the Makefile
// builds them (make noop-filters), relative to -root.
const (
	noopWasm   = "wasm-filter/target/wasm32-wasip1/release/weighstation_noop.wasm"
	noopNative = "wasm-filter/target/release/libweighstation_native_noop.so"
)

func main() {
	root := flag.String("root", ".", "repository root (holds .tools/ and the built filter)")
	wasm := flag.String("wasm", "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm", "filter module, relative to -root")
	flag.Parse()
	if err := run(*root, *wasm); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(root, wasm string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	ports, err := localstack.PortsFromEnv()
	if err != nil {
		return err
	}
	replicas := 1
	if v := os.Getenv("GATEWAY_REPLICAS"); v != "" {
		if replicas, err = strconv.Atoi(v); err != nil || replicas < 1 || replicas > 16 {
			return fmt.Errorf("GATEWAY_REPLICAS=%q is not a count of 1 to 16", v)
		}
	}
	natsServers := 1
	if v := os.Getenv("NATS_SERVERS"); v != "" {
		if natsServers, err = strconv.Atoi(v); err != nil || natsServers < 1 || natsServers > 16 {
			return fmt.Errorf("NATS_SERVERS=%q is not a count of 1 to 16", v)
		}
	}
	kafkaBrokers := 1
	if v := os.Getenv("KAFKA_BROKERS"); v != "" {
		if kafkaBrokers, err = strconv.Atoi(v); err != nil || kafkaBrokers < 1 || kafkaBrokers > localstack.MaxKafkaBrokers {
			return fmt.Errorf("KAFKA_BROKERS=%q is not a count of 1 to %d", v, localstack.MaxKafkaBrokers)
		}
	}
	// REDIS_MODE=sentinel or cluster runs the quota store (with GATEWAY_REPLICAS > 1) as a
	// primary, a replica and three sentinels, or as a cluster of three primaries and their
	// replicas, with TLS and passwords (docs/operations.md, "The quota store").
	redisMode := redisclient.Mode(os.Getenv("REDIS_MODE"))
	if redisMode != "" && !slices.Contains(redisclient.Modes, redisMode) {
		return fmt.Errorf("REDIS_MODE=%q: want single, sentinel or cluster", redisMode)
	}
	counts := localstack.Counts{Replicas: replicas, NATSServers: natsServers, KafkaBrokers: kafkaBrokers, RedisMode: redisMode}
	if ports, err = ports.ForReplicas(counts, func(env string) bool { return os.Getenv(env) != "" }); err != nil {
		return err
	}
	policyDir := os.Getenv("POLICY_DIR")
	if policyDir == "" {
		policyDir = filepath.Join(root, "policies")
	}
	if policyDir, err = filepath.Abs(policyDir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := localstack.Config{
		ToolsDir:         filepath.Join(root, ".tools"),
		WasmFile:         filepath.Join(root, wasm),
		NoopWasmFile:     filepath.Join(root, noopWasm),
		NoopNativeFile:   filepath.Join(root, noopNative),
		PolicyDir:        policyDir,
		WorkDir:          filepath.Join(root, "run"),
		Ports:            ports,
		EnvoyConcurrency: 2,
		WithKafka:        true,
		Replicas:         replicas,
		// NATS_SERVERS=3 runs a cluster of three nats-servers with JetStream behind the gateway.
		NATSServers: natsServers,
		// KAFKA_BROKERS=3 runs a KRaft cluster of three brokers whose brokers advertise their own
		// addresses; the gateway fronts every listener of each.
		KafkaBrokers: kafkaBrokers,
		RedisMode:    redisMode,
		// A process that dies is started again, as its Kubernetes Deployment would: kill the
		// control plane (or nats-server, Kafka, an Envoy) to see what the gateway does meanwhile.
		Supervise: true,
		// OTEL_COLLECTOR=1 adds an OpenTelemetry Collector (make otelcol) that receives the
		// decision log as OTLP log records and writes them to run/otelcol/logs.jsonl.
		WithCollector: os.Getenv("OTEL_COLLECTOR") == "1",
		// EXTRA_NATS_USERS="a b" adds NATS users a and b (password "<user>-secret") for policies
		// of POLICY_DIR to name (the CPU benchmark's tenant without a consume limit).
		ExtraNATSUsers: strings.Fields(os.Getenv("EXTRA_NATS_USERS")),
	}
	// POLICY_KUBECONFIG=<file> has the control plane take its policies from the LimitPolicy and
	// GatewayDefaults objects of that API server instead of POLICY_DIR (--policy-source=kubernetes),
	// PLATFORM_NAMESPACE (default weighstation) its own namespace (the tenant-scale benchmark).
	if kubeconfig := os.Getenv("POLICY_KUBECONFIG"); kubeconfig != "" {
		ns := os.Getenv("PLATFORM_NAMESPACE")
		if ns == "" {
			ns = "weighstation"
		}
		cfg.Kubernetes = &localstack.KubernetesPolicies{Kubeconfig: kubeconfig, Namespace: ns}
		policyDir = "objects of the API server of " + kubeconfig
	}
	fmt.Printf("starting %d nats-server, %d kafka broker, the control plane and %d envoy…\n", natsServers, kafkaBrokers, replicas)
	s, err := localstack.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Stop()
	a := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	// r is a port every replica listens on, one up per replica.
	r := func(p int) string {
		if replicas == 1 {
			return a(p)
		}
		return fmt.Sprintf("127.0.0.1:%d..%d", p, p+replicas-1)
	}
	fmt.Printf(`
weighstation is up (logs in %s)

  NATS  (through the gateway)   nats://%s     users acme/acme-secret, globex/globex-secret, anon (no credentials)
        nkey users too; every tenant's user only through the gateway (proxy_required)   nats --server nats://%[2]s --nkey %s/acme.nk pub orders.new hi
  Kafka (through the gateway)   %s
  Kafka (gateway fronting a self-advertising broker, addresses rewritten)   %s
  Kafka SASL (through the gateway; SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER)   %s
        users acme-svc/acme-svc-secret, globex-svc/globex-svc-secret, e.g.
        kcat -b %[6]s -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN -X sasl.username=acme-svc -X sasl.password=acme-svc-secret -P -t orders
  Envoy admin                   http://%s      metrics: /stats/prometheus
  Control plane status          http://%s/status   (also /healthz /readyz /metrics)
  xDS (gRPC ADS)                %s
  upstream nats-server          nats://%s   (directly only as baseline/baseline-secret, a user of no tenant; monitoring http://%s/connz)
  upstream Kafka                %s (controller %d, direct %s)

Watching %s: edit a policy and it is in force within 2 s. A process that exits is started
again after a second. Ctrl-C stops everything.
`, s.LogDir(), r(ports.NATS), s.NkeyDir(), r(ports.Kafka), r(ports.KafkaBroker), r(ports.KafkaSASL), r(ports.Admin), a(ports.ControlPlane), a(ports.XDS),
		a(ports.NATSUpstream), a(ports.NATSMonitor), a(ports.KafkaUpstream), ports.KafkaController, a(ports.KafkaDirect), policyDir)
	tls := s.TLSDir()
	fmt.Printf(`TLS (certificates issued at this start into %[1]s; clients trust ca.crt):
  NATS, TLS first      tls://%[2]s
        nats --server tls://%[2]s --tlsca %[1]s/ca.crt --tlsfirst --nkey %[3]s/acme.nk pub orders.new hi
        (nats.go: nats.Secure(...) and nats.TLSHandshakeFirst(); a client certificate %[1]s/<tenant>.crt identifies too)
  Kafka SASL_SSL       %[4]s
        kcat -b %[4]s -X security.protocol=SASL_SSL -X ssl.ca.location=%[1]s/ca.crt -X sasl.mechanisms=PLAIN -X sasl.username=acme-svc -X sasl.password=acme-svc-secret -P -t orders
  Kafka SSL (mTLS)     %[5]s
        kcat -b %[5]s -X security.protocol=SSL -X ssl.ca.location=%[1]s/ca.crt -X ssl.certificate.location=%[1]s/acme.crt -X ssl.key.location=%[1]s/acme.key -P -t orders
  Behind these and the SASL listener the gateway reaches the broker over TLS with its own client certificate, which the broker's SASL and TLS listeners require.

`, tls, r(ports.NATSTLS), s.NkeyDir(), r(ports.KafkaSASLSSL), r(ports.KafkaTLS))
	if replicas > 1 {
		fmt.Printf(`  %d gateway replicas: replica i listens on each gateway port + i (admin too).
  Quota service (global limits)  http://127.0.0.1:%d   store: Redis (%s) from 127.0.0.1:%d
  To share a tenant's limits across the replicas, give the GatewayDefaults
    quotaService: { address: "127.0.0.1:%d" }
  and the tenant's LimitPolicy  scope: global

`, replicas, ports.Quota, cfg.RedisModeOrDefault(), ports.Redis, ports.Quota)
	}
	if natsServers > 1 {
		printNATSCluster(s)
	}
	if kafkaBrokers > 1 {
		printKafkaCluster(s, ports, replicas)
	}
	if cfg.WithCollector {
		fmt.Printf("  OpenTelemetry Collector (OTLP/HTTP)  http://%s/v1/logs   decisions written to %s\n\n", a(ports.OTLP), s.CollectorOutput())
	}
	if ports.NATSPlain != 0 {
		fmt.Printf("  NATS through Envoy without the filter (benchmark baseline): nats://%s\n\n", a(ports.NATSPlain))
	}
	if ports.KafkaPlain != 0 {
		fmt.Printf("  Kafka through Envoy without the filter (benchmark baseline; clients that follow metadata leave it for the gateway): %s\n\n", a(ports.KafkaPlain))
	}
	for _, n := range []struct {
		port        int
		what, proto string
	}{
		{ports.NATSNoopWasm, "NATS through Envoy with a no-op Wasm filter", "nats://"},
		{ports.NATSNoopNative, "NATS through Envoy with a no-op native filter (dynamic module)", "nats://"},
		{ports.KafkaNoopWasm, "Kafka through Envoy with a no-op Wasm filter", ""},
		{ports.KafkaNoopNative, "Kafka through Envoy with a no-op native filter (dynamic module)", ""},
	} {
		if n.port != 0 {
			fmt.Printf("  %s (benchmark baseline): %s%s\n\n", n.what, n.proto, a(n.port))
		}
	}
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping…")
	case name := <-s.Exited():
		return fmt.Errorf("%s exited unexpectedly; see %s", name, s.LogDir())
	}
	return nil
}

// printNATSCluster lists each member of the NATS cluster; the gateway balances its upstream
// connections across all of them.
func printNATSCluster(s *localstack.Stack) {
	n := s.NATSServerCount()
	// JetStream replicates a stream on at most five servers.
	fmt.Printf("  NATS cluster \"weighstation\" of %d nats-servers with JetStream (streams up to R%d), behind the gateway:\n", n, min(n, 5))
	for i := range n {
		fmt.Printf("    nats-%d  nats://%s   monitoring %s/jsz   pid %d\n", i, s.NATSClientAddr(i), s.NATSMonitorURL(i), s.NATSServerPID(i))
	}
	fmt.Println()
}

// printKafkaCluster lists each broker of the Kafka cluster with its listeners and the gateway's
// listeners fronting them.
func printKafkaCluster(s *localstack.Stack, p localstack.Ports, replicas int) {
	a := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	// gw is the gateway's listener for broker i on a listener kind whose first port is first.
	gw := func(first, i int) string {
		port := s.KafkaGatewayPort(first, i)
		if replicas == 1 {
			return a(port)
		}
		return fmt.Sprintf("127.0.0.1:%d..%d", port, port+replicas-1)
	}
	n := s.KafkaBrokerCount()
	fmt.Printf(`  Kafka cluster of %d KRaft brokers (each also a controller; topics default to RF %d, min ISR %d), each advertising its
  own addresses on every listener; the gateway discovers them and tells clients only its own addresses. Bootstrap
  listeners: GATEWAY %s, DIRECT %s, SASL %s, SSL %s, SASL_SSL %s; each broker's, once discovered:
`, n, min(n, 3), max(min(n, 3)-1, 1), a(p.Kafka), a(p.KafkaBroker), a(p.KafkaSASL), a(p.KafkaTLS), a(p.KafkaSASLSSL))
	for i := range n {
		fmt.Printf("    kafka-%d  node.id %d  pid %d  controller %s\n", i, s.KafkaBrokerID(i), s.KafkaBrokerPID(i), a(p.KafkaController+i))
		for _, l := range []struct {
			name           string
			upstream, gate int
		}{
			{"GATEWAY (SSL)     ", p.KafkaUpstream, p.KafkaGatewayBroker},
			{"DIRECT (baseline) ", p.KafkaDirect, p.KafkaBroker},
			{"SASL (SASL_SSL)   ", p.KafkaSASLUp, p.KafkaSASL},
			{"SSL (mTLS)        ", p.KafkaSSLUp, p.KafkaTLS},
			{"SASL_SSL          ", p.KafkaSASLSSLUp, p.KafkaSASLSSL},
		} {
			fmt.Printf("      %s %s   through the gateway %s\n", l.name, a(l.upstream+i), gw(l.gate, i))
		}
	}
	fmt.Println()
}
