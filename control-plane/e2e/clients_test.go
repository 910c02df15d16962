package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientRun is what one real Kafka client reported after producing open loop through the gateway.
type clientRun struct {
	sent, acked, failed int
	errors              string // the client's own error names, with counts
	// The time from the first to the last acknowledgement: the span over which the client was
	// delivering.
	ackSpan time.Duration
	// What the client itself said about its errors (the first of each kind), for the cell's
	// summary: the numbers say what happened, this often says why.
	log string
}

var probeLine = regexp.MustCompile(`sent=(\d+) acked=(\d+) failed=(\d+) errors=(\S*) first_ack_ms=(-?\d+) last_ack_ms=(-?\d+)`)

func parseProbe(t *testing.T, out []byte) clientRun {
	t.Helper()
	m := probeLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no outcome line from the client:\n%s", out)
	}
	n := func(i int) int {
		v, _ := strconv.Atoi(string(m[i]))
		return v
	}
	return clientRun{sent: n(1), acked: n(2), failed: n(3), errors: string(m[4]),
		ackSpan: time.Duration(n(6)-n(5)) * time.Millisecond}
}

var javaProbe struct {
	once sync.Once
	dir  string
	err  error
}

// javaProducer compiles (once) and runs ProducerProbe: Apache Kafka's Java producer from the
// kafka-clients jar the local Kafka runs on.
func javaProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration, size int) clientRun {
	t.Helper()
	libs := filepath.Join(root, ".tools/kafka/libs/*")
	javaProbe.once.Do(func() {
		javaProbe.dir, javaProbe.err = os.MkdirTemp("", "weighstation-java-probe-")
		if javaProbe.err == nil {
			out, err := exec.Command("javac", "-d", javaProbe.dir, "-cp", libs, "clients/java/ProducerProbe.java").CombinedOutput()
			if err != nil {
				javaProbe.err = fmt.Errorf("javac: %v\n%s", err, out)
			}
		}
	})
	if javaProbe.err != nil {
		t.Fatal(javaProbe.err)
	}
	cmd := exec.Command("java", "-cp", javaProbe.dir+string(os.PathListSeparator)+libs, "ProducerProbe",
		addr(ports.Kafka), topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), fmt.Sprint(size))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java producer: %v\n%s", err, tail(stderr.String(), 2000))
	}
	return parseProbe(t, out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Apache Kafka's Java producer (idempotent, 5 requests in flight, as users run it) offered 2x
// and 10x a tenant's 500 records/s. Every record the client had acknowledged is in the topic and
// none failed. In delay mode the gateway holds it at the limit: acknowledged at 500/s ± 5% over
// the span it was delivering. In reject mode it retries every refusal, and because the gateway
// sets a refused batch's rate aside for its retry once the connection has retried, it is
// acknowledged at >= 90% of the limit (it was 28% when a retry competed afresh).
func TestKafkaJavaProducerLosesNothing(t *testing.T) {
	const limit, burst = 500.0, 50
	cells := []struct {
		mode     string
		overload float64
		window   time.Duration
	}{
		{"delay", 2, 2 * time.Second},
		{"delay", 10, time.Second},
		{"reject", 2, 3 * time.Second},
		{"reject", 10, time.Second},
	}
	for _, c := range cells {
		t.Run(fmt.Sprintf("%s/%.0fx", c.mode, c.overload), func(t *testing.T) {
			tenant := "kafka-java-" + c.mode
			topic := strings.ReplaceAll(uniqueSubject(tenant), ".", "-")
			produceEach(t, "acme-create", topic, 1, 1)
			run := javaProducer(t, topic, tenant+"-p", limit*c.overload, c.window, 500)
			stored := len(topicRecords(t, topic)) - 1
			// The burst is acknowledged at once; the rest over the span, at the rate.
			rate := float64(run.acked-burst) / run.ackSpan.Seconds()
			t.Logf("java %s %.0fx: sent %d, acked %d, failed %d (%s), stored %d; %.0f records/s acknowledged over %s (%.0f%% of the limit)",
				c.mode, c.overload, run.sent, run.acked, run.failed, run.errors, stored, rate, run.ackSpan, 100*rate/limit)
			if run.failed != 0 || run.acked != run.sent || stored != run.acked {
				t.Fatalf("sent %d: acked %d, failed %d (%s), stored %d", run.sent, run.acked, run.failed, run.errors, stored)
			}
			if c.mode == "delay" && math.Abs(rate-limit)/limit > 0.05 {
				t.Fatalf("acknowledged at %.0f records/s, want %.0f ± 5%%", rate, limit)
			}
			if c.mode == "reject" && rate < 0.9*limit {
				t.Fatalf("goodput %.0f records/s, want >= 90%% of %.0f", rate, limit)
			}
		})
	}
}
