package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// librdkafkaProducer runs clients/librdkafka/producer_probe.py: librdkafka as confluent-kafka
// for Python (installed into .tools/venv by scripts/install-tools.sh) ships it.
func librdkafkaProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration, size int) clientRun {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, ".tools/venv/bin/python"), "clients/librdkafka/producer_probe.py",
		addr(ports.Kafka), topic, clientID, fmt.Sprint(rate), fmt.Sprint(d.Seconds()), fmt.Sprint(size),
		fmt.Sprint(matrixDeliveryTimeout.Milliseconds()))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("librdkafka producer: %v\n%s", err, tail(stderr.String(), 2000))
	}
	run := parseProbe(t, out)
	run.log = tail(stderr.String(), 2000)
	return run
}

// librdkafka (confluent-kafka 2.16 for Python) through the conformance cells. It reports every
// message in a delivery report; a refusal shows as THROTTLING_QUOTA_EXCEEDED (or
// MSG_SIZE_TOO_LARGE, librdkafka's name for MESSAGE_TOO_LARGE).
func TestKafkaLibrdkafkaProducerConformance(t *testing.T) {
	clientMatrix(t, "librdkafka", librdkafkaProducer, "THROTTLING_QUOTA_EXCEEDED", "MSG_SIZE_TOO_LARGE")
}
