package hist

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// A histogram written as .hgrm parses back to the distribution of the values recorded: at each
// listed line, TotalCount of the raw values are at or below Value (to the histogram's 3
// significant digits) and that is at least the line's percentile.
func TestHgrmRoundTrip(t *testing.T) {
	const n = 100_000
	r := NewRecorder()
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]float64, n) // ms, as recorded (whole µs)
	for i := range raw {
		// A long-tailed latency: 200 µs typical, a few up to seconds.
		d := time.Duration(200e3 * math.Exp(rng.NormFloat64()*1.5))
		r.Record(d)
		raw[i] = float64(max(d.Microseconds(), 1)) / 1000
	}
	slices.Sort(raw)
	h := r.Snapshot()
	var buf bytes.Buffer
	if err := WriteHgrm(&buf, h); err != nil {
		t.Fatal(err)
	}
	d, err := ParseHgrm(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if d.TotalCount != n {
		t.Errorf("total count %d, want %d", d.TotalCount, n)
	}
	if rawMax := raw[n-1]; d.MaxMs < rawMax || d.MaxMs > rawMax*1.001+0.001 {
		t.Errorf("max %.3f ms, largest value recorded %.3f ms", d.MaxMs, rawMax)
	}
	if len(d.Points) < 60 {
		t.Fatalf("only %d percentile lines", len(d.Points))
	}
	last := d.Points[len(d.Points)-1]
	if last.Quantile != 1 || last.TotalCount != n {
		t.Errorf("last line %+v, want percentile 1 with every value counted", last)
	}
	for _, p := range d.Points {
		if float64(p.TotalCount) < p.Quantile*n {
			t.Errorf("line %+v counts fewer values than its percentile", p)
		}
		below := raw[p.TotalCount-1] // the largest value the line counts
		if below > p.ValueMs+0.0005 || below < p.ValueMs*0.998-0.0015 {
			t.Errorf("line %+v: the %dth value is %.3f ms", p, p.TotalCount, below)
		}
		if p.TotalCount < n && raw[p.TotalCount] <= p.ValueMs*0.999-0.001 {
			t.Errorf("line %+v: value %d (%.3f ms) is below the line's value but not counted", p, p.TotalCount+1, raw[p.TotalCount])
		}
	}
}

// The Java implementation's output (as HdrHistogram's plotter receives it) parses too.
func TestParseJavaHgrm(t *testing.T) {
	const java = `       Value     Percentile TotalCount 1/(1-Percentile)

       0.126 0.000000000000          1           1.00
       0.182 0.500000000000       5016           2.00
       1.063 0.990625000000       9907         106.67
      12.001 1.000000000000      10000
#[Mean    =        0.201, StdDeviation   =        0.352]
#[Max     =       12.001, Total count    =        10000]
#[Buckets =           20, SubBuckets     =         2048]
`
	d, err := ParseHgrm(strings.NewReader(java))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Points) != 4 || d.TotalCount != 10000 || d.MaxMs != 12.001 || d.Points[2].ValueMs != 1.063 {
		t.Fatalf("parsed %+v", d)
	}
}

func TestParseHgrmRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"", "not a histogram\n", "1.0 2.5 10\n", "1.0 0.5\n"} {
		if _, err := ParseHgrm(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}

// Values beyond 60 s stay in the tail (at the top of the range) and are counted.
func TestRecorderKeepsOverflow(t *testing.T) {
	r := NewRecorder()
	r.Record(90 * time.Second)
	r.Record(0)
	h := r.Snapshot()
	if h.TotalCount() != 2 || r.Overflow() != 1 || h.Max() < int64(59*time.Second/time.Microsecond) || h.Min() != 1 {
		t.Fatalf("count %d overflow %d max %d min %d", h.TotalCount(), r.Overflow(), h.Max(), h.Min())
	}
}
