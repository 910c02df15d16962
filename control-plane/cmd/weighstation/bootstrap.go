package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/weighstation/weighstation/control-plane/internal/bootstrap"
)

func bootstrapCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bootstrap.Options
	fs.StringVar(&o.NodeID, "node-id", "weighstation-local", "Envoy node id reported to the control plane")
	fs.StringVar(&o.XDS, "xds", "127.0.0.1:18000", "host:port of the control plane's ADS server")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9901", "host:port of Envoy's admin listener")
	fs.StringVar(&o.WasmHost, "wasm-host", "", "host:port serving the filter module over HTTP (for --wasm-url)")
	fs.StringVar(&o.Metrics, "metrics", "", "host:port of a listener exposing only the admin's /stats/prometheus and /ready (empty: none)")
	fs.BoolVar(&o.WaitForXDS, "wait-for-xds", false, "stay not ready until the control plane has sent listeners and clusters (no initial fetch timeout)")
	fs.IntVar(&o.ListenPortOffset, "listen-port-offset", 0, "ask the control plane for every listener moved up by this many ports (several Envoys on one host)")
	output := fs.String("output", "", "write the bootstrap to this file instead of stdout (for images without a shell)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	out, err := bootstrap.Render(o)
	if err != nil {
		fmt.Fprintf(stderr, "weighstation bootstrap: %v\n", err)
		return 1
	}
	out = append(out, '\n')
	if *output != "" {
		if err := os.WriteFile(*output, out, 0o644); err != nil {
			fmt.Fprintf(stderr, "weighstation bootstrap: %v\n", err)
			return 1
		}
		return 0
	}
	_, _ = stdout.Write(out)
	return 0
}
