package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
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

	bin := filepath.Join(root, ".tools/bin/weighstation")
	got := map[string]told{}
	var clientBytes int
	var out []byte
	eventually(t, 5*time.Second, "the export has both clients' rows", func() bool {
		var err error
		out, err = exec.Command(bin, "usage", "export", "--control-plane", "http://"+addr(ports.ControlPlane), "--since", "10m").Output()
		if err != nil {
			t.Fatalf("weighstation usage export: %v", err)
		}
		got, clientBytes = map[string]told{}, 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
			f := strings.Split(line, ",")
			if len(f) != 9 || f[1] != "nats" || f[2] != billingTenant || (f[8] != names[0] && f[8] != names[1]) {
				continue
			}
			m, _ := strconv.Atoi(f[3])
			b, _ := strconv.Atoi(f[4])
			r, _ := strconv.Atoi(f[5])
			g := got[f[8]]
			got[f[8]] = told{g.delivered + m, g.refused + r}
			clientBytes += b
		}
		return got[names[0]] == want[names[0]] && got[names[1]] == want[names[1]]
	})
	t.Logf("export: %+v for what the clients were told %+v; %d bytes", got, want, clientBytes)
	for _, line := range strings.Split(string(out), "\n") {
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
