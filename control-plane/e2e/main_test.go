// Package e2e drives the real stack — Envoy with the Wasm filter, the control plane, nats-server
// and Kafka — started once on free loopback ports, with nats.go, sarama, franz-go, Apache Kafka's
// Java producer (clients/java, compiled with javac against the kafka-clients jar) and librdkafka
// (clients/librdkafka, confluent-kafka in .tools/venv) as clients.
package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// testTenants have a NATS user of the same name and, but for those a test writes itself
// (reload-rate), a policy each in testdata/tenants.yaml (the read side's: consume.yaml).
var testTenants = []string{
	"size-enforce", "size-dry", "rate-reject", "rate-delay", "delay-accuracy", "rate-dry", "queue-tight", "queue-wait",
	"inflight-delay", "inflight-reject", "conns", "override", "iso-a", "iso-b", "slow-rate", "reload-rate",
	"spoof-victim", "decision-log", "usage-export", "impact-trace", "consume-nats", "consume-nats-core",
	"consume-nats-msgs", "billing", "shallow", "crowd", "consume-clients", "nonreader-reject", "nonreader-delay", "slow-reader", "steady",
}

var (
	// inFlightRelay sits between the gateway's kafkaRelayed listener and the broker: it
	// counts what the broker was sent (relay_test.go).
	inFlightRelay *produceRelay
	kafkaRelayed  int
	stack         *localstack.Stack
	// stackUp closes once stack is set: the relay may be dialled while the stack starts
	// (its readiness checks go through every Kafka listener).
	stackUp   = make(chan struct{})
	ports     localstack.Ports
	policyDir string
	root      string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root = os.Getenv("WEIGHSTATION_ROOT")
	if root == "" {
		root, _ = filepath.Abs("../..")
	}
	work, err := os.MkdirTemp("", "weighstation-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	policyDir = filepath.Join(work, "policies")
	if err := localstack.CopyPolicies(filepath.Join(root, "policies"), policyDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := localstack.CopyPolicies("testdata", policyDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, write := range []func(string) error{writeUnderLimitPolicies, writeInFlightStressPolicies} {
		if err := write(policyDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ports, err = localstack.FreePorts()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if inFlightRelay, err = startProduceRelay(dialBrokerAsTheGateway); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer inFlightRelay.close()
	// Free, and none of the stack's: those were free a moment ago too, and are no longer held.
	for kafkaRelayed == 0 || ports.Holds(kafkaRelayed, localstack.Counts{}) {
		if kafkaRelayed, err = localstack.FreePort(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	stack, err = localstack.Start(context.Background(), localstack.Config{
		ToolsDir:            filepath.Join(root, ".tools"),
		WasmFile:            filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"),
		PolicyDir:           policyDir,
		WorkDir:             work,
		Ports:               ports,
		EnvoyConcurrency:    2,
		WithKafka:           true,
		ExtraNATSUsers:      append(testTenants, inFlightStressNATSUsers()...),
		ExtraKafkaSASLUsers: append([]string{"spoof-victim"}, underLimitTenants()...),
		ExtraKafkaBrokers:   []localstack.KafkaRoute{{Upstream: inFlightRelay.addr(), Listen: kafkaRelayed}},
		Supervise:           true,
		WithCollector:       true,
	})
	close(stackUp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the stack:", err)
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		return 1
	}
	code := m.Run()
	stack.StopAfterTests(code, work)
	return code
}

// dialBrokerAsTheGateway opens a TLS connection to the broker's GATEWAY listener with the
// gateway's client certificate, as Envoy reaches it.
func dialBrokerAsTheGateway() (net.Conn, error) {
	select {
	case <-stackUp:
	default:
		return nil, errors.New("the stack is still starting")
	}
	if stack == nil {
		return nil, errors.New("the stack did not start")
	}
	dir := stack.TLSDir()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "gateway-client.crt"), filepath.Join(dir, "gateway-client.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "broker-ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports.KafkaUpstream),
		&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12})
}
