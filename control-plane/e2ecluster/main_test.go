// Package e2ecluster drives the gateway in front of a NATS cluster: three nats-servers with
// JetStream, the gateway their trusted proxy, every tenant user proxy_required, started once on
// free loopback ports, with nats.go as the clients. Servers are restarted, put in lame duck mode
// and their stream leaders stepped down, and Envoy is killed, under fixed-rate load; each event
// is checked from outside the filter (the servers' sockets, the stream's content, what the
// clients saw).
//
// `make test` runs the smoke set of events; `make test-clusters` (WEIGHSTATION_CLUSTERS=full)
// runs every event, with three gateway replicas.
package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

const natsServers = 3

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
	work, policyDir, err := localstack.TestWorkDir(root, "weighstation-e2ecluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if ports, err = localstack.FreePortsFor(localstack.Counts{Replicas: replicas, NATSServers: natsServers}); err != nil {
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
		ExtraNATSUsers:   []string{tenantLimited, tenantApp},
		Replicas:         replicas,
		NATSServers:      natsServers,
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
