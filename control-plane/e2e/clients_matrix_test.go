package e2e

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// producerProbe produces open loop through the gateway, partition 0 of topic, as client.id
// clientID: records of size bytes, each starting with its id clientID-n, at rate records/s for
// d. It reports what the client told the application about each record.
type producerProbe func(t *testing.T, topic, clientID string, rate float64, d time.Duration, size int) clientRun

// The conformance tenants (testdata/tenants.yaml, kafka-<client>-<mode>) all have the Java
// tenants' limits: 500 records/s, burst 50, maxMessageBytes 64KiB, inFlight 20; delay holds up
// to 500 messages for 1 s.
const matrixLimit, matrixBurst, matrixRecordBytes = 500.0, 50, 500

// matrixDeliveryTimeout bounds how long a probe's client may keep a record before it reports it
// failed (delivery.timeout.ms and its kin), so that a client the gateway starves fails its cell
// in seconds instead of retrying for minutes. At the limit, the last record of a 10x cell is
// acknowledged ~9 s after it was offered.
const matrixDeliveryTimeout = 15 * time.Second

// The cells: 2x and 10x the limit offered, in delay and reject. 10x is offered for 1 s, not 2:
// delay delivers it at the limit, 10 s, which keeps every cell within about 10 s. Reject 2x is
// offered for 3 s: a retrying client's first refusals cost it ~0.3 s before the gateway has seen
// it retry (see weighstation_core::kafka::Retries), which a 2 s run would weigh double.
var matrixCells = []struct {
	mode     string
	overload float64
	window   time.Duration
}{
	{"delay", 2, 2 * time.Second},
	{"delay", 10, time.Second},
	{"reject", 2, 3 * time.Second},
	{"reject", 10, time.Second},
}

