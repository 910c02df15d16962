package e2ekafkacluster

import (
	"bufio"
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

// producerRun is what one real client reported after producing open loop through the gateway.
type producerRun struct {
	sent, acked, failed int
	errors              string
	// ackedValues are the values of the records it saw acknowledged.
	ackedValues []string
	// abortedValues are the values of a transactional producer's aborted transactions.
	abortedValues []string
	// refused are the records reported refused to a client that does not retry a refusal
	// (librdkafka: docs/kafka.md "Retries"): reported, never stored.
	refused []string
	// log is the end of what the client logged (WARN and above).
	log string
}

var producerLine = regexp.MustCompile(`sent=(\d+) acked=(\d+) failed=(\d+) errors=(\S*)(?: refused=(\d+))?`)

var javaClasses struct {
	once sync.Once
	dir  string
	err  error
}

// processProducer is a client in a process of its own producing through the gateway as it
// runs: ClusterProducer (clients/ClusterProducer.java, compiled once against the kafka-clients
// jar the brokers run on) or cluster_producer.py (librdkafka as confluent-kafka).
type processProducer struct {
	cmd    *exec.Cmd
	acked  string
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// startJavaProducer starts ClusterProducer and returns once its client has its metadata, so an
// event scheduled after it happens under load.
func startJavaProducer(t *testing.T, bootstrap, topic, clientID string, rate float64, d time.Duration) *processProducer {
	t.Helper()
	return startJava(t, "ClusterProducer", bootstrap, topic, clientID, rate, d)
}

// startTxnProducer starts TxnProducer (transactions of ten records, one in five aborted).
func startTxnProducer(t *testing.T, bootstrap, topic, clientID string, rate float64, d time.Duration) *processProducer {
	t.Helper()
	return startJava(t, "TxnProducer", bootstrap, topic, clientID, rate, d)
}

// startJava starts a producer class of clients/.
func startJava(t *testing.T, class, bootstrap, topic, clientID string, rate float64, d time.Duration) *processProducer {
	t.Helper()
	acked := filepath.Join(t.TempDir(), "acked")
	return startProducer(t, acked, javaCommand(t, class, bootstrap, topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), acked))
}

// javaCommand runs a client class of clients/ (compiled once, against the kafka-clients jar the
// brokers run on). WARN: the client's own account of retries and errors, shown when a check
// fails.
func javaCommand(t *testing.T, class string, args ...string) *exec.Cmd {
	t.Helper()
	libs := filepath.Join(root, ".tools/kafka/libs/*")
	javaClasses.once.Do(func() {
		javaClasses.dir, javaClasses.err = os.MkdirTemp("", "weighstation-java-cluster-")
		if javaClasses.err == nil {
			out, err := exec.Command("javac", "-d", javaClasses.dir, "-cp", libs, "clients/ClusterProducer.java",
				"clients/TxnProducer.java", "clients/ClusterConsumer.java").CombinedOutput()
			if err != nil {
				javaClasses.err = fmt.Errorf("javac: %v\n%s", err, out)
			}
		}
	})
	if javaClasses.err != nil {
		t.Fatal(javaClasses.err)
	}
	return exec.Command("java", append([]string{"-Xmx256m", "-Dorg.apache.logging.log4j.level=WARN", "-cp",
		javaClasses.dir + string(os.PathListSeparator) + libs, class}, args...)...)
}

// startLibrdkafkaProducer starts cluster_producer.py (librdkafka, idempotent).
func startLibrdkafkaProducer(t *testing.T, bootstrap, topic, clientID string, rate float64, d time.Duration) *processProducer {
	t.Helper()
	acked := filepath.Join(t.TempDir(), "acked")
	return startProducer(t, acked, exec.Command(filepath.Join(root, ".tools/venv/bin/python"), "clients/cluster_producer.py",
		bootstrap, topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), acked))
}

// startProducer runs cmd, which writes acknowledged values into acked, and returns once it
// says on stderr that its client has its metadata.
func startProducer(t *testing.T, acked string, cmd *exec.Cmd) *processProducer {
	t.Helper()
	p := &processProducer{cmd: cmd, acked: acked}
	p.cmd.Stdout = &p.stdout
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteString(line + "\n")
			if strings.HasSuffix(line, ": started") {
				once.Do(func() { close(started) })
			}
		}
		once.Do(func() { close(started) })
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not get its metadata within 60 s", p.name())
	}
	return p
}

// name is the client's program.
func (p *processProducer) name() string {
	for _, a := range p.cmd.Args[1:] {
		if strings.HasSuffix(a, ".py") || (a != "" && a[0] >= 'A' && a[0] <= 'Z') {
			return filepath.Base(a)
		}
	}
	return p.cmd.Path
}

// wait waits for the producer to finish and reads what it reported.
func (p *processProducer) wait(t *testing.T) producerRun {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", p.name(), err, tail(p.stderr.String(), 3000))
	}
	m := producerLine.FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("no outcome line from %s:\n%s", p.name(), p.stdout.String())
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	run := producerRun{sent: n(1), acked: n(2), failed: n(3), errors: m[4], log: tail(p.stdout.String()+p.stderr.String(), 4000)}
	b, err := os.ReadFile(p.acked)
	if err != nil {
		t.Fatal(err)
	}
	run.ackedValues = strings.Fields(string(b))
	if b, err := os.ReadFile(p.acked + ".aborted"); err == nil {
		run.abortedValues = strings.Fields(string(b))
	}
	if b, err := os.ReadFile(p.acked + ".refused"); err == nil {
		run.refused = strings.Fields(string(b))
	}
	if m[5] != "" && len(run.refused) != n(5) {
		t.Fatalf("the producer reported %d refused, listed %d", n(5), len(run.refused))
	}
	if len(run.ackedValues) != run.acked {
		t.Fatalf("the producer reported %d acknowledged, listed %d", run.acked, len(run.ackedValues))
	}
	return run
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
