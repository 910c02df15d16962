package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// nines maps a quantile to the plot's x axis: 0 at 0%, 1 at 90%, 2 at 99%, 3 at 99.9%, … so
// the tail, where the differences are, gets as much room as the body.
func nines(q float64) float64 { return -math.Log10(1 - q) }

// ninesTicks labels the x axis in percentiles.
type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for n := math.Ceil(min); n <= max; n++ {
		label := "0%"
		if n > 0 {
			label = strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.*f", int(n), 100*(1-math.Pow(10, -n))), "0"), ".") + "%"
		}
		ticks = append(ticks, plot.Tick{Value: n, Label: label})
	}
	return ticks
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// Plot draws every target's latency by percentile and saves it to each of paths (the format
// follows the extension: .svg, .png).
func Plot(s Summary, paths ...string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s at %g/s: latency by percentile (from intended send time)", s.Scenario, s.Rate)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms)"
	p.X.Tick.Marker = ninesTicks{}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	// Show the tail down to the one-in-count level the data can support, at least to 99.99%.
	maxNines := 4.0
	for i, t := range s.Targets {
		if t.latency == nil || t.latency.TotalCount() == 0 {
			continue
		}
		maxNines = max(maxNines, math.Ceil(math.Log10(float64(t.latency.TotalCount()))))
		var pts plotter.XYs
		for _, pt := range hist.Listing(t.latency) {
			if pt.Quantile < 1 {
				pts = append(pts, plotter.XY{X: nines(pt.Quantile), Y: pt.ValueMs})
			}
		}
		// The maximum is drawn at the edge of the data's resolution.
		pts = append(pts, plotter.XY{X: math.Log10(float64(t.latency.TotalCount())), Y: float64(t.latency.Max()) / 1000})
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (max %.3g ms)", t.Name, float64(t.LatencyMicros.Max)/1000), line)
	}
	p.X.Min, p.X.Max = 0, maxNines
	p.Y.Max *= 1.08 // room above the maximum, so it is not drawn on the frame
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Title.Padding = vg.Points(6)
	for _, path := range paths {
		if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return fmt.Errorf("saving %s: %w", path, err)
		}
	}
	return nil
}
