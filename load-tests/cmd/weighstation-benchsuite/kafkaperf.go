package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var producerPerfRate = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec`)

// baselineSASL are the producer properties of the baseline user, the one the broker's DIRECT
// listener admits.
func baselineSASL() []string {
	return []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
		fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, baseline.natsUser, baseline.natsPassword)}
}

// producerPerf produces as acme with Kafka's own kafka-producer-perf-test (the Java client, its
// defaults but acks=1), into a topic of its own.
func (s *suite) producerPerf(ctx context.Context, addr string, size, messages int, props ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	libs := filepath.Join(s.root, ".tools", "kafka", "libs", "*")
	// A properties file: --producer-props cannot carry a value with '=' in it (a JAAS line).
	conf, err := os.CreateTemp("", "weighstation-producer-*.properties")
	if err != nil {
		return 0, err
	}
	defer os.Remove(conf.Name())
	lines := append([]string{"bootstrap.servers=" + addr, "acks=1", "client.id=" + acme.kafkaClientID}, props...)
	if _, err := conf.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		return 0, err
	}
	if err := conf.Close(); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx512m", "-cp", libs, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", "weighstation-cpu", "--num-records", strconv.Itoa(messages), "--record-size", strconv.Itoa(size),
		"--throughput", "-1", "--producer.config", conf.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("kafka-producer-perf-test: %w: %s", err, lastLines(out, 5))
	}
	m := producerPerfRate.FindAllSubmatch(out, -1)
	if m == nil {
		return 0, fmt.Errorf("kafka-producer-perf-test printed no rate: %s", lastLines(out, 5))
	}
	last := m[len(m)-1]
	if sent, _ := strconv.Atoi(string(last[1])); sent != messages {
		return 0, fmt.Errorf("kafka-producer-perf-test sent %d of %d records", sent, messages)
	}
	return strconv.ParseFloat(string(last[2]), 64)
}
