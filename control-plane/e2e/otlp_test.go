package e2e

import (
	"bufio"
	"os"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// collectedRecords reads the log records the OpenTelemetry Collector wrote (one
// ExportLogsServiceRequest per line), strictly: a line that is not one fails the test.
func collectedRecords(t *testing.T) []*logspb.LogRecord {
	t.Helper()
	f, err := os.Open(stack.CollectorOutput())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*logspb.LogRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var req collogs.ExportLogsServiceRequest
		if err := protojson.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("the collector wrote a line that is not an ExportLogsServiceRequest: %v", err)
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				out = append(out, sl.LogRecords...)
			}
		}
	}
	return out
}

// attributes are a record's string attributes.
func attributes(r *logspb.LogRecord) map[string]string {
	m := map[string]string{}
	for _, kv := range r.Attributes {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

// A refusal reaches a real OpenTelemetry Collector (otlp receiver, file exporter; tools/otelcol)
// as a log record carrying the same decision the control plane serves on /decisions: the client's
// text as body, WARN, the decision's time, and the tenant, subject, limit and code as attributes.
func TestDecisionsReachAnOpenTelemetryCollector(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "decision-log", sink)
	subject := uniqueSubject("otlp")
	publishBurst(t, nc, subject, 50, "m")
	d, _ := awaitDecision(t, "decision-log", "nats", subject)

	var rec *logspb.LogRecord
	var found time.Time
	eventually(t, 5*time.Second, "the refusal in the collector's output", func() bool {
		for _, r := range collectedRecords(t) {
			if attributes(r)["weighstation.subject"] == subject {
				rec, found = r, time.Now()
				return true
			}
		}
		return false
	})
	t.Logf("the collector had the refusal %s after the filter made it", found.Sub(time.UnixMilli(d.AtMs)).Round(10*time.Millisecond))
	a := attributes(rec)
	checks := []struct{ what, got, want string }{
		{"body", rec.Body.GetStringValue(), d.Detail},
		{"severity", rec.SeverityText, "WARN"},
		{"event name", rec.EventName, "weighstation.decision"},
		{"decision", a["weighstation.decision"], "refused"},
		{"tenant", a["weighstation.tenant"], "decision-log"},
		{"protocol", a["weighstation.protocol"], "nats"},
		{"limit", a["weighstation.limit"], d.Limit},
		{"configured", a["weighstation.limit.configured"], d.Configured},
		{"code", a["weighstation.code"], d.Code},
		{"client", a["weighstation.client"], d.Client},
		{"policy", a["weighstation.policy"], d.Policy},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("collected record %s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if got, want := rec.TimeUnixNano, uint64(d.AtMs)*1_000_000; got != want {
		t.Errorf("collected record time %d, want the decision's %d", got, want)
	}
}
