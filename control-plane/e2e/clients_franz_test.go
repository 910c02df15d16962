package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzProducer produces with franz-go's kgo client as its users run it: idempotent, acks=all,
// up to 5 requests in flight, 10 ms linger, snappy when the broker takes it, retrying a record
// until it is delivered or matrixDeliveryTimeout has passed — with the two settings docs/kafka.md
// gives franz-go users: batches within maxMessageBytes and a short MetadataMinAge.
func franzProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration, size int) clientRun {
	t.Helper()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(addr(ports.Kafka)),
		kgo.ClientID(clientID),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// The default (1,000,012 bytes, Kafka's max.message.bytes) lets batches grow past the
		// tenant's maxMessageBytes (64 KiB) under load. 16 KiB, the Java producer's batch.size,
		// holds ~30 records of 500 B: under the tenant's burst.
		kgo.ProducerBatchMaxBytes(16384),
		kgo.RecordDeliveryTimeout(matrixDeliveryTimeout),
		// franz-go retries THROTTLING_QUOTA_EXCEEDED only after a metadata refresh, which it
		// makes at most every MetadataMinAge (5 s by default): a reject tenant's producer then
		// delivers ~1% of its limit and its records time out. At 250 ms it retries in time to
		// spend what the gateway set aside for the retry (docs/kafka.md).
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	outcomes := newTally()
	sent := 0
	onSchedule(rate, d, func(n int) bool {
		value := make([]byte, size)
		copy(value, clientID+"-"+strconv.Itoa(n))
		client.Produce(context.Background(), &kgo.Record{Value: value, Partition: 0}, func(_ *kgo.Record, err error) {
			if err != nil {
				outcomes.fail(err)
			} else {
				outcomes.ack()
			}
		})
		sent++
		return true
	})
	if err := client.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return outcomes.run(sent)
}

// franz-go (github.com/twmb/franz-go/pkg/kgo) through the conformance cells. It returns an error
// per record that fails; a refusal shows as THROTTLING_QUOTA_EXCEEDED or MESSAGE_TOO_LARGE (but
// it treats 89 as retriable and retries it).
func TestKafkaFranzGoProducerConformance(t *testing.T) {
	clientMatrix(t, "franz", franzProducer, "THROTTLING_QUOTA_EXCEEDED", "MESSAGE_TOO_LARGE")
}
