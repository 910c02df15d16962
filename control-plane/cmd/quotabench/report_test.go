package main

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/quota"
)

// The body is what weighstation_core::quota::shares_request writes (serde, camelCase, fields in
// declaration order), and the quota service reads every field of it.
func TestReportBodyIsTheFiltersJSON(t *testing.T) {
	limits, err := limitsJSON(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(newReportBody("replica-0", 2, limits).reader())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"replica":"replica-0","replicas":2,"limits":[{"key":"nats/tenant-00000/rate/5eed000000000001","perSecond":1000,"admitted":500,"demand":600,"connections":2,"saturated":true}]}`
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	if got := newReportBody("replica-0", 2, limits).size(); got != int64(len(want)) {
		t.Errorf("size %d, want %d", got, len(want))
	}
	var req quota.SharesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	l := req.Limits[0]
	if req.Replica != "replica-0" || req.Replicas != 2 || l.Demand == nil || *l.Demand != 600 || l.Connections != 2 || !l.Saturated {
		t.Errorf("the quota service read %+v (limit %+v)", req, l)
	}
}

func TestReplicasIn(t *testing.T) {
	for _, tc := range []struct {
		answer string
		want   int
	}{
		{`{"limits":[{"key":"a","share":0.01,"replicas":100},{"key":"b","share":0.01,"replicas":99}]}`, 100},
		{`{"limits":[{"key":"a","share":0.5,"replicas":7}]}`, 7},
		{`{"limits":null}`, 0},
	} {
		if got := replicasIn([]byte(tc.answer)); got != tc.want {
			t.Errorf("replicasIn(%s) = %d, want %d", tc.answer, got, tc.want)
		}
	}
}
