package report

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// result is a two-target run in which the gateway is twice as slow as direct at every
// percentile.
func result() engine.Result {
	direct, gateway, lag := hist.NewRecorder(), hist.NewRecorder(), hist.NewRecorder()
	for i := range 10_000 {
		d := time.Duration(100+i%1000) * time.Microsecond
		direct.Record(d)
		gateway.Record(2 * d)
		lag.Record(50 * time.Microsecond)
	}
	return engine.Result{
		Lag: lag.Snapshot(),
		Targets: []engine.TargetResult{
			{Name: "direct", Latency: direct.Snapshot(), Sent: 10_000, Acked: 10_000, Delivered: 10_000, Active: 5 * time.Second},
			{Name: "gateway", Latency: gateway.Snapshot(), Sent: 10_010, Acked: 10_000, Delivered: 10_000, Refused: 10, Active: 5 * time.Second,
				ErrorSamples: []string{"nats: Permissions Violation for Publish"}},
		},
	}
}

func meta() Meta {
	return Meta{Scenario: "nats-request", Description: "NATS request/reply", MessageBytes: 128,
		Plan:      engine.Plan{Rate: 2000, Arrivals: "fixed", Duration: 10 * time.Second, Warmup: time.Second, Phase: time.Second, Connections: 4},
		Addresses: []string{"127.0.0.1:14222", "127.0.0.1:4222"}}
}

func TestSummaryFiguresAndRatios(t *testing.T) {
	s := FromResult(meta(), result())
	if !s.Valid || s.Phase != "1s" || len(s.Targets) != 2 {
		t.Fatalf("valid %v, phase %q, %d targets", s.Valid, s.Phase, len(s.Targets))
	}
	g := s.Targets[1]
	if g.Refused != 10 || g.Sent != 10_010 || g.AchievedRate != 2000 || g.Address != "127.0.0.1:4222" {
		t.Errorf("gateway figures %+v", g)
	}
	if len(s.Ratios) != 1 {
		t.Fatalf("ratios %+v, want gateway/direct", s.Ratios)
	}
	for _, r := range s.Ratios[0].Named() {
		if r.Value < 1.99 || r.Value > 2.01 {
			t.Errorf("gateway/direct at %s = %.3f, want 2", r.Label, r.Value)
		}
	}
}

// Write produces every file, each readable: the JSON and the .hgrm parse back, the PNG decodes,
// and the HTML names the figures and embeds the plot.
func TestWriteProducesTheWholeReport(t *testing.T) {
	dir := t.TempDir()
	r := result()
	r.Lag = lateLag()
	s := FromResult(meta(), r)
	if err := Write(dir, s); err != nil {
		t.Fatal(err)
	}
	var back Summary
	js, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(js, &back); err != nil || back.Targets[1].LatencyMicros != s.Targets[1].LatencyMicros || back.Valid {
		t.Errorf("summary.json does not read back: %v", err)
	}
	for _, tg := range s.Targets {
		f, err := os.Open(filepath.Join(dir, tg.Hgrm))
		if err != nil {
			t.Fatal(err)
		}
		d, err := hist.ParseHgrm(f)
		f.Close()
		if err != nil || d.TotalCount != 10_000 {
			t.Errorf("%s: %v, count %d", tg.Hgrm, err, d.TotalCount)
		}
	}
	f, err := os.Open(filepath.Join(dir, "percentiles.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() < 600 {
		t.Errorf("percentiles.png: %v", err)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "percentiles.svg"))
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	for _, want := range []string{"99.99%", "gateway", "direct"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot has no %q", want)
		}
	}
	for _, want := range []string{"Invalid run", "gateway / direct", "2.00×", "Permissions Violation", "<svg", "gateway.hgrm"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html has no %q", want)
		}
	}
}

// lateLag is a harness that started 5% of its operations 3 ms late.
func lateLag() *hdrhistogram.Histogram {
	r := hist.NewRecorder()
	for i := range 1000 {
		d := 50 * time.Microsecond
		if i%20 == 0 {
			d = 3 * time.Millisecond
		}
		r.Record(d)
	}
	return r.Snapshot()
}

func TestNinesTicks(t *testing.T) {
	var labels []string
	for _, tk := range (ninesTicks{}).Ticks(0, 5) {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0% 90% 99% 99.9% 99.99% 99.999%" {
		t.Fatalf("ticks %q", got)
	}
}
