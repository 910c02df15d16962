package e2e

import (
	"bytes"
	"fmt"
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
	return javaProducerWith(t, addr(ports.Kafka), nil, topic, clientID, rate, d, size)
}

// javaProducerWith runs ProducerProbe against bootstrap with more client properties.
func javaProducerWith(t *testing.T, bootstrap string, props map[string]string, topic, clientID string, rate float64, d time.Duration, size int) clientRun {
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
		bootstrap, topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), fmt.Sprint(size))
	var lines []string
	for k, v := range props {
		lines = append(lines, k+"="+v)
	}
	cmd.Env = append(os.Environ(), "PROBE_PROPS="+strings.Join(lines, "\n"))
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

// Apache Kafka's Java producer (kafka-clients, idempotent, 5 requests in flight, as users run it)
// through the conformance cells. It retries every refusal, so it reports none; a record it gave
// up on would show as the exception's class.
func TestKafkaJavaProducerConformance(t *testing.T) {
	clientMatrix(t, "java", javaProducer, "ThrottlingQuotaExceededException", "RecordTooLargeException")
}
