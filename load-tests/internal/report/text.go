package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// PrintText writes the summary as plain tables, for the terminal.
func PrintText(w io.Writer, s Summary) {
	fmt.Fprintf(w, "%s at %g/s (%s arrivals), %s measured after %s warm-up; %s\n", s.Scenario, s.Rate, s.Arrivals, s.Duration, s.Warmup, s.Machine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency ms\tp50\tp90\tp99\tp99.9\tp99.99\tmax\tachieved/s\tsent\tacked\trefused\terrors\ttimeouts\t")
	for _, t := range s.Targets {
		name := t.Name
		if t.Limited != nil {
			name += " (admitted only)"
		}
		fmt.Fprintf(tw, "%s\t", name)
		for _, v := range t.LatencyMicros.Named() {
			fmt.Fprintf(tw, "%.3f\t", float64(v.Micro)/1000)
		}
		fmt.Fprintf(tw, "%.0f\t%d\t%d\t%d\t%d\t%d\t\n", t.AchievedRate, t.Sent, t.Acked, t.Refused, t.Errors, t.Timeouts)
	}
	for _, r := range s.Ratios {
		fmt.Fprintf(tw, "%s/%s\t", r.Target, r.Baseline)
		for _, v := range r.Named() {
			fmt.Fprintf(tw, "%.2fx\t", v.Value)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, t := range s.Targets {
		for _, e := range t.ErrorSamples {
			fmt.Fprintf(w, "error via %s: %s\n", t.Name, e)
		}
	}
	for _, t := range s.Targets {
		if t.Limited == nil {
			continue
		}
		fmt.Fprintln(w, t.Limited.Headline(t.Name))
		fmt.Fprintf(w, "  %s's percentiles are of the %d operations it admitted, not its latency at %g/s: give the run a tenant with room for it (--nats-user, --kafka-client-id), or lower --rate.\n", t.Name, t.Acked, s.Rate)
		for _, r := range t.Limited.Reasons {
			fmt.Fprintf(w, "  told %d times (warm-up included): %s\n", r.Count, r.Sample)
		}
	}
	g := s.Generator
	fmt.Fprintf(w, "harness: started operations %.3f ms late at p99 (max %.3f ms), %d more than 1 ms late, %d dropped\n",
		float64(g.LagMicros.P99)/1000, float64(g.LagMicros.Max)/1000, g.MissedSchedule, g.Dropped)
	if !s.Valid {
		fmt.Fprintln(w, "INVALID RUN: the harness fell behind its own schedule; these figures describe the harness, not the target:")
		for _, r := range s.InvalidReasons {
			fmt.Fprintln(w, "  -", r)
		}
	}
}
