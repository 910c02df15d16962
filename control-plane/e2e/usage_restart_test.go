package e2e

import (
	"testing"
	"time"
)

// A control plane that restarts counts what the gateway did while it was down: each filter
// worker keeps the counters of the last report a control plane counted and sends them when the
// restarted one, which has no report of it, asks. 15 NATS messages published while the control
// plane is stopped are in the restarted control plane's usage export.
func TestARestartedControlPlaneCountsWhatTheGatewayDidMeanwhile(t *testing.T) {
	const tenant, sent = "usage-export", 15
	sink := &errorSink{}
	nc := tenantNATS(t, tenant, sink)
	subject := uniqueSubject("restart")
	c := collect(t, subject)
	stack.StopControlPlane()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = stack.StartControlPlane()
		}
	})
	publishBurst(t, nc, subject, sent, "r")
	delivered, refused := requireConservation(t, "while the control plane was down", sent, c, sink.total)
	if err := stack.StartControlPlane(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	started := time.Now()

	var got billed
	eventually(t, 10*time.Second, "the restarted control plane's export counts the messages", func() bool {
		sums, _, ok := usageExport(t)
		got = sums[[3]string{"nats", tenant, ""}]
		return ok && got.messages == delivered && got.refused == refused
	})
	t.Logf("published %d while the control plane was down (%d delivered, %d refused); its export counted %d and %d, %s after it started",
		sent, delivered, refused, got.messages, got.refused, time.Since(started).Round(10*time.Millisecond))
}
