// Package usage keeps what the gateway's filter workers report about once a second (their
// tenants' counters and a sample of their decisions, wasm-filter/core/src/report) and answers
// the operator's questions from it: who is using how much of their limits right now (/usage,
// `weighstation top`) and why a message was refused or delayed (/decisions,
// `weighstation decisions`).
package usage

import "github.com/weighstation/weighstation/control-plane/internal/discovery"

// Since are a worker's counters as of an earlier report.
type Since struct {
	AtMs    int64         `json:"atMs"`
	Tenants []TenantCount `json:"tenants"`
}

// Reasons are the filter's refusal reasons, in the order of its per-reason arrays.
var Reasons = [6]string{"size", "rate", "inflight", "queue", "connections", "permission"}

// Report is one filter worker's report (POST /v1/report).
type Report struct {
	Replica    string        `json:"replica"`
	Worker     uint64        `json:"worker"`
	Seq        uint64        `json:"seq"`
	AtMs       int64         `json:"atMs"`
	Tenants    []TenantCount `json:"tenants"`
	Decisions  []Decision    `json:"decisions"`
	Suppressed []Suppressed  `json:"suppressed"`
	Dropped    uint64        `json:"dropped"`
	// Since are the worker's counters as of the last report a control plane counted, sent
	// when this one asked (IngestResult.NeedSince).
	Since *Since `json:"since,omitempty"`
	// Brokers are the Kafka brokers the worker has seen named on a discovered cluster's
	// listeners (internal/discovery).
	Brokers []discovery.Seen `json:"brokers"`
}

// TenantCount is a worker's counters for one tenant since it started, and its part of the gauges.
type TenantCount struct {
	Protocol    string    `json:"protocol"`
	Tenant      string    `json:"tenant"`
	Messages    uint64    `json:"messages"`
	Bytes       uint64    `json:"bytes"`
	Delayed     uint64    `json:"delayed"`
	DelayedMs   uint64    `json:"delayedMs"`
	Refused     [6]uint64 `json:"refused"`
	WouldRefuse [6]uint64 `json:"wouldRefuse"`
	Connections int64     `json:"connections"`
	InFlight    int64     `json:"inFlight"`
	Held        int64     `json:"held"`
	// The read side: record bytes delivered to consumers, and fetches throttled or held.
	Consumed         uint64 `json:"consumed"`
	ConsumeThrottled uint64 `json:"consumeThrottled"`
	// Subjects are the worker's busiest subjects (NATS, sampled) or topics (Kafka) since its
	// previous report.
	Subjects []SubjectCount `json:"subjects"`
	// Clients are the worker's busiest clients (by messages admitted and refused) since its
	// previous report (tenants with client limits).
	Clients []ClientCount `json:"clients,omitempty"`
}

// ClientCount is a client's messages in a report period: admitted (and their bytes) and
// refused. A summary's top clients have their refusals over its minute only.
type ClientCount struct {
	Client   string `json:"client"`
	Messages uint64 `json:"messages,omitempty"`
	Bytes    uint64 `json:"bytes,omitempty"`
	Refused  uint64 `json:"refused"`
}

// SubjectCount is a subject's or topic's messages in a report period.
type SubjectCount struct {
	Subject  string `json:"subject"`
	Messages uint64 `json:"messages"`
}

// Decision is one refusal or long delay, as the filter recorded it. Seq and Replica are the
// control plane's: the order it received decisions in, and the Envoy that made it.
type Decision struct {
	Seq        uint64 `json:"seq"`
	WorkerSeq  uint64 `json:"workerSeq"`
	AtMs       int64  `json:"atMs"`
	Replica    string `json:"replica"`
	Protocol   string `json:"protocol"`
	Tenant     string `json:"tenant"`
	Policy     string `json:"policy"`
	Version    string `json:"version"`
	Subject    string `json:"subject"`
	Peer       string `json:"peer"`
	Client     string `json:"client"`
	Limit      string `json:"limit"`
	Configured string `json:"configured"`
	Observed   string `json:"observed"`
	// Decision is "refused" or "delayed".
	Decision     string `json:"decision"`
	Code         string `json:"code,omitempty"`
	RetryAfterMs uint32 `json:"retryAfterMs,omitempty"`
	DelayedMs    uint64 `json:"delayedMs,omitempty"`
	Detail       string `json:"detail"`
}

// Reason is the refusal reason of a decision ("delayed" for a delay), as --reason filters it.
func (d Decision) Reason() string {
	if d.Decision == "delayed" {
		return "delayed"
	}
	for i, l := range limitNames {
		if l == d.Limit {
			return Reasons[i]
		}
	}
	return d.Limit
}

var limitNames = [6]string{"maxMessageBytes", "rate", "inFlight", "queue", "connections", "permissions"}

// Suppressed counts decisions a worker did not keep (beyond its per-second sample).
type Suppressed struct {
	Protocol string `json:"protocol"`
	Tenant   string `json:"tenant"`
	Decision string `json:"decision"`
	Count    uint64 `json:"count"`
}
