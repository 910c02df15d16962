package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// OTLP sends decisions to an OpenTelemetry collector as log records (OTLP/HTTP, JSON encoding,
// POST …/v1/logs), batched once a second. A collector that is down loses the batches it missed
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
	body, err := json.Marshal(LogsRequest(batch))
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

// The OTLP JSON shapes (opentelemetry-proto logs/v1, JSON mapping: camelCase fields, 64-bit
// integers as strings, enums as numbers).
type otlpValue struct {
	StringValue *string `json:"stringValue,omitempty"`
	IntValue    *string `json:"intValue,omitempty"`
}

type otlpAttribute struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpRecord struct {
	TimeUnixNano         string          `json:"timeUnixNano"`
	ObservedTimeUnixNano string          `json:"observedTimeUnixNano"`
	SeverityNumber       int             `json:"severityNumber"`
	SeverityText         string          `json:"severityText"`
	Body                 otlpValue       `json:"body"`
	Attributes           []otlpAttribute `json:"attributes"`
	EventName            string          `json:"eventName"`
}

type otlpScope struct {
	Name string `json:"name"`
}

type otlpScopeLogs struct {
	Scope      otlpScope    `json:"scope"`
	LogRecords []otlpRecord `json:"logRecords"`
}

type otlpResourceLogs struct {
	Resource struct {
		Attributes []otlpAttribute `json:"attributes"`
	} `json:"resource"`
	ScopeLogs []otlpScopeLogs `json:"scopeLogs"`
}

// OTLPLogs is an ExportLogsServiceRequest.
type OTLPLogs struct {
	ResourceLogs []otlpResourceLogs `json:"resourceLogs"`
}

func str(s string) otlpValue { return otlpValue{StringValue: &s} }

func integer(n int64) otlpValue {
	s := strconv.FormatInt(n, 10)
	return otlpValue{IntValue: &s}
}

// OpenTelemetry severity numbers: a refusal is a WARN (13), a delay an INFO (9).
const (
	severityInfo = 9
	severityWarn = 13
)

// LogsRequest renders decisions as one ExportLogsServiceRequest: the body is the text the
// client received, the attributes every field of the decision under `weighstation.`.
func LogsRequest(ds []Decision) OTLPLogs {
	var scope otlpScopeLogs
	scope.Scope.Name = "weighstation.decisions"
	observed := strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, d := range ds {
		sev, text := severityWarn, "WARN"
		if d.Decision == "delayed" {
			sev, text = severityInfo, "INFO"
		}
		attrs := []otlpAttribute{
			{"weighstation.decision", str(d.Decision)},
			{"weighstation.tenant", str(d.Tenant)},
			{"weighstation.protocol", str(d.Protocol)},
			{"weighstation.policy", str(d.Policy)},
			{"weighstation.policy_version", str(d.Version)},
			{"weighstation.subject", str(d.Subject)},
			{"weighstation.limit", str(d.Limit)},
			{"weighstation.limit.configured", str(d.Configured)},
			{"weighstation.limit.observed", str(d.Observed)},
			{"weighstation.replica", str(d.Replica)},
			{"client.address", str(d.Peer)},
			{"weighstation.client", str(d.Client)},
		}
		if d.Code != "" {
			attrs = append(attrs, otlpAttribute{"weighstation.code", str(d.Code)},
				otlpAttribute{"weighstation.retry_after_ms", integer(int64(d.RetryAfterMs))})
		}
		if d.Decision == "delayed" {
			attrs = append(attrs, otlpAttribute{"weighstation.delayed_ms", integer(int64(d.DelayedMs))})
		}
		scope.LogRecords = append(scope.LogRecords, otlpRecord{
			TimeUnixNano:         strconv.FormatInt(d.AtMs*1_000_000, 10),
			ObservedTimeUnixNano: observed,
			SeverityNumber:       sev,
			SeverityText:         text,
			Body:                 str(d.Detail),
			Attributes:           attrs,
			EventName:            "weighstation.decision",
		})
	}
	rl := otlpResourceLogs{ScopeLogs: []otlpScopeLogs{scope}}
	rl.Resource.Attributes = []otlpAttribute{{"service.name", str("weighstation-control-plane")}}
	return OTLPLogs{ResourceLogs: []otlpResourceLogs{rl}}
}
