package soak

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// write puts report.md and resources.svg in dir.
func (r *Result) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.PlotPath = filepath.Join(dir, "resources.svg")
	if err := os.WriteFile(r.PlotPath, []byte(PlotSVG(r.Samples, r.Events, r.Duration+30*time.Second)), 0o644); err != nil {
		return err
	}
	r.ReportPath = filepath.Join(dir, "report.md")
	return os.WriteFile(r.ReportPath, []byte(r.Markdown()), 0o644)
}

// Markdown is the soak's report.
func (r *Result) Markdown() string {
	var b strings.Builder
	verdict := "PASS"
	if len(r.Failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d)", len(r.Failures))
	}
	fmt.Fprintf(&b, "# Soak: %s, %s\n\n", r.Duration, verdict)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "- FAIL: %s\n", f)
	}
	if len(r.Failures) > 0 {
		b.WriteString("\n")
	}

	b.WriteString("## Faults\n\n")
	fmt.Fprintf(&b, "Policy flips: %d (every %s, cycling: %s).\n\n", r.Flips, FlipEvery, cycleNames())
	b.WriteString("| at | fault | back after | detail |\n|---|---|---|---|\n")
	for _, e := range r.Events {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", e.At, e.What, e.Took, e.Detail)
	}
	b.WriteString("\nStarted again by the supervisor:")
	for _, n := range slices.Sorted(maps.Keys(r.Restarts)) {
		fmt.Fprintf(&b, " %s %d;", n, r.Restarts[n])
	}
	b.WriteString("\n\n## Ledger\n\n")
	fmt.Fprintf(&b, "Every message sent is delivered (found at its destination), refused (the client saw the refusal), or failed in a fault: an error of a kind an injected fault on its path produces, seen from the fault to %s after the component was back (docs/reliability.md). Anything else is unaccounted, a disconnect no fault explains included. The delay tenant's refusals are bounded by the policy steps that put it over its rate.\n\n", recoveryGrace)
	b.WriteString("| tenant | kind | sent | delivered | refused | failed in a fault | unaccounted | duplicates | delivered despite an error | refused outside faults | slowest acknowledgement |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range append(append([]Row(nil), r.Rows...), r.Total) {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", row.Tenant, row.Kind, row.Sent, row.Delivered, row.Refused,
			row.FailedInFault, row.Unaccounted, row.Duplicates, row.DeliveredDespiteError, row.RefusedOutsideFaults, row.SlowestAck.Round(10*time.Millisecond))
	}
	b.WriteString("\nRead back:")
	for _, k := range slices.Sorted(maps.Keys(r.ReadBack)) {
		fmt.Fprintf(&b, " %s %d;", k, r.ReadBack[k])
	}
	b.WriteString("\n\n## Errors clients saw\n\n")
	flows := make([]string, 0, len(r.ClientErrors))
	for f, errs := range r.ClientErrors {
		if len(errs) > 0 {
			flows = append(flows, f)
		}
	}
	sort.Strings(flows)
	for _, f := range flows {
		fmt.Fprintf(&b, "- %s: %s\n", f, replies(r.ClientErrors[f]))
	}
	b.WriteString("\n## Refusals: seen by clients, counted by the gateway\n\n")
	b.WriteString("| tenant | protocol | seen by clients | `weighstation_messages_refused` | `weighstation_dryrun_would_refuse` |\n|---|---|---:|---:|---:|\n")
	for _, c := range r.Refusals {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f |\n", c.Tenant, c.Protocol, c.ClientSeen, c.Counted, c.WouldRefuse)
	}
	b.WriteString("\nKafka clients retry a refusal (franz-go retries `THROTTLING_QUOTA_EXCEEDED`): the gateway counts each refused try, the client reports a record refused only if its last try was.\n")

	h := r.Hostile
	b.WriteString("\n## Hostile clients\n\n")
	fmt.Fprintf(&b, "- slowloris (half a NATS CONNECT, a Kafka request without its body), held open: %d opened, at most %d at once, %d closed by the gateway\n", h.SlowlorisOpened, h.SlowlorisPeak, h.SlowlorisClosedByGateway)
	fmt.Fprintf(&b, "- NATS `PUB` of 2 GiB, then streamed for up to %s: %d, %d closed by the gateway, at most %d bytes written by one (socket buffers included); the gateway answered: %s\n", bigStreamFor, h.BigNATS, h.BigNATSClosed, h.BigNATSBytesMax, replies(h.BigNATSReplies))
	fmt.Fprintf(&b, "- Kafka frame length 2³¹−1, then streamed for up to %s: %d, %d closed by the gateway, at most %d bytes written by one\n", bigStreamFor, h.BigKafka, h.BigKafkaClosed, h.BigKafkaBytesMax)
	fmt.Fprintf(&b, "- 4 KiB of random bytes after a valid handshake (NATS CONNECT, Kafka ApiVersions): %d, %d closed by the gateway\n", h.Garbage, h.GarbageClosed)
	fmt.Fprintf(&b, "- CONNECT floods of %d over a limit of 5: %d floods, %d admitted (at most %d at once), %d refused\n", floodSize, h.Floods, h.FloodAdmitted, h.FloodAdmittedMax, h.FloodRefused)
	fmt.Fprintf(&b, "- attempts that found the gateway or its broker down (a fault window): %d %s\n", h.Unavailable, strings.Join(h.UnavailableWhy, "; "))

	b.WriteString("\n## What a 2 GiB length costs\n\n")
	b.WriteString("| protocol | connections | Envoy RSS before | with idle connections | peak with 2 GiB senders | extra per connection | per-connection buffer | most bytes one sender wrote | closed by the gateway |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "| %s | %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f KiB | %.0f KiB | %d | %d |\n", p.Protocol, p.Opened, p.BaseMiB, p.IdleMiB, p.PeakMiB, p.ExtraPerConnKiB, p.BufferLimitKiB, p.BytesSentPerConn, p.Closed)
	}

	b.WriteString("\n## Resources\n\n")
	fmt.Fprintf(&b, "Sampled every %s; each process judged after the first %s of its lifetime", SampleEvery, warmUp)
	if r.Duration < judgedDrift {
		fmt.Fprintf(&b, " (not judged: the run is shorter than %s)", judgedDrift)
	}
	b.WriteString(". Plot: resources.svg.\n\n| resource | samples judged | median | min | max | worst drift from the median | last minute − first minute |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Drifts {
		if d.Samples == 0 {
			fmt.Fprintf(&b, "| %s | 0 (none after warm-up) | | | | | |\n", d.Name)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %.1f%% | %+.1f%% |\n", d.Name, d.Samples, d.Median, d.Min, d.Max, 100*d.Worst, 100*d.Trend)
	}
	held := 0.0
	for _, s := range r.Samples {
		held = math.Max(held, s.Held)
	}
	fmt.Fprintf(&b, "\nHeld messages: at most %.0f in any sample (the queues bound them at %d).\n", held, QueueBound)
	b.WriteString("\n| t | Envoy pid | Envoy RSS MiB | control plane pid | control plane RSS MiB | shared-data keys | held |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %s | %d | %.1f | %d | %.1f | %.0f | %.0f |\n", s.At, s.EnvoyPID, s.EnvoyRSS, s.CPPID, s.CPRSS, s.SharedKeys, s.Held)
	}
	return b.String()
}

func cycleNames() string {
	var names []string
	for s := StepBase; s < policySteps; s++ {
		names = append(names, s.String())
	}
	return strings.Join(names, " → ")
}

func replies(m map[string]int) string {
	if len(m) == 0 {
		return "nothing"
	}
	var parts []string
	for k, n := range m {
		if k == "" {
			k = "(nothing)"
		}
		parts = append(parts, fmt.Sprintf("`%s` ×%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
