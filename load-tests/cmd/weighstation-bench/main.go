// Command weighstation-bench measures NATS and Kafka latency open-loop: operations are sent at a
// fixed rate from a schedule fixed in advance, and each latency is measured from the
// operation's intended send time into an HdrHistogram. With --compare it alternates the load
// between targets in short phases in one run and reports their ratios percentile by percentile.
//
// Exit status: 0 done, 1 could not run, 3 the run is invalid because the harness itself fell
// behind its schedule, 4 a target's limits shaped the run (it refused more than 1% of what it
// was sent: the run measured a limit, not latency). The figures are still written, flagged.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weighstation/weighstation/load-tests/internal/bench"
	"github.com/weighstation/weighstation/load-tests/internal/gctune"
	"github.com/weighstation/weighstation/load-tests/internal/report"
)

const (
	exitInvalid = 3
	exitLimited = 4
)

func main() {
	gctune.Apply()
	o, out, quiet, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-bench:", err)
		os.Exit(1)
	}
	if o == nil { // --list
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := newProgressLine(os.Stderr)
	if !quiet {
		o.Progress = progress.print
	}
	s, err := bench.Measure(ctx, *o)
	progress.done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-bench:", err)
		os.Exit(1)
	}
	if err := report.Write(out, s); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-bench: writing the report:", err)
		os.Exit(1)
	}
	report.PrintText(os.Stdout, s)
	fmt.Printf("\nreport: %s/report.html\n", out)
	switch {
	case !s.Valid:
		os.Exit(exitInvalid)
	case s.LimitedByPolicy:
		os.Exit(exitLimited)
	}
}
