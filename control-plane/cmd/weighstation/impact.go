package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/impact"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// impactCmd replays recorded usage against proposed policies: exit 0 when no enforced tenant
// would be refused more than --max-refused of its messages, 1 when one would, 2 on an error.
func impactCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("impact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policies := fs.String("policies", "", "the proposed policy directory")
	usageFile := fs.String("usage", "", "recorded usage: `weighstation usage export --resolution 1s` CSV (default: ask the control plane for --since)")
	since := fs.Duration("since", time.Hour, "without --usage: the control plane's last this much per-second usage")
	cp := fs.String("control-plane", defaultControlPlane(), "URL of the control plane's HTTP listener (env WEIGHSTATION_CONTROL_PLANE)")
	replicas := fs.Int("replicas", 1, "gateway replicas the usage was spread over: a perGateway limit holds on each")
	maxRefused := fs.Float64("max-refused", 0.001, "fail (exit 1) when an enforced tenant would be refused more than this part of its messages")
	htmlOut := fs.String("html", "", "also write an HTML report with a plot per tenant to this file")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	simulator := fs.String("simulator", "", "the replay module (default: weighstation_impact.wasm beside this binary)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if *policies == "" {
		fmt.Fprintln(stderr, "weighstation impact: --policies DIR is required")
		return 2
	}
	set, err := policy.LoadDir(*policies)
	if err != nil {
		fmt.Fprintf(stderr, "weighstation impact: the proposed policies are invalid:\n%v\n", err)
		return 2
	}
	var body io.Reader
	source := *usageFile
	if source != "" {
		f, err := os.Open(source)
		if err != nil {
			fmt.Fprintf(stderr, "weighstation impact: %v\n", err)
			return 2
		}
		defer f.Close()
		body = f
	} else {
		q := url.Values{"since": {since.String()}, "format": {"csv"}, "resolution": {"1s"}}
		source = strings.TrimRight(*cp, "/") + "/usage/history?" + q.Encode()
		resp, err := http.Get(source)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(stderr, "weighstation impact: reading usage from %s: %v %v\n", source, err, resp)
			return 2
		}
		defer resp.Body.Close()
		body = resp.Body
	}
	demands, err := impact.ReadUsage(body)
	if err != nil {
		fmt.Fprintf(stderr, "weighstation impact: %v\n", err)
		return 2
	}
	if *simulator == "" {
		exe, _ := os.Executable()
		*simulator = filepath.Join(filepath.Dir(exe), "weighstation_impact.wasm")
	}
	ctx := context.Background()
	sim, err := impact.Load(ctx, *simulator)
	if err != nil {
		fmt.Fprintf(stderr, "weighstation impact: %v\n", err)
		return 2
	}
	defer sim.Close(ctx)
	results, err := impact.Analyze(ctx, sim, set, demands, *replicas)
	if err != nil {
		fmt.Fprintf(stderr, "weighstation impact: %v\n", err)
		return 2
	}
	title := fmt.Sprintf("weighstation impact: %s against the usage in %s (%d replica(s))", *policies, source, *replicas)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
	} else {
		fmt.Fprintf(stdout, "%s\n\n", title)
		impact.WriteText(stdout, results)
	}
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err == nil {
			err = impact.WriteHTML(f, title, results)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "weighstation impact: %v\n", err)
			return 2
		}
	}
	code := 0
	for _, r := range results {
		if r.Mode != string(policy.ModeDryRun) && r.RefusedShare() > *maxRefused {
			fmt.Fprintf(stderr, "weighstation impact: %s %s would be refused %.2f%% of its messages (more than --max-refused %.2f%%)\n",
				r.Protocol, r.Tenant, 100*r.RefusedShare(), 100**maxRefused)
			code = 1
		}
	}
	return code
}
