package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// usageCmd: `weighstation usage export` writes per-tenant, per-minute usage (messages, bytes,
// refused, delayed) for chargeback, from the control plane's in-memory series.
func usageCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprintln(stderr, "usage: weighstation usage export [--since 24h] [--resolution 1m|1s] [--format csv|json|parquet] [--output FILE]")
		if len(args) == 1 && isHelp(args[0]) {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("usage export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cp := fs.String("control-plane", defaultControlPlane(), "URL of the control plane's HTTP listener (env WEIGHSTATION_CONTROL_PLANE)")
	since := fs.Duration("since", 24*time.Hour, "how far back to export (the control plane keeps --usage-minutes and --usage-seconds)")
	format := fs.String("format", "csv", "csv, json (lines) or parquet")
	output := fs.String("output", "", "write to this file instead of stdout")
	resolution := fs.String("resolution", "1m", "1m (per minute, for chargeback) or 1s (per second, for weighstation impact)")
	if err := fs.Parse(args[1:]); err != nil {
		return parseFailed(err)
	}
	q := url.Values{"since": {since.String()}, "format": {*format}, "resolution": {*resolution}}
	resp, err := http.Get(strings.TrimRight(*cp, "/") + "/usage/history?" + q.Encode())
	if err != nil {
		fmt.Fprintf(stderr, "weighstation usage export: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "weighstation usage export: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	out := stdout
	if *output != "" {
		f, err := os.Create(*output)
		if err != nil {
			fmt.Fprintf(stderr, "weighstation usage export: %v\n", err)
			return 1
		}
		defer f.Close()
		out = f
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		fmt.Fprintf(stderr, "weighstation usage export: %v\n", err)
		return 1
	}
	return 0
}
