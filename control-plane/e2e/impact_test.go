package e2e

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/control-plane/internal/impact"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// traceLength is the recorded trace's length: 30 s in `make test`, longer with
// WEIGHSTATION_IMPACT_TRACE (make test-impact-long: 10m).
func traceLength(t *testing.T) time.Duration {
	if s := os.Getenv("WEIGHSTATION_IMPACT_TRACE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("WEIGHSTATION_IMPACT_TRACE: %v", err)
		}
		return d
	}
	return 30 * time.Second
}

// publishSchedule sends counts[i] messages evenly over second i, open loop.
func publishSchedule(t *testing.T, nc *nats.Conn, subject string, counts []int) {
	t.Helper()
	start := time.Now()
	for i, n := range counts {
		for j := 0; j < n; j++ {
			at := start.Add(time.Duration(i)*time.Second + time.Duration(j)*time.Second/time.Duration(n))
			time.Sleep(time.Until(at))
			if err := nc.Publish(subject, []byte("i")); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	time.Sleep(time.Until(start.Add(time.Duration(len(counts)) * time.Second)))
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A trace recorded through the gateway (steady traffic with a burst over the tenant's rate),
// replayed by `weighstation impact` against the tenant's rate halved, predicts the refusals the
// live gateway then makes with that policy when the same trace is sent again: within ±2%.
func TestImpactPredictsTheLiveRefusals(t *testing.T) {
	length := traceLength(t)
	seconds := int(length / time.Second)
	schedule := make([]int, seconds)
	for i := range schedule {
		schedule[i] = 150
		if i >= seconds/3 && i < seconds/3+5 {
			schedule[i] = 500 // the burst: over 400/s now, far over 200/s proposed
		}
	}
	// 1. Record.
	recorder := tenantNATS(t, "impact-trace", &errorSink{})
	began := time.Now()
	publishSchedule(t, recorder, uniqueSubject("impact"), schedule)
	time.Sleep(2500 * time.Millisecond) // the workers' last reports
	bin := filepath.Join(root, ".tools/bin/weighstation")
	// A report spreads what it counted over the time since the worker's previous one, which may
	// begin a second before the first message: the export starts a little earlier.
	since := (time.Since(began) + 3*time.Second).Round(time.Second)
	out, err := exec.Command(bin, "usage", "export", "--control-plane", "http://"+addr(ports.ControlPlane),
		"--resolution", "1s", "--since", since.String()).Output()
	if err != nil {
		t.Fatalf("usage export: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	trace := [][]string{rows[0]}
	var recorded []int
	for _, r := range rows[1:] {
		if r[2] == "impact-trace" {
			trace = append(trace, r)
			m, _ := strconv.Atoi(r[3])
			f, _ := strconv.Atoi(r[5])
			recorded = append(recorded, m+f)
		}
	}
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	if sum(recorded) != sum(schedule) {
		t.Fatalf("the trace holds %d messages, %d were sent", sum(recorded), sum(schedule))
	}
	dir := t.TempDir()
	traceFile := filepath.Join(dir, "trace.csv")
	f, _ := os.Create(traceFile)
	_ = csv.NewWriter(f).WriteAll(trace)
	f.Close()

	// 2. Predict: the proposed policies are today's with impact-trace's rate halved.
	proposed := filepath.Join(dir, "proposed")
	if err := localstack.CopyPolicies(policyDir, proposed); err != nil {
		t.Fatal(err)
	}
	original, err := os.ReadFile(filepath.Join(policyDir, "impact-trace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	halved := strings.Replace(string(original), "messagesPerSecond: 400, burstMessages: 40", "messagesPerSecond: 200, burstMessages: 20", 1)
	if err := os.WriteFile(filepath.Join(proposed, "impact-trace.yaml"), []byte(halved), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "impact.html")
	cmd := exec.Command(bin, "impact", "--policies", proposed, "--usage", traceFile, "--json", "--html", report)
	out, err = cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("weighstation impact exited %d (%v), want 1: the halving refuses more than 0.1%%\n%s", code, err, out)
	}
	var results []impact.TenantImpact
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("impact --json: %v\n%s", err, out)
	}
	predicted := -1
	for _, r := range results {
		if r.Tenant == "impact-trace" {
			predicted = int(r.Totals.RefusedRate)
		}
	}
	if predicted <= 0 {
		t.Fatalf("impact predicts %d refusals for impact-trace: %s", predicted, out)
	}
	if page, _ := os.ReadFile(report); !strings.Contains(string(page), "<svg") {
		t.Error("the HTML report has no plot")
	}

	// 3. Apply the halving and send the trace again.
	writePolicy(t, "impact-trace.yaml", halved)
	t.Cleanup(func() { writePolicy(t, "impact-trace.yaml", string(original)) })
	eventually(t, 10*time.Second, "the halved policy is in force", func() bool {
		st, err := stack.ControlPlaneStatus()
		return err == nil && st.Active != nil && stack.WaitInSync(time.Second) == nil && strings.Contains(statusBody(t, ports.ControlPlane), st.Active.Version)
	})
	time.Sleep(time.Second) // a fresh bucket, as the replay starts with one
	sink := &errorSink{}
	replayer := tenantNATS(t, "impact-trace", sink)
	publishSchedule(t, replayer, uniqueSubject("impact"), recorded)
	var live int
	eventually(t, 5*time.Second, "every refusal reported", func() bool {
		n := sink.count("Permissions Violation", "rate limit of tenant impact-trace")
		settled := n == live
		live = n
		return settled && n > 0
	})
	diff := float64(live-predicted) / float64(predicted)
	t.Logf("trace of %s, %d messages (burst of 5 s at 500/s): impact predicted %d refusals at 200/s, the gateway refused %d: %+.2f%%",
		length, sum(recorded), predicted, live, 100*diff)
	if math.Abs(diff) > 0.02 {
		t.Errorf("the gateway refused %d, impact predicted %d: %+.2f%%, outside ±2%%", live, predicted, 100*diff)
	}
}