// clientMatrix runs one Kafka client through the conformance cells, against its own tenants
// kafka-<client>-delay and kafka-<client>-reject. refusals are the client's names for the errors
// the gateway refuses with; any other error it reports (a protocol error such as a response out
// of order, a timeout, a broken connection) fails the cell. Each cell asserts what a user would
// notice:
//   - every record is accounted for: acknowledged or reported failed, none silently dropped;
//   - the topic holds exactly the acknowledged records;
//   - every record reported failed was a refusal the gateway counted in
//     weighstation_messages_refused (a client that retries a refused record is refused, and
//     counted, more often than it reports);
//   - in reject mode something was refused (else the cell tested nothing), and the client was
//     acknowledged at 90% to 105% of the limit: one that reports refusals gets what the rate
//     admits, one that retries them gets its refused batches' rate set aside for the retry;
//   - in delay mode nothing is refused and everything is delivered, acknowledged at the limit ± 5%;
//   - the tenant is charged for what was acknowledged, within the burst: a retried batch once.
//
// One line per cell logs the outcome, as docs/kafka.md tabulates it.
func clientMatrix(t *testing.T, client string, produce producerProbe, refusals ...string) {
	for _, c := range matrixCells {
		t.Run(fmt.Sprintf("%s/%.0fx", c.mode, c.overload), func(t *testing.T) {
			tenant := "kafka-" + client + "-" + c.mode
			clientID := tenant + "-p"
			topic := strings.ReplaceAll(uniqueSubject(tenant), ".", "-")
			produceEach(t, "acme-create", topic, 1, 1)
			refusedBefore := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant))
			chargedBefore := metric(t, "weighstation_messages_accepted", kafkaLabels(tenant))
			reasonsBefore := refusalsByReason(t, tenant)
			began := time.Now()
			run := produce(t, topic, clientID, matrixLimit*c.overload, c.window, matrixRecordBytes)
			took := time.Since(began)
			refused := int(metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant)) - refusedBefore)
			refusedWhy := grownBy(reasonsBefore, refusalsByReason(t, tenant))
			stored := recordsOf(topicRecords(t, topic), clientID)
			charged := int(metric(t, "weighstation_messages_accepted", kafkaLabels(tenant)) - chargedBefore)
			rate := ackRate(run, matrixBurst)
			t.Logf("%s %s %.0fx: sent %d, acked %d, failed %d (errors: %s), stored %d, refused by the gateway %d (%s), charged %d; %.0f records/s acknowledged over %s (%.0f%% of the limit); took %s",
				client, c.mode, c.overload, run.sent, run.acked, run.failed, orNone(run.errors), stored, refused, orNone(refusedWhy), charged,
				rate, run.ackSpan.Round(time.Millisecond), 100*rate/matrixLimit, took.Round(100*time.Millisecond))
			if run.log != "" {
				t.Logf("%s said:\n%s", client, strings.TrimSpace(run.log))
			}
			if other := errorsOtherThan(run.errors, refusals); other != "" {
				t.Errorf("errors other than the gateway's refusals: %s", other)
			}
			if run.acked+run.failed != run.sent {
				t.Errorf("sent %d: acked %d + failed %d leaves %d unaccounted", run.sent, run.acked, run.failed, run.sent-run.acked-run.failed)
			}
			if stored != run.acked {
				t.Errorf("the topic holds %d of the run's records, the client acknowledged %d", stored, run.acked)
			}
			// A batch is charged when the gateway forwards it: a retried batch is charged once.
			if charged < run.acked || charged > run.acked+matrixBurst {
				t.Errorf("charged %d records for %d acknowledged, want %d to %d", charged, run.acked, run.acked, run.acked+matrixBurst)
			}
			if refused < run.failed {
				t.Errorf("%d records reported failed, only %d refusals counted by the gateway", run.failed, refused)
			}
			switch c.mode {
			case "reject":
				if refused == 0 {
					t.Errorf("nothing was refused at %.0fx the limit", c.overload)
				}
				if rate < 0.9*matrixLimit || rate > 1.05*matrixLimit {
					t.Errorf("acknowledged at %.0f records/s, want 90%% to 105%% of %.0f", rate, matrixLimit)
				}
			case "delay":
				// A delay that refused and let a retrying client (Java, franz-go) send again
				// would deliver everything too: delay refuses nothing within its queue.
				if refused != 0 {
					t.Errorf("delay: the gateway refused %d records (%s)", refused, refusedWhy)
				}
				if run.acked != run.sent {
					t.Errorf("delay: %d of %d records delivered", run.acked, run.sent)
				}
				if math.Abs(rate-matrixLimit)/matrixLimit > 0.05 {
					t.Errorf("acknowledged at %.0f records/s, want %.0f ± 5%%", rate, matrixLimit)
				}
			}
		})
	}
}

// refusalsByReason reads a Kafka tenant's weighstation_messages_refused, by reason.
func refusalsByReason(t *testing.T, tenant string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, reason := range []string{"size", "rate", "inflight", "queue"} {
		counts[reason] = int(metric(t, "weighstation_messages_refused", map[string]string{"protocol": "kafka", "tenant": tenant, "reason": reason}))
	}
	return counts
}

// grownBy lists the counts that grew from before to after, as "key:increase,...".
func grownBy(before, after map[string]int) string {
	var grown []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d != 0 {
			grown = append(grown, fmt.Sprintf("%s:%d", k, d))
		}
	}
	return strings.Join(grown, ",")
}

// recordsOf counts the records that carry one of clientID's ids (clientID-n).
func recordsOf(records []string, clientID string) int {
	n := 0
	for _, r := range records {
		if strings.HasPrefix(r, clientID+"-") {
			n++
		}
	}
	return n
}

// ackRate is the rate the client was acknowledged at: the burst at once, the rest over the span
// from the first acknowledgement to the last.
func ackRate(run clientRun, burst int) float64 {
	if run.ackSpan <= 0 {
		return 0
	}
	return float64(run.acked-burst) / run.ackSpan.Seconds()
}

// errorsOtherThan returns the entries of a probe's errors (Name:count,...) whose name is not
// one of names.
func errorsOtherThan(errors string, names []string) string {
	var other []string
	for _, e := range strings.Split(errors, ",") {
		name, _, _ := strings.Cut(e, ":")
		if e != "" && !slices.Contains(names, name) {
			other = append(other, e)
		}
	}
	return strings.Join(other, ",")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
