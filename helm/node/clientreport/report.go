// Package clientreport is what the node tests' client pod (cmd/weighstation-k8s-client) reports
// when it is done, as one JSON line of its log, which the tests read.
package clientreport

// Report is the client's one line of output.
type Report struct {
	Client     string `json:"client"`
	Mode       string `json:"mode"`
	Sent       int    `json:"sent"`
	Acked      int    `json:"acked"`
	Refused    int    `json:"refused"`
	GaveUp     int    `json:"gaveUp"`
	Errors     int    `json:"errors"`
	Reconnects int    `json:"reconnects"`
	// LongestGapMs is the longest time between two acknowledgements once the first came: a
	// gateway pod replaced under the client shows here.
	LongestGapMs int64 `json:"longestGapMs"`
	// Learnt is every address the servers told the client (NATS INFO connect_urls, Kafka
	// Metadata brokers).
	Learnt []string `json:"learnt"`
	// Dials (dial) is each target's outcome: "connected" or the error.
	Dials map[string]string `json:"dials,omitempty"`
	// FirstTryFailures (nats-churn) lists the new connections that failed at their first try.
	FirstTryFailures []string `json:"firstTryFailures,omitempty"`
	// FirstAck and LastAck bound the acknowledgements (RFC 3339).
	FirstAck string `json:"firstAck"`
	LastAck  string `json:"lastAck"`
}
