package usage

import (
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The records read as OTLP: the JSON decodes strictly into the official
// ExportLogsServiceRequest, with the decision's time, severity, body and attributes.
func TestDecisionsAreOTLPLogRecords(t *testing.T) {
	ds := []Decision{
		{AtMs: 1795621805142, Replica: "envoy-a", Protocol: "nats", Tenant: "acme", Policy: "acme", Version: "3-abc",
			Subject: "orders.new", Peer: "10.0.0.7:5555", Client: "user acme", Limit: "rate",
			Configured: "20 messages/s (burst 5)", Observed: "admissible in 50 ms", Decision: "refused",
			Code: "-ERR 'Permissions Violation'", RetryAfterMs: 50, Detail: "rate limit of tenant acme: 20 messages/s"},
		{AtMs: 1795621805200, Protocol: "kafka", Tenant: "acme", Limit: "rate", Decision: "delayed", DelayedMs: 180, Detail: "held 180 ms"},
	}
	body, err := protojson.Marshal(LogsRequest(ds))
	if err != nil {
		t.Fatal(err)
	}
	var req collogs.ExportLogsServiceRequest
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &req); err != nil {
		t.Fatalf("not an ExportLogsServiceRequest: %v\n%s", err, body)
	}
	rl := req.GetResourceLogs()
	if len(rl) != 1 || rl[0].GetResource().GetAttributes()[0].GetValue().GetStringValue() != "weighstation-control-plane" {
		t.Fatalf("resource: %v", rl)
	}
	recs := rl[0].GetScopeLogs()[0].GetLogRecords()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	attrs := map[string]string{}
	for _, a := range r.GetAttributes() {
		attrs[a.GetKey()] = a.GetValue().GetStringValue()
		if a.GetKey() == "weighstation.retry_after_ms" && a.GetValue().GetIntValue() != 50 {
			t.Errorf("retry_after_ms %v", a.GetValue())
		}
	}
	if r.GetTimeUnixNano() != 1795621805142000000 || r.GetSeverityText() != "WARN" || r.GetSeverityNumber() != 13 ||
		r.GetBody().GetStringValue() != ds[0].Detail || attrs["weighstation.tenant"] != "acme" ||
		attrs["weighstation.limit.configured"] != ds[0].Configured || attrs["client.address"] != "10.0.0.7:5555" ||
		r.GetEventName() != "weighstation.decision" {
		t.Errorf("refusal record: %v", r)
	}
	if recs[1].GetSeverityText() != "INFO" {
		t.Errorf("a delay is %s, want INFO", recs[1].GetSeverityText())
	}
}
