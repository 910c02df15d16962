package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A tenant's clients in the usage export and on /metrics: two NATS clients of tenant billing
// under its default client limit (60 messages/s, a burst of 60), one publishing 150 at once and
// one 20, each have rows of their own in `weighstation usage export`, with what each was told
// (delivered and refused, as its subscriber and its error callback counted them), and are on the
// control plane's /metrics (--client-metrics, which the local stack sets).
func TestUsageExportAndMetricsHaveATenantsClients(t *testing.T) {
	run := time.Now().UnixNano() % 1_000_000
	names := []string{fmt.Sprintf("export-burst-%d", run), fmt.Sprintf("export-calm-%d", run)}
	type told struct{ delivered, refused int }
	want := map[string]told{}
	for i, sent := range []int{150, 20} {
		sink := &errorSink{}
		nc := gatewayNATS(t, billingTenant, billingTenant+"-secret", nats.Name(names[i]), nats.ErrorHandler(sink.handler))
		subject := uniqueSubject("billing.export")
		c := collect(t, subject)
		publishBurst(t, nc, subject, sent, names[i])
		d, r := requireConservation(t, names[i], sent, c, sink.total)
		want[names[i]] = told{d, r}
	}
	if want[names[0]].refused == 0 || want[names[1]].refused != 0 {
		t.Fatalf("the burst was refused %d times, the calm client %d: want some, and none", want[names[0]].refused, want[names[1]].refused)
	}

	got := map[string]told{}
	var clientBytes int
	var out string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last export read:\n%s", out)
		}
	})
	eventually(t, 5*time.Second, "the export has both clients' rows", func() bool {
		sums, csv, ok := usageExport(t)
		if !ok {
			t.Fatal("weighstation usage export failed")
		}
		out, clientBytes = csv, 0
		for _, n := range names {
			s := sums[[3]string{"nats", billingTenant, n}]
			got[n] = told{s.messages, s.refused}
			clientBytes += s.bytes
		}
		return got[names[0]] == want[names[0]] && got[names[1]] == want[names[1]]
	})
	t.Logf("export: %+v for what the clients were told %+v; %d bytes", got, want, clientBytes)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ",nats,"+billingTenant+",") && (strings.HasSuffix(line, ",") || strings.Contains(line, "export-")) {
			t.Logf("export: %s", line)
		}
	}
	if clientBytes == 0 {
		t.Error("the client rows have no bytes")
	}

	// /metrics: both clients, the burst's refusals among them.
	var body string
	eventually(t, 5*time.Second, "/metrics has both clients", func() bool {
		resp, err := http.Get("http://" + addr(ports.ControlPlane) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
		for _, n := range names {
			if !strings.Contains(body, fmt.Sprintf(`weighstation_client_messages_per_second{protocol="nats",tenant=%q,client=%q}`, billingTenant, n)) {
				return false
			}
		}
		return strings.Contains(body, fmt.Sprintf(`weighstation_client_refused_per_second{protocol="nats",tenant=%q,client=%q}`, billingTenant, names[0]))
	})
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, names[0]) || strings.Contains(line, names[1]) {
			t.Logf("/metrics: %s", line)
		}
	}
}
