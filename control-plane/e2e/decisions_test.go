package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// decisionsFor reads the control plane's decision log for one tenant and protocol.
func decisionsFor(t *testing.T, tenant, protocol string) []usage.Decision {
	t.Helper()
	q := url.Values{"tenant": {tenant}, "protocol": {protocol}}
	resp, err := http.Get("http://" + addr(ports.ControlPlane) + "/decisions?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []usage.Decision
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var d usage.Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("decision line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

// awaitConsumeDecision waits for a consume-throttling decision of tenant in the decision log
// (reports reach the control plane about once a second) and checks what it says.
func awaitConsumeDecision(t *testing.T, tenant, protocol, detail string) {
	t.Helper()
	var found *usage.Decision
	eventually(t, 10*time.Second, "a consume decision of "+tenant, func() bool {
		for _, d := range decisionsFor(t, tenant, protocol) {
			if d.Limit == "consume" {
				found = &d
				return true
			}
		}
		return false
	})
	t.Logf("decision log: %s %s: %s (%s; configured %s)", found.Decision, found.Limit, found.Detail, found.Observed, found.Configured)
	if found.Decision != "delayed" || found.DelayedMs == 0 || !strings.Contains(found.Detail, detail) ||
		!strings.Contains(found.Configured, "bytes/s received") {
		t.Errorf("consume decision %+v: want a delay, its length, %q and the configured limit", *found, detail)
	}
}

// awaitDecision waits for a decision on subject and says how long after the filter made it the
// control plane served it.
func awaitDecision(t *testing.T, tenant, protocol, subject string) (usage.Decision, time.Duration) {
	t.Helper()
	var found usage.Decision
	var readable time.Time
	eventually(t, 5*time.Second, protocol+" refusal in the decision log", func() bool {
		for _, d := range decisionsFor(t, tenant, protocol) {
			if d.Subject == subject {
				found, readable = d, time.Now()
				return true
			}
		}
		return false
	})
	return found, readable.Sub(time.UnixMilli(found.AtMs))
}

// A refused NATS publish and a refused Kafka produce each show up in the control plane's
// decision log, with the limit that decided, its configured value, what it observed and what
// the client was told, within 2 s; `weighstation decisions` prints them.
func TestRefusalsAreInTheDecisionLog(t *testing.T) {
	version := ""
	if st, err := stack.ControlPlaneStatus(); err == nil && st.Active != nil {
		version = st.Active.Version
	}

	sink := &errorSink{}
	nc := tenantNATS(t, "decision-log", sink)
	subject := uniqueSubject("decisions")
	publishBurst(t, nc, subject, 50, "m")
	// nats.go hands -ERR to its error handler asynchronously.
	eventually(t, 5*time.Second, "a NATS publish refused", func() bool {
		return sink.count("Permissions Violation", "rate limit of tenant decision-log") > 0
	})
	d, took := awaitDecision(t, "decision-log", "nats", subject)
	t.Logf("NATS refusal served by the control plane %s after the filter made it: %+v", took.Round(10*time.Millisecond), d)
	if took > 2*time.Second {
		t.Errorf("the NATS refusal took %s to reach the decision log, more than 2 s", took)
	}
	checks := []struct{ what, got, want string }{
		{"decision", d.Decision, "refused"},
		{"limit", d.Limit, "rate"},
		// The default bytes/s limit (64 MiB) is in force beside the policy's messages/s.
		{"configured", d.Configured, "20 messages/s (burst 5), 67108864 bytes/s (burst 67108864)"},
		{"policy", d.Policy, "decision-log-policy"},
		{"version", d.Version, version},
		{"client", d.Client, "user decision-log"},
		{"code", d.Code, "-ERR 'Permissions Violation'"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("NATS decision %s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if !strings.HasPrefix(d.Observed, "admissible in ") || d.RetryAfterMs == 0 || !strings.HasPrefix(d.Peer, "127.0.0.1:") || d.Replica == "" {
		t.Errorf("NATS decision: observed %q, retry after %d ms, peer %q, replica %q", d.Observed, d.RetryAfterMs, d.Peer, d.Replica)
	}
	if strings.Contains(d.Client+d.Detail, "decision-log-secret") {
		t.Error("the decision carries the client's password")
	}

	topic := strings.ReplaceAll(uniqueSubject("decisions"), ".", "-")
	acked, errs := produceEach(t, "decision-log-1", topic, 30, 50)
	if errorsWith(errs, sarama.ErrThrottlingQuotaExceeded) == 0 {
		t.Fatalf("no Kafka produce was refused (acked %d, errors %v)", acked, errs)
	}
	k, took := awaitDecision(t, "decision-log", "kafka", topic)
	t.Logf("Kafka refusal served by the control plane %s after the filter made it: %+v", took.Round(10*time.Millisecond), k)
	if took > 2*time.Second {
		t.Errorf("the Kafka refusal took %s to reach the decision log, more than 2 s", took)
	}
	checks = []struct{ what, got, want string }{
		{"limit", k.Limit, "rate"},
		{"configured", k.Configured, d.Configured},
		{"client", k.Client, "client.id decision-log-1"},
		{"code", k.Code, "THROTTLING_QUOTA_EXCEEDED (89)"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Kafka decision %s = %q, want %q", c.what, c.got, c.want)
		}
	}

	// The command an operator runs.
	out, err := exec.Command(filepath.Join(root, ".tools/bin/weighstation"), "decisions",
		"--control-plane", "http://"+addr(ports.ControlPlane), "--tenant", "decision-log", "--reason", "rate").CombinedOutput()
	if err != nil {
		t.Fatalf("weighstation decisions: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("weighstation decisions --tenant decision-log --reason rate: %d lines, the first:\n%s", len(lines), lines[0])
	seen := map[string]bool{}
	for _, l := range lines {
		var d usage.Decision
		if err := json.Unmarshal([]byte(l), &d); err != nil || d.Tenant != "decision-log" || d.Limit != "rate" {
			t.Fatalf("weighstation decisions printed %q (%v)", l, err)
		}
		seen[d.Protocol] = true
	}
	if !seen["nats"] || !seen["kafka"] {
		t.Errorf("weighstation decisions printed %d lines, protocols %v: want both", len(lines), seen)
	}
}

// /usage sums the workers' reports: a tenant refused at its rate shows its traffic, its
// refusals by reason and its limit.
func TestUsageShowsATenantAgainstItsLimit(t *testing.T) {
	nc := tenantNATS(t, "decision-log", &errorSink{})
	subject := uniqueSubject("usage")
	stop := time.Now().Add(4 * time.Second)
	var tenant *usage.TenantNow
	for time.Now().Before(stop) && tenant == nil {
		publishBurst(t, nc, subject, 20, "u")
		time.Sleep(200 * time.Millisecond)
		for _, u := range readUsage(t) {
			if u.Tenant == "decision-log" && u.Protocol == "nats" && u.RefusedPerSecond["rate"] > 0 && u.MessagesPerSecond > 0 {
				tenant = &u
				break
			}
		}
	}
	if tenant == nil {
		t.Fatalf("/usage never showed decision-log's NATS traffic and refusals: %+v", readUsage(t))
	}
	t.Logf("/usage: %+v", *tenant)
	if tenant.Limits == nil || tenant.Limits.MessagesPerSecond == nil || *tenant.Limits.MessagesPerSecond != 20 || tenant.Replicas != 1 || tenant.Connections < 1 {
		t.Errorf("decision-log in /usage: %+v (limits %+v)", *tenant, tenant.Limits)
	}
}

func readUsage(t *testing.T) []usage.TenantNow {
	t.Helper()
	return readUsageOf(t, ports.ControlPlane)
}

// readUsageOf reads /usage from the control plane of a stack (its HTTP port serves it).
func readUsageOf(t *testing.T, cpPort int) []usage.TenantNow {
	t.Helper()
	resp, err := http.Get("http://" + addr(cpPort) + "/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Tenants []usage.TenantNow `json:"tenants"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Tenants
}

// tmux runs tmux on a private server of the test's.
func tmux(t *testing.T, socket string, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// `weighstation top` in a terminal (tmux): under load, the tenant at its limit is the first
// row, at about 100% of it with its refusals by reason; Ctrl-C ends it.
func TestTopShowsTheTenantAtItsLimitFirst(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/install-tools.sh installs it)")
	}
	socket := "weighstation-top-" + strings.ReplaceAll(uniqueSubject("t"), ".", "-")
	bin := filepath.Join(root, ".tools/bin/weighstation")
	tmux(t, socket, "new-session", "-d", "-s", "top", "-x", "200", "-y", "40",
		bin+" top --control-plane http://"+addr(ports.ControlPlane))
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", socket, "kill-server").Run() })

	// decision-log at 5× its 20 messages/s; iso-a well under its limit.
	hot, calm := tenantNATS(t, "decision-log", &errorSink{}), tenantNATS(t, "iso-a", &errorSink{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			_ = hot.Publish("top.hot", []byte("x"))
			if i%10 == 0 {
				_ = calm.Publish("top.calm", []byte("y"))
			}
		}
	}()
	defer func() { close(stop); <-done }()

	var screen string
	var first []string
	eventually(t, 10*time.Second, "top shows decision-log first, with its subject", func() bool {
		screen = tmux(t, socket, "capture-pane", "-p", "-t", "top")
		first = nil
		for _, line := range strings.Split(screen, "\n") {
			if f := strings.Fields(line); len(f) > 3 && (f[1] == "nats" || f[1] == "kafka") {
				first = f
				break
			}
		}
		if len(first) < 3 || first[0] != "decision-log" || !strings.Contains(strings.Join(first, " "), "top.hot") {
			return false
		}
		// The first second of the load may fall partly into a report's window: wait for a full one.
		load, err := strconv.Atoi(strings.TrimSuffix(first[2], "%"))
		return err == nil && load >= 90
	})
	t.Logf("weighstation top:\n%s", strings.TrimRight(screen, "\n"))
	if !strings.Contains(screen, "iso-a") {
		t.Errorf("iso-a is not listed:\n%s", screen)
	}
	if !strings.Contains(strings.Join(first, " "), "rate ") {
		t.Errorf("first row %v shows no rate refusals", first)
	}

	tmux(t, socket, "send-keys", "-t", "top", "C-c")
	eventually(t, 3*time.Second, "top exits on Ctrl-C", func() bool {
		return exec.Command("tmux", "-L", socket, "has-session", "-t", "top").Run() != nil
	})
}

// `weighstation usage export` bills exactly what the gateway accepted and refused, per tenant
// and minute: 300 NATS messages and 40 Kafka records, of which some were refused.
func TestUsageExportBillsWhatTheGatewayCounted(t *testing.T) {
	sink := &errorSink{}
	nc := tenantNATS(t, "usage-export", sink)
	subject := uniqueSubject("export")
	c := collect(t, subject)
	const sent = 300
	publishBurst(t, nc, subject, sent, "e")
	delivered, refused := requireConservation(t, "usage export", sent, c, func() int {
		return sink.count("Permissions Violation", "rate limit of tenant usage-export")
	})
	topic := strings.ReplaceAll(uniqueSubject("export"), ".", "-")
	acked, errs := produceEach(t, "usage-export-1", topic, 40, 100)
	kafkaRefused := errorsWith(errs, sarama.ErrThrottlingQuotaExceeded)

	type bill struct{ messages, refused int }
	want := map[string]bill{"nats": {delivered, refused}, "kafka": {acked, kafkaRefused}}
	got := map[string]bill{}
	eventually(t, 5*time.Second, "the export shows every message", func() bool {
		sums, _, ok := usageExport(t)
		if !ok {
			t.Fatal("weighstation usage export failed")
		}
		for _, p := range []string{"nats", "kafka"} {
			s := sums[[3]string{p, "usage-export", ""}]
			got[p] = bill{s.messages, s.refused}
		}
		return got["nats"] == want["nats"] && got["kafka"] == want["kafka"]
	})
	t.Logf("billed %+v for NATS (delivered %d, refused %d) and Kafka (acked %d, refused %d)", got, delivered, refused, acked, kafkaRefused)
}
