package usage

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// OTLP sends decisions to an OpenTelemetry collector as log records (OTLP/HTTP, JSON encoding
// of the official protobuf types, POST …/v1/logs), batched once a second. A collector that is down loses the batches it missed
// (counted); the decision log itself is unaffected.
type OTLP struct {
	Endpoint string // e.g. http://otel-collector:4318/v1/logs
	Client   *http.Client
	Log      *slog.Logger

	mu      sync.Mutex
	pending []Decision
	// sent and lost count decisions delivered to and lost on the way to the collector.
	sent, lost uint64
}

// Counts are the decisions delivered to the collector and those lost on the way.
func (o *OTLP) Counts() (sent, lost uint64) {
	if o == nil {
		return 0, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent, o.lost
}

// maxOTLPPending bounds the decisions waiting for the next batch.
const maxOTLPPending = 10000

// Add queues decisions for the next batch.
func (o *OTLP) Add(ds []Decision) {
	if o == nil || len(ds) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, ds...)
	if excess := len(o.pending) - maxOTLPPending; excess > 0 {
		o.pending = o.pending[excess:]
		o.lost += uint64(excess)
	}
}

// Run sends a batch every second until ctx ends.
func (o *OTLP) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o.mu.Lock()
		batch := o.pending
		o.pending = nil
		o.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := o.send(ctx, batch)
		o.mu.Lock()
		if err != nil {
			o.lost += uint64(len(batch))
		} else {
			o.sent += uint64(len(batch))
		}
		o.mu.Unlock()
		if err != nil {
			o.Log.Warn("sending decisions to the OpenTelemetry collector", "endpoint", o.Endpoint, "decisions", len(batch), "err", err)
		}
	}
}

func (o *OTLP) send(ctx context.Context, batch []Decision) error {
	body, err := protojson.Marshal(LogsRequest(batch))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("collector answered %s", resp.Status)
	}
	return nil
}

// OpenTelemetry severity numbers: a refusal is a WARN, a delay an INFO.
func severity(d Decision) (logspb.SeverityNumber, string) {
	if d.Decision == "delayed" {
		return logspb.SeverityNumber_SEVERITY_NUMBER_INFO, "INFO"
	}
	return logspb.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
}

func attr(key string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: key, Value: v}
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func integer(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}

// LogsRequest renders decisions as one ExportLogsServiceRequest: the body is the text the
// client received, the attributes every field of the decision under `weighstation.`.
func LogsRequest(ds []Decision) *collogs.ExportLogsServiceRequest {
	observed := uint64(time.Now().UnixNano())
	scope := &logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Name: "weighstation.decisions"}}
	for _, d := range ds {
		attrs := []*commonpb.KeyValue{
			attr("weighstation.decision", str(d.Decision)),
			attr("weighstation.tenant", str(d.Tenant)),
			attr("weighstation.protocol", str(d.Protocol)),
			attr("weighstation.policy", str(d.Policy)),
			attr("weighstation.policy_version", str(d.Version)),
			attr("weighstation.subject", str(d.Subject)),
			attr("weighstation.limit", str(d.Limit)),
			attr("weighstation.limit.configured", str(d.Configured)),
			attr("weighstation.limit.observed", str(d.Observed)),
			attr("weighstation.replica", str(d.Replica)),
			attr("client.address", str(d.Peer)),
			attr("weighstation.client", str(d.Client)),
		}
		if d.Code != "" {
			attrs = append(attrs, attr("weighstation.code", str(d.Code)),
				attr("weighstation.retry_after_ms", integer(int64(d.RetryAfterMs))))
		}
		if d.Decision == "delayed" {
			attrs = append(attrs, attr("weighstation.delayed_ms", integer(int64(d.DelayedMs))))
		}
		sev, text := severity(d)
		scope.LogRecords = append(scope.LogRecords, &logspb.LogRecord{
			TimeUnixNano:         uint64(d.AtMs) * 1_000_000,
			ObservedTimeUnixNano: observed,
			SeverityNumber:       sev,
			SeverityText:         text,
			Body:                 str(d.Detail),
			Attributes:           attrs,
			EventName:            "weighstation.decision",
		})
	}
	return &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			attr("service.name", str("weighstation-control-plane"))}},
		ScopeLogs: []*logspb.ScopeLogs{scope},
	}}}
}
