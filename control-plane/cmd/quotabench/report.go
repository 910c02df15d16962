package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// limitReport is one limit's report as the filter writes it (weighstation_core::quota::
// LimitReport, serde camelCase, fields in its order): not quota.LimitReport, whose Demand may be
// absent for older filters, because the benchmark posts what today's filter sends.
type limitReport struct {
	Key         string  `json:"key"`
	PerSecond   float64 `json:"perSecond"`
	Admitted    float64 `json:"admitted"`
	Demand      float64 `json:"demand"`
	Connections uint64  `json:"connections"`
	Saturated   bool    `json:"saturated"`
}

// limitKey is a tenant's rate limit key as the filter reports it (keys::tenant_rate_key with
// "weighstation/" cut): the policy's rate fingerprint is fixed, as every tenant's here has the
// same rate.
func limitKey(tenant int) string {
	return fmt.Sprintf("nats/tenant-%05d/rate/%016x", tenant, 0x5eed_0000_0000_0001)
}

// limitsJSON is the "limits" array every replica reports: limits global limits of 1,000/s, each
// replica of replicas wanting a little more than its even part (max-min fair division has work
// to do) and held back.
func limitsJSON(limits, replicas int) ([]byte, error) {
	even := 1000.0 / float64(replicas)
	reports := make([]limitReport, limits)
	for i := range reports {
		reports[i] = limitReport{Key: limitKey(i), PerSecond: 1000, Admitted: even, Demand: 1.2 * even, Connections: 2, Saturated: true}
	}
	return json.Marshal(reports)
}

// reportBody is the body of one replica's POST /v1/shares (weighstation_core::quota::
// shares_request: replica, replicas, limits). The limits array is shared by every replica and
// request, and only the replica's name differs, so the body is read from three parts rather than
// copied: at 10,000 limits it is over a megabyte, a hundred times a second.
type reportBody struct {
	prefix []byte
	limits []byte
}

func newReportBody(replica string, replicas int, limits []byte) reportBody {
	name, _ := json.Marshal(replica) // a string: cannot fail
	return reportBody{prefix: fmt.Appendf(nil, `{"replica":%s,"replicas":%d,"limits":`, name, replicas), limits: limits}
}

var bodyEnd = []byte("}")

func (b reportBody) reader() io.Reader {
	return io.MultiReader(bytes.NewReader(b.prefix), bytes.NewReader(b.limits), bytes.NewReader(bodyEnd))
}

func (b reportBody) size() int64 { return int64(len(b.prefix) + len(b.limits) + len(bodyEnd)) }
