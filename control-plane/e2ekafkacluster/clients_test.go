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
	// log is the end of what the client logged (WARN and above).
	log string
}

var producerLine = regexp.MustCompile(`sent=(\d+) acked=(\d+) failed=(\d+) errors=(\S*)`)

var javaClasses struct {
	once sync.Once
	dir  string
	err  error
}

// javaProducer is ClusterProducer (clients/ClusterProducer.java, compiled once against the
// kafka-clients jar the brokers run on) producing through the gateway as it runs.
type javaProducer struct {
	cmd    *exec.Cmd
	acked  string
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// startJavaProducer starts ClusterProducer and returns once its client has its metadata, so an
// event scheduled after it happens under load.
func startJavaProducer(t *testing.T, bootstrap, topic, clientID string, rate float64, d time.Duration) *javaProducer {
	t.Helper()
	libs := filepath.Join(root, ".tools/kafka/libs/*")
	javaClasses.once.Do(func() {
		javaClasses.dir, javaClasses.err = os.MkdirTemp("", "weighstation-java-cluster-")
		if javaClasses.err == nil {
			out, err := exec.Command("javac", "-d", javaClasses.dir, "-cp", libs, "clients/ClusterProducer.java").CombinedOutput()
			if err != nil {
				javaClasses.err = fmt.Errorf("javac: %v\n%s", err, out)
			}
		}
	})
	if javaClasses.err != nil {
		t.Fatal(javaClasses.err)
	}
	p := &javaProducer{acked: filepath.Join(t.TempDir(), "acked")}
	// WARN: the client's own account of retries and errors, shown when a check fails.
	p.cmd = exec.Command("java", "-Xmx256m", "-Dorg.apache.logging.log4j.level=WARN", "-cp", javaClasses.dir+string(os.PathListSeparator)+libs, "ClusterProducer",
		bootstrap, topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), p.acked)
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
			if strings.Contains(line, "ClusterProducer: started") {
				once.Do(func() { close(started) })
			}
		}
		once.Do(func() { close(started) })
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the Java producer did not get its metadata within 60 s")
	}
	return p
}

// wait waits for the producer to finish and reads what it reported.
func (p *javaProducer) wait(t *testing.T) producerRun {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("java producer: %v\n%s", err, tail(p.stderr.String(), 3000))
	}
	m := producerLine.FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("no outcome line from the Java producer:\n%s", p.stdout.String())
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	run := producerRun{sent: n(1), acked: n(2), failed: n(3), errors: m[4], log: tail(p.stdout.String()+p.stderr.String(), 4000)}
	b, err := os.ReadFile(p.acked)
	if err != nil {
		t.Fatal(err)
	}
	run.ackedValues = strings.Fields(string(b))
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
