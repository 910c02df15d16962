package quota

import "testing"

// What the store keeps of a report reads back the same; anything else (an earlier release's
// JSON, a truncated value) is not a report, and so counts as stale.
func TestReportsKeptInTheStoreReadBack(t *testing.T) {
	r := Report{Replica: "envoy-1", Admitted: 99.5, Demand: 1234.25, Connections: 7, Saturated: true, At: 1_700_000_000_123}
	got, ok := decodeReport("envoy-1", r.encode())
	if !ok || got != r {
		t.Errorf("read back %+v (%v), want %+v", got, ok, r)
	}
	for _, v := range []string{`{"replica":"envoy-1","admitted":1}`, "r1 1 2 3 1", "r1 x 2 3 1 5", ""} {
		if _, ok := decodeReport("envoy-1", v); ok {
			t.Errorf("%q read as a report", v)
		}
	}
}
