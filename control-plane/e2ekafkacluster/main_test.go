// Package e2ekafkacluster drives the gateway in front of a Kafka cluster that changes: three
// KRaft brokers (RF 3, min ISR 2) that advertise their own addresses, which the gateway
// discovers (never listed), started once on free loopback ports. Brokers are restarted, killed,
// added with partitions moved onto them, and the gateway's replicas rolled, under fixed-rate
// load from real clients of a limited tenant; each event is checked from outside the filter:
// the brokers' sockets (every client connection an Envoy's), the topic's content read directly
// (records lost or stored twice), and what each client reported.
//
// `make test` runs the smoke set; `make test-clusters` (WEIGHSTATION_CLUSTERS=full) every
// event, with three gateway replicas.
package e2ekafkacluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

const kafkaBrokers = 3

var (
	stack *localstack.Stack
	ports localstack.Ports
	root  string
	// full: every event of the matrix (make test-clusters), else the smoke set (make test).
	full bool
	// replicas is how many Envoys run: three for the matrix (their rolling restart is an event).
	replicas = 1
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root = localstack.TestRoot()
	var err error
	if full, err = localstack.ClusterMatrix(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if full {
		replicas = 3
	}
	work, policyDir, err := localstack.TestWorkDir(root, "weighstation-e2ekafkacluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	counts := localstack.Counts{Replicas: replicas, KafkaBrokers: kafkaBrokers}
	if ports, err = localstack.FreePortsFor(counts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stack, err = localstack.Start(context.Background(), localstack.Config{
		ToolsDir:         filepath.Join(root, ".tools"),
		WasmFile:         filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"),
		PolicyDir:        policyDir,
		WorkDir:          work,
		Ports:            ports,
		EnvoyConcurrency: 2,
		Replicas:         replicas,
		WithKafka:        true,
		KafkaBrokers:     kafkaBrokers,
		Supervise:        true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the stack:", err)
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		return 1
	}
	code := m.Run()
	stack.StopAfterTests(code, work)
	return code
}
