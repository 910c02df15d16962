package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// topCmd shows every tenant's traffic against its limits across the gateway replicas,
// refreshed every interval, most loaded first.
func topCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cp := fs.String("control-plane", defaultControlPlane(), "URL of the control plane's HTTP listener (env WEIGHSTATION_CONTROL_PLANE)")
	interval := fs.Duration("interval", time.Second, "refresh period")
	once := fs.Bool("once", false, "print the table once and exit")
	tenant := fs.String("tenant", "", "show only this tenant, with the clients refused most over the last minute (spec.clients)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		tenants, err := fetchUsage(ctx, strings.TrimRight(*cp, "/")+"/usage")
		if ctx.Err() != nil {
			return 0
		}
		var b strings.Builder
		if !*once {
			b.WriteString("\x1b[H\x1b[2J") // home and clear: the table repaints in place
		}
		fmt.Fprintf(&b, "weighstation top — %s — %s\n\n", *cp, time.Now().Format(time.TimeOnly))
		if err != nil {
			fmt.Fprintf(&b, "cannot read %s/usage: %v\n", *cp, err)
		} else {
			if *tenant != "" {
				tenants = slices.DeleteFunc(tenants, func(t usage.TenantNow) bool { return t.Tenant != *tenant })
			}
			writeTop(&b, tenants)
			if *tenant != "" {
				writeClients(&b, tenants)
			}
		}
		_, _ = io.WriteString(stdout, b.String())
		if *once {
			if err != nil {
				return 1
			}
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*interval):
		}
	}
}

func fetchUsage(ctx context.Context, u string) ([]usage.TenantNow, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var doc struct {
		Tenants []usage.TenantNow `json:"tenants"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	return doc.Tenants, nil
}

// writeTop renders the table; tenants come most loaded first.
func writeTop(w io.Writer, tenants []usage.TenantNow) {
	if len(tenants) == 0 {
		fmt.Fprintln(w, "no traffic reported (is the gateway connected, and --report-address reachable from it?)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TENANT\tPROTO\tLOAD\tMSG/S\tLIMIT\tBYTES/S\tLIMIT\tREAD/S\tLIMIT\tIN FLIGHT\tHELD\tCONNS\tDELAYED/S\tREFUSED/S\tREPLICAS\t  TOP SUBJECTS/TOPICS (MSG/S)")
	for _, t := range tenants {
		var mps, bps, read, mode string
		if l := t.Limits; l != nil {
			scale := uint64(1)
			if !l.Global {
				scale = uint64(max(t.Replicas, 1))
			}
			mps, bps = limitText(l.MessagesPerSecond, scale), limitText(l.BytesPerSecond, scale)
			// Consume buckets are per replica whatever the scope.
			read = limitText(l.ConsumeBytesPerSecond, uint64(max(t.Replicas, 1)))
			if l.Mode != "" && l.Mode != "enforce" {
				mode = " (" + l.Mode + ")"
			}
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t  %s\n",
			t.Tenant, mode, t.Protocol, t.Load*100, quantity(t.MessagesPerSecond), mps,
			quantity(t.BytesPerSecond), bps, quantity(t.ConsumedPerSecond), read, t.InFlight, t.Held, t.Connections,
			quantity(t.DelayedPerSecond), byReason(t.RefusedPerSecond), t.Replicas, subjects(t.TopSubjects))
	}
	_ = tw.Flush()
}

// writeClients lists each tenant's clients refused most over the last minute.
func writeClients(w io.Writer, tenants []usage.TenantNow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROTO\tCLIENT\tREFUSED (LAST MINUTE)")
	rows := 0
	for _, t := range tenants {
		for _, c := range t.TopClients {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", t.Protocol, c.Client, c.Refused)
			rows++
		}
	}
	if rows == 0 {
		fmt.Fprintln(tw, "\t(no client refused; clients are named with spec.clients)\t")
	}
	_ = tw.Flush()
}

// subjects reads "orders.new 440, audit 60", the busiest first (at most three).
func subjects(top []usage.SubjectRate) string {
	var parts []string
	for _, s := range top[:min(len(top), 3)] {
		parts = append(parts, s.Subject+" "+quantity(s.MessagesPerSecond))
	}
	return strings.Join(parts, ", ")
}

func limitText(l *uint64, scale uint64) string {
	if l == nil {
		return "-"
	}
	return quantity(float64(*l * scale))
}

// byReason reads "rate 120, queue 3" (per second), or "0".
func byReason(m map[string]float64) string {
	var parts []string
	for r, v := range m {
		if v >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %s", r, quantity(v)))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func quantity(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.0fM", v/1e6)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 10e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
