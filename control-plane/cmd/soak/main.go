// Command weighstation-soak is `make soak`: it starts a supervised local stack of its own, runs
// fixed-rate mixed load through it while a fault schedule and hostile clients run, accounts for
// every message and writes a report (report.md, resources.svg). It exits non-zero when any
// message is unaccounted or any bound is broken.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/soak"
)

func main() {
	root := flag.String("root", ".", "repository root (holds .tools/, policies/ and the built filter)")
	duration := flag.Duration("duration", 10*time.Minute, "how long the load runs")
	out := flag.String("out", ".tools/soak", "where the report and the stack's logs go")
	flag.Parse()
	if *duration < 30*time.Second {
		fmt.Fprintln(os.Stderr, "soak: -duration must be at least 30s (the fault schedule needs room)")
		os.Exit(2)
	}
	absRoot, err := filepath.Abs(*root)
	if err == nil {
		*out, err = filepath.Abs(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := soak.Run(ctx, soak.Config{Root: absRoot, Duration: *duration, Out: *out, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	t := res.Total
	fmt.Printf("soak %s: sent %d, delivered %d, refused %d, failed in a fault %d, unaccounted %d, duplicates %d\n",
		*duration, t.Sent, t.Delivered, t.Refused, t.FailedInFault, t.Unaccounted, t.Duplicates)
	for _, d := range res.Drifts {
		if d.Samples == 0 {
			// A run shorter than a process's warm-up has nothing after it to summarise.
			continue
		}
		fmt.Printf("  %s: median %.1f, worst drift %.1f%%, last minute − first %+.1f%%, over %d samples\n", d.Name, d.Median, 100*d.Worst, 100*d.Trend, d.Samples)
	}
	fmt.Printf("report: %s\nplot:   %s\n", res.ReportPath, res.PlotPath)
	if len(res.Failures) > 0 {
		for _, f := range res.Failures {
			fmt.Println("FAIL:", f)
		}
		os.Exit(1)
	}
	fmt.Println("PASS")
}
