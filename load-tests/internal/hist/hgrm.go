package hist

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ticksPerHalfDistance is the Java HistogramLogProcessor's default resolution of the
// percentile listing: 5 lines per halving of the distance to 100%.
const ticksPerHalfDistance = 5

// WriteHgrm writes h (microseconds) as a percentile distribution in milliseconds, in the layout
// of Java's Histogram.outputPercentileDistribution, which HdrHistogram's plotter reads.
func WriteHgrm(w io.Writer, h *hdrhistogram.Histogram) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")
	for _, p := range Listing(h) {
		if p.Quantile >= 1 {
			fmt.Fprintf(bw, "%12.3f %2.12f %10d\n", p.ValueMs, 1.0, p.TotalCount)
			continue
		}
		fmt.Fprintf(bw, "%12.3f %2.12f %10d %14.2f\n", p.ValueMs, p.Quantile, p.TotalCount, 1/(1-p.Quantile))
	}
	fmt.Fprintf(bw, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", h.Mean()/1000, h.StdDev()/1000)
	fmt.Fprintf(bw, "#[Max     = %12.3f, Total count    = %12d]\n", ms(h.Max()), h.TotalCount())
	fmt.Fprintln(bw, bucketsFooter(h))
	return bw.Flush()
}

// Listing is h's percentile distribution: the lines of its .hgrm file, and the points of its
// plot. Like Java's PercentileIterator, reporting levels start at 0% and step by
// 100/(ticks·2^k), where 2^k halves the remaining distance to 100%, so the tail gets ever finer
// lines; each level is reported at the first bucket whose cumulative count reaches it. (The Go
// library's own iterator reports some tail levels one bucket late.)
func Listing(h *hdrhistogram.Histogram) []Point {
	total := h.TotalCount()
	if total == 0 {
		return nil
	}
	var out []Point
	level := 0.0 // percent
	var cum int64
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		cum += bar.Count
		for level <= 100*float64(cum)/float64(total) && cum < total {
			out = append(out, Point{ValueMs: ms(bar.To), Quantile: level / 100, TotalCount: cum})
			halfDistance := math.Pow(2, math.Floor(math.Log2(100/(100-level)))+1)
			level += 100 / (ticksPerHalfDistance * halfDistance)
		}
	}
	return append(out, Point{ValueMs: ms(h.Max()), Quantile: 1, TotalCount: total})
}

// bucketsFooter is the "#[Buckets = …" line. The library keeps the bucket geometry private but
// prints it in its own (tab-separated) listing, so it is taken from there.
func bucketsFooter(h *hdrhistogram.Histogram) string {
	var b bytes.Buffer
	_, _ = h.PercentilesPrint(&b, 1, 1)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return lines[len(lines)-1]
}

func ms(us int64) float64 { return float64(us) / 1000 }

// Distribution is a parsed .hgrm file.
type Distribution struct {
	Points     []Point
	MaxMs      float64
	TotalCount int64
}

// Point is one line of the listing: the value (ms) at or below which Quantile (0–1) of the
// TotalCount values lie.
type Point struct {
	ValueMs    float64
	Quantile   float64
	TotalCount int64
}

// ParseHgrm reads a percentile distribution written by WriteHgrm or by HdrHistogram's Java,
// C or Go implementations.
func ParseHgrm(r io.Reader) (Distribution, error) {
	var d Distribution
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "Value"):
			continue
		case strings.HasPrefix(text, "#[Max"):
			if _, err := fmt.Sscanf(strings.ReplaceAll(text, ",", " "), "#[Max = %f Total count = %d]", &d.MaxMs, &d.TotalCount); err != nil {
				return d, fmt.Errorf("line %d: footer %q: %v", line, text, err)
			}
			continue
		case strings.HasPrefix(text, "#"):
			continue
		}
		f := strings.Fields(text)
		if len(f) < 3 {
			return d, fmt.Errorf("line %d: %d fields, want value, percentile, count", line, len(f))
		}
		var p Point
		var err error
		if p.ValueMs, err = strconv.ParseFloat(f[0], 64); err != nil {
			return d, fmt.Errorf("line %d: value: %v", line, err)
		}
		if p.Quantile, err = strconv.ParseFloat(f[1], 64); err != nil || p.Quantile < 0 || p.Quantile > 1 {
			return d, fmt.Errorf("line %d: percentile %q is not a fraction in [0, 1]", line, f[1])
		}
		if p.TotalCount, err = strconv.ParseInt(f[2], 10, 64); err != nil {
			return d, fmt.Errorf("line %d: count: %v", line, err)
		}
		d.Points = append(d.Points, p)
	}
	if err := sc.Err(); err != nil {
		return d, err
	}
	if len(d.Points) == 0 {
		return d, fmt.Errorf("no percentile lines")
	}
	return d, nil
}
