package e2e

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tally counts what an in-process Go client reported about each record, as the external probes
// print it: acknowledgements with the time of the first and last, failures by error name, and
// the first message of each error name.
type tally struct {
	mu                sync.Mutex
	start             time.Time
	acked, failed     int
	firstAck, lastAck time.Duration
	errors            map[string]int
	firstMessage      map[string]string
}

func newTally() *tally {
	return &tally{start: time.Now(), firstAck: -1, errors: map[string]int{}, firstMessage: map[string]string{}}
}

func (c *tally) ack() {
	at := time.Since(c.start)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked++
	if c.firstAck < 0 {
		c.firstAck = at
	}
	c.lastAck = at
}

func (c *tally) fail(err error) {
	name := kafkaErrorName(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed++
	if c.errors[name] == 0 {
		c.firstMessage[name] = err.Error()
	}
	c.errors[name]++
}

// run is the tally as a clientRun, for sent records.
func (c *tally) run(sent int) clientRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	var counts, log []string
	for _, name := range slices.Sorted(maps.Keys(c.errors)) {
		counts = append(counts, fmt.Sprintf("%s:%d", name, c.errors[name]))
		log = append(log, fmt.Sprintf("first %s: %s", name, c.firstMessage[name]))
	}
	return clientRun{sent: sent, acked: c.acked, failed: c.failed, errors: strings.Join(counts, ","),
		ackSpan: c.lastAck - c.firstAck, log: strings.Join(log, "\n")}
}

// clientErrors are the errors of the clients' own (not Kafka error codes) that a record can fail
// with in the matrix, by the names an application matches them with.
var clientErrors = []struct {
	err  error
	name string
}{
	{kgo.ErrRecordTimeout, "kgo.ErrRecordTimeout"},
	{kgo.ErrRecordRetries, "kgo.ErrRecordRetries"},
	{kgo.ErrClientClosed, "kgo.ErrClientClosed"},
	{sarama.ErrOutOfBrokers, "sarama.ErrOutOfBrokers"},
	{sarama.ErrShuttingDown, "sarama.ErrShuttingDown"},
}

// kafkaErrorName names an error the way Kafka's protocol does (THROTTLING_QUOTA_EXCEEDED) when
// it is a Kafka error code, from franz-go or sarama alike; a client's own error by its Go name
// (sarama.PacketDecodingError for a response out of order).
func kafkaErrorName(err error) string {
	var kafka *kerr.Error
	if errors.As(err, &kafka) {
		return kafka.Message
	}
	var code sarama.KError
	if errors.As(err, &code) {
		if kafka, ok := kerr.ErrorForCode(int16(code)).(*kerr.Error); ok && kafka.Code == int16(code) {
			return kafka.Message
		}
		return fmt.Sprintf("KafkaError%d", int16(code))
	}
	for _, c := range clientErrors {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return fmt.Sprintf("%T", err)
}
