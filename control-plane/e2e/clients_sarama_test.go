package e2e

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaProducer produces with sarama's AsyncProducer as its users run it: acks=all, up to 5
// requests in flight (Net.MaxOpenRequests), retries (3) only for the errors sarama deems
// retriable, every success and error read from its channels.
func saramaProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration, size int) clientRun {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	// sarama batches a partition's records up to Producer.MaxMessageBytes (default 1,000,000),
	// past the tenant's maxMessageBytes (64 KiB) under load. 16 KiB, the Java producer's
	// batch.size, holds ~30 records of 500 B: under the tenant's burst.
	cfg.Producer.MaxMessageBytes = 16384
	producer, err := sarama.NewAsyncProducer([]string{addr(ports.Kafka)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := newTally()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		for range producer.Successes() {
			outcomes.ack()
		}
	}()
	go func() {
		defer readers.Done()
		for e := range producer.Errors() {
			outcomes.fail(e.Err)
		}
	}()
	sent := 0
	onSchedule(rate, d, func(n int) bool {
		value := make([]byte, size)
		copy(value, clientID+"-"+strconv.Itoa(n))
		producer.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.ByteEncoder(value)}
		sent++
		return true
	})
	// AsyncClose delivers every outstanding record's outcome, then closes both channels.
	producer.AsyncClose()
	readers.Wait()
	return outcomes.run(sent)
}

// sarama (github.com/IBM/sarama) through the conformance cells. It returns a ProducerError per
// record that fails; a refusal shows as THROTTLING_QUOTA_EXCEEDED or MESSAGE_TOO_LARGE, and
// "correlation ID didn't match" (a response out of order) as a sarama.PacketDecodingError.
func TestKafkaSaramaProducerConformance(t *testing.T) {
	clientMatrix(t, "sarama", saramaProducer, "THROTTLING_QUOTA_EXCEEDED", "MESSAGE_TOO_LARGE")
}
