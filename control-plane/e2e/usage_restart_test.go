package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

	bin := filepath.Join(root, ".tools/bin/weighstation")
	var messages, refusals int
	eventually(t, 10*time.Second, "the restarted control plane's export counts the messages", func() bool {
		out, err := exec.Command(bin, "usage", "export", "--control-plane", "http://"+addr(ports.ControlPlane), "--since", "10m").Output()
		if err != nil {
			return false
		}
		messages, refusals = 0, 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
			f := strings.Split(line, ",")
			if len(f) == 9 && f[1] == "nats" && f[2] == tenant && f[8] == "" {
				m, _ := strconv.Atoi(f[3])
				r, _ := strconv.Atoi(f[5])
				messages, refusals = messages+m, refusals+r
			}
		}
		return messages == delivered && refusals == refused
	})
	t.Logf("published %d while the control plane was down (%d delivered, %d refused); its export counted %d and %d, %s after it started",
		sent, delivered, refused, messages, refusals, time.Since(started).Round(10*time.Millisecond))
}
