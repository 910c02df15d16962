package soak

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// PlotSVG draws the resource samples as four stacked panels over the run's time, with the
// fault events marked: a plain SVG, so the report needs no plotting library.
func PlotSVG(samples []Sample, events []Event, total time.Duration) string {
	const width, panelH, left, right, top, gap = 900, 150, 70, 20, 30, 40
	panels := []struct {
		title string
		get   func(Sample) float64
	}{
		{"Envoy RSS (MiB)", func(s Sample) float64 { return s.EnvoyRSS }},
		{"control plane RSS (MiB)", func(s Sample) float64 { return s.CPRSS }},
		{"shared-data keys", func(s Sample) float64 { return s.SharedKeys }},
		{"held messages", func(s Sample) float64 { return s.Held }},
	}
	height := top + len(panels)*(panelH+gap)
	plotW := float64(width - left - right)
	x := func(d time.Duration) float64 { return left + plotW*d.Seconds()/math.Max(total.Seconds(), 1) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">weighstation soak: resources every %s over %s (dashed: faults)</text>`+"\n", left, SampleEvery, total)
	for i, p := range panels {
		y0 := float64(top + i*(panelH+gap))
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range samples {
			if v := p.get(s); !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if math.IsInf(lo, 0) {
			lo, hi = 0, 1
		}
		lo = math.Min(lo, 0)
		if hi <= lo {
			hi = lo + 1
		}
		hi *= 1.1
		y := func(v float64) float64 { return y0 + 20 + (panelH-20)*(1-(v-lo)/(hi-lo)) }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-size="12">%s</text>`+"\n", left, y0+12, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0+20, plotW, panelH-20)
		for _, v := range []float64{lo, (lo + hi) / 2, hi} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
		}
		for _, e := range events {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c33" stroke-dasharray="4 3"/>`+"\n", x(e.At), y0+20, x(e.At), y0+panelH)
			if i == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#c33" font-size="9" transform="rotate(-20 %.1f %.0f)">%s</text>`+"\n", x(e.At)+2, y0+30, x(e.At)+2, y0+30, e.What)
			}
		}
		var pts []string
		for _, s := range samples {
			v := p.get(s)
			if math.IsNaN(v) {
				if len(pts) > 1 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
				}
				pts = nil
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="#1f5fa8"/>`+"\n", x(s.At), y(v))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
		}
	}
	step := 10 * time.Second
	for _, s := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		if total/step > 12 {
			step = s
		}
	}
	for d := time.Duration(0); d <= total; d += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(d), height-8, d)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
