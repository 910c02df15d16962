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
	"syscall"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
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
		PolicyDir:        policyDir,
		WorkDir:          filepath.Join(root, "run"),
		Ports:            ports,
		EnvoyConcurrency: 2,
		WithKafka:        true,
	}
	fmt.Println("starting nats-server, kafka, the control plane and envoy…")
	s, err := localstack.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Stop()
	a := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	fmt.Printf(`
weighstation is up (logs in %s)

  NATS  (through the gateway)   nats://%s     users acme/acme-secret, globex/globex-secret, anon
  Kafka (through the gateway)   %s
  Kafka (gateway fronting a self-advertising broker, addresses rewritten)   %s
  Envoy admin                   http://%s      metrics: /stats/prometheus
  Control plane status          http://%s/status   (also /healthz /readyz /metrics)
  xDS (gRPC ADS)                %s
  upstream nats-server          nats://%s
  upstream Kafka                %s (controller %d, direct %s)

Watching %s: edit a policy and it is in force within 2 s. Ctrl-C stops everything.
`, s.LogDir(), a(ports.NATS), a(ports.Kafka), a(ports.KafkaBroker), a(ports.Admin), a(ports.ControlPlane), a(ports.XDS),
		a(ports.NATSUpstream), a(ports.KafkaUpstream), ports.KafkaController, a(ports.KafkaDirect), policyDir)
	if ports.NATSPlain != 0 {
		fmt.Printf("  NATS through Envoy without the filter (benchmark baseline): nats://%s\n\n", a(ports.NATSPlain))
	}
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping…")
	case name := <-s.Exited():
		return fmt.Errorf("%s exited unexpectedly; see %s", name, s.LogDir())
	}
	return nil
}
