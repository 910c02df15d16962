package impact

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints one line per tenant, the most refused first.
func WriteText(w io.Writer, impacts []TenantImpact) {
	sorted := append([]TenantImpact(nil), impacts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].RefusedShare() > sorted[j].RefusedShare() })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPROTO\tPOLICY\tMODE\tOFFERED\tWOULD REFUSE\tBY LIMIT\tDELAYED\tMAX DELAY\tREAD LAG\tWORST SECOND")
	for _, t := range sorted {
		mode := t.Mode + "/" + t.OnLimit
		refuse := fmt.Sprintf("%d (%.2f%%)", t.refused(), 100*t.RefusedShare())
		delay := "-"
		if t.Totals.Delayed > 0 {
			delay = fmt.Sprintf("%d ms", t.Totals.MaxDelayMs)
		}
		lag := "-"
		if t.Totals.ReadLagMs > 0 {
			lag = fmt.Sprintf("%d ms", t.Totals.ReadLagMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", t.Tenant, t.Protocol, t.Policy, mode,
			t.Totals.Offered, refuse, byLimit(t.Totals), t.Totals.Delayed, delay, lag, worst(t.Outcomes))
	}
	_ = tw.Flush()
	for _, t := range sorted {
		if t.Note != "" {
			fmt.Fprintf(w, "note: %s %s %s\n", t.Protocol, t.Tenant, t.Note)
		}
	}
}

func byLimit(o Outcome) string {
	var parts []string
	for _, p := range []struct {
		name string
		n    uint64
	}{{"maxMessageBytes", o.RefusedSize}, {"rate", o.RefusedRate}, {"queue", o.RefusedQueue}, {"client", o.RefusedClient}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p.name, p.n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// worst names the second with the most refusals, or else with the longest delay.
func worst(outcomes []Outcome) string {
	refused := func(o Outcome) uint64 { return o.RefusedSize + o.RefusedRate + o.RefusedQueue + o.RefusedClient }
	var most, longest Outcome
	for _, o := range outcomes {
		if refused(o) > refused(most) {
			most = o
		}
		if o.MaxDelayMs > longest.MaxDelayMs {
			longest = o
		}
	}
	switch {
	case refused(most) > 0:
		return fmt.Sprintf("%s (%d refused)", clock(most.StartMs), refused(most))
	case longest.MaxDelayMs > 0:
		return fmt.Sprintf("%s (held %d ms)", clock(longest.StartMs), longest.MaxDelayMs)
	}
	return "-"
}

func clock(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05") }

// WriteHTML writes a page with the table and, per tenant, demand against the proposed limit
// and what would be refused, second by second.
func WriteHTML(w io.Writer, title string, impacts []TenantImpact) error {
	var table strings.Builder
	WriteText(&table, impacts)
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><meta charset=utf-8><title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}</style>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<pre>%s</pre>\n", html.EscapeString(title), html.EscapeString(table.String()))
	for _, t := range impacts {
		fmt.Fprintf(&b, "<h2>%s %s</h2>\n%s\n", html.EscapeString(t.Protocol), html.EscapeString(t.Tenant), plot(t))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plot draws messages per second offered and admitted, what would be refused, and the
// proposed messages/s limit.
func plot(t TenantImpact) string {
	const width, height, left, right, top, bottom = 900, 260, 60, 20, 20, 30
	if len(t.Outcomes) == 0 {
		return "<p>no traffic</p>"
	}
	t0, t1 := t.Outcomes[0].StartMs, t.Outcomes[len(t.Outcomes)-1].StartMs+1000
	hi := 1.0
	for _, o := range t.Outcomes {
		hi = math.Max(hi, float64(o.Offered))
	}
	limit := -1.0
	if l := t.Limits.MessagesPerSecond; l != nil {
		limit = float64(*l)
		hi = math.Max(hi, limit)
	}
	hi *= 1.1
	x := func(ms int64) float64 {
		return left + float64(width-left-right)*float64(ms-t0)/math.Max(float64(t1-t0), 1)
	}
	y := func(v float64) float64 { return top + float64(height-top-bottom)*(1-v/hi) }
	line := func(color string, get func(Outcome) float64) string {
		var pts []string
		for _, o := range t.Outcomes {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(o.StartMs+500), y(get(o))))
		}
		return fmt.Sprintf(`<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, color, strings.Join(pts, " "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`, width, height)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`, left, top, width-left-right, height-top-bottom)
	fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%.0f/s</text><text x="%d" y="%d" text-anchor="end">0</text>`, left-4, y(hi/1.1)+4, hi/1.1, left-4, height-bottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s UTC</text>`, left, height-8, clock(t0), width-right, height-8, clock(t1))
	b.WriteString(line("#1f77b4", func(o Outcome) float64 { return float64(o.Offered) }))
	b.WriteString(line("#2ca02c", func(o Outcome) float64 { return float64(o.Admitted) }))
	b.WriteString(line("#d62728", func(o Outcome) float64 {
		return float64(o.RefusedSize + o.RefusedRate + o.RefusedQueue + o.RefusedClient)
	}))
	if limit >= 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="5,4"/>`, left, width-right, y(limit), y(limit))
	}
	fmt.Fprintf(&b, `<text x="%d" y="14"><tspan fill="#1f77b4">offered</tspan> · <tspan fill="#2ca02c">admitted</tspan> · <tspan fill="#d62728">would be refused</tspan> · <tspan fill="#555">proposed limit (dashed)</tspan>, messages per second</text>`, left)
	b.WriteString("</svg>")
	return b.String()
}
