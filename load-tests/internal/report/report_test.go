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
	"github.com/weighstation/weighstation/load-tests/internal/refusals"
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

// The quick start as a new user first ran it: as tenant anonymous (100 messages/s), 19,898 of
// 20,000 requests refused through the gateway. The run is limited by policy: the summary, the
// console and the page say so, name the tenant, limit and share from the refusals, present the
// gateway's percentiles as the admitted operations' only, and draw no ratio with them.
func TestARunShapedByALimitSaysSoAndDrawsNoRatio(t *testing.T) {
	r := result()
	r.Targets[1].Sent, r.Targets[1].Acked, r.Targets[1].Refused = 20_000, 102, 19_898
	m := meta()
	told := `nats: permissions violation: Permissions Violation for Publish to "weighstation.bench.x" (rate limit of tenant anonymous: 100 messages/s)`
	m.Refusals = [][]refusals.Reason{nil, {{Tenant: "anonymous", Limit: "rate", Value: "100 messages/s", Count: 19_898, Sample: told}}}
	s := FromResult(m, r)
	if !s.LimitedByPolicy || s.Targets[0].Limited != nil || s.Targets[1].Limited == nil {
		t.Fatalf("limited %v; direct %+v, gateway %+v", s.LimitedByPolicy, s.Targets[0].Limited, s.Targets[1].Limited)
	}
	if share := s.Targets[1].Limited.RefusedShare; share < 0.9948 || share > 0.9950 {
		t.Errorf("refused share %.4f, want 0.9949", share)
	}
	if len(s.Ratios) != 0 {
		t.Errorf("ratios %+v drawn with a limited target", s.Ratios)
	}
	var text strings.Builder
	PrintText(&text, s)
	for _, want := range []string{
		"gateway (admitted only)",
		"LIMITED BY POLICY: gateway refused 99.5% of what it was sent (rate limit of tenant anonymous: 100 messages/s)",
		"gateway's percentiles are of the 102 operations it admitted, not its latency at 2000/s",
		"told 19898 times (warm-up included): " + told,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, text.String())
		}
	}
	dir := t.TempDir()
	if err := Write(dir, s); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "LIMITED BY POLICY: gateway refused 99.5%") || !strings.Contains(string(page), "gateway (admitted only)") {
		t.Errorf("report.html does not say the run was limited by policy")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		LimitedByPolicy bool `json:"limitedByPolicy"`
		Targets         []struct {
			Limited *struct {
				RefusedShare float64 `json:"refusedShare"`
				Reasons      []struct{ Tenant, Limit, Value string }
			} `json:"limitedByPolicy"`
		}
	}
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	if !js.LimitedByPolicy || js.Targets[1].Limited == nil || js.Targets[1].Limited.Reasons[0].Tenant != "anonymous" {
		t.Errorf("summary.json: %s", raw)
	}
}
