// Command weighstation-tenantscale is `make bench-tenants`: what many tenants cost the gateway.
// For each rung of a ladder of tenant counts it starts the local stack with that many
// LimitPolicies (one NATS user and one override each, one file each) and measures
//   - start: from Envoy's process start to the stack reporting it in sync and listening;
//   - change: ten times, one policy file rewritten to a rate of 1/s, timed from the write to
//     the first refusal an already open connection of that tenant (publishing 500/s) is sent;
//     each followed by a rewrite back, timed to its acknowledgement;
//   - memory: Envoy's and the control plane's RSS at the first acknowledgement and the most
//     after any change.
//
// With -source kubernetes the policies are LimitPolicy objects of a real kube-apiserver and
// etcd, created with one `kubectl apply` (timed) before the stack starts, and each change is a
// `kubectl apply` of the measured tenant's object, timed from kubectl's return; after the
// changes, how long the control plane took to write every object's status is read from the
// objects.
//
// The table goes to <out>/README.md; whether the goals (one change in force within 1 s at
// 10,000 tenants, 5 s at 100,000, and Envoy's RSS within +10% of its first) hold is printed.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weighstation/weighstation/load-tests/internal/gctune"
)

func main() {
	gctune.Apply()
	root := flag.String("root", ".", "repository root (holds .tools/ and the built filter)")
	out := flag.String("out", "docs/benchmarks/tenants", "where the table goes")
	ladder := flag.String("tenants", "10,1000,10000,100000", "comma-separated tenant counts, one run each")
	changes := flag.Int("changes", 10, "timed changes per rung")
	src := flag.String("source", "files", "where the policies are: files (one per tenant in the policy directory) or kubernetes (LimitPolicy objects of a real kube-apiserver, changed with kubectl apply)")
	flag.Parse()
	if *src != "files" && *src != "kubernetes" {
		fmt.Fprintf(os.Stderr, "weighstation-tenantscale: -source %q: files or kubernetes\n", *src)
		os.Exit(2)
	}
	var counts []int
	for _, f := range strings.Split(*ladder, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "weighstation-tenantscale: -tenants: %q is not a count\n", f)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	abs, err := filepath.Abs(*root)
	if err == nil {
		err = run(abs, *out, *src, counts, *changes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-tenantscale:", err)
		os.Exit(1)
	}
}

func run(root, out, source string, counts []int, changes int) error {
	var rungs []rung
	for _, n := range counts {
		fmt.Fprintf(os.Stderr, "%d tenants…\n", n)
		r, err := measure(root, source, n, changes)
		if err != nil {
			return fmt.Errorf("%d tenants: %w", n, err)
		}
		fmt.Fprintln(os.Stderr, "  "+r.line())
		rungs = append(rungs, r)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	readme := filepath.Join(out, "README.md")
	old, _ := os.ReadFile(readme) // the other source's rows stay
	md := markdown(rungs, string(old))
	fmt.Print(md)
	return os.WriteFile(readme, []byte(md), 0o644)
}
