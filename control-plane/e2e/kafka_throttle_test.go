package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// produceBatch sends one Produce of n records on b and returns the partition's error and the
// response's throttle_time_ms.
func produceBatch(t *testing.T, b *sarama.Broker, topic string, n int, tag string) (sarama.KError, time.Duration) {
	t.Helper()
	req := &sarama.ProduceRequest{RequiredAcks: sarama.WaitForAll, Timeout: 10000, Version: 7}
	batch := &sarama.RecordBatch{Version: 2, FirstTimestamp: time.Now(), MaxTimestamp: time.Now(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
	for i := 0; i < n; i++ {
		batch.Records = append(batch.Records, &sarama.Record{OffsetDelta: int64(i), Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	batch.LastOffsetDelta = int32(n - 1)
	req.AddBatch(topic, 0, batch)
	resp, err := b.Produce(req)
	if err != nil {
		t.Fatal(err)
	}
	blk := resp.GetBlock(topic, 0)
	if blk == nil {
		t.Fatal("a response without the partition's answer")
	}
	return blk.Err, resp.ThrottleTime
}

// A refusal's throttle_time_ms is the time until that request could be admitted, not a
// constant. On a 20 records/s tenant (50 ms a record) whose 5-record burst was spent at T0, a
// request of k records can be admitted at T0 + k × 50 ms: each refusal must say so, ± 10 ms
// plus what the test cannot see (when within its round trip the gateway decided, and when within
// the burst's round trip T0 was). sarama waits out a connection's throttle before its next
// request, so the early retry goes on a second connection; it is refused with the rest of the
// wait, and sent after it, admitted.
func TestKafkaRefusalThrottleIsTheTimeUntilAdmissible(t *testing.T) {
	const perRecord = 50 * time.Millisecond
	const tolerance = 10 * time.Millisecond
	topic := strings.ReplaceAll(uniqueSubject("kafka-reject-throttle"), ".", "-")
	produceEach(t, "acme-create", topic, 1, 1)
	open := func() *sarama.Broker {
		b := sarama.NewBroker(addr(ports.Kafka))
		if err := b.Open(kafkaConfig("kafka-reject-throttle")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil { // connected
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b, early := open(), open()
	time.Sleep(5 * perRecord) // whatever earlier tests left, the burst is back

	t0Low := time.Now()
	if e, _ := produceBatch(t, b, topic, 5, "burst"); e != sarama.ErrNoError {
		t.Fatalf("the burst was refused: %v", e)
	}
	t0High := time.Now()
	refused := func(b *sarama.Broker, n int, tag string) time.Duration {
		t.Helper()
		sent := time.Now()
		e, throttle := produceBatch(t, b, topic, n, tag)
		answered := time.Now()
		if e != sarama.ErrThrottlingQuotaExceeded {
			t.Fatalf("%s: %d records were %v, want THROTTLING_QUOTA_EXCEEDED", tag, n, e)
		}
		admissible := time.Duration(n) * perRecord
		least := t0Low.Add(admissible).Sub(answered) - tolerance
		most := t0High.Add(admissible).Sub(sent) + tolerance
		t.Logf("%s: %d records told %s (admissible at T0 + %s: between %s and %s from its send)",
			tag, n, throttle, admissible, least.Round(time.Millisecond), most.Round(time.Millisecond))
		if throttle < least || throttle > most {
			t.Errorf("%s: throttle_time_ms %s is not the time until %d records could be admitted", tag, throttle, n)
		}
		return throttle
	}
	refused(b, 1, "one")
	four := refused(b, 4, "four")
	time.Sleep(four / 2)
	refused(early, 4, "four-early")
	// sarama sends this once the wait it was just given has passed.
	if e, throttle := produceBatch(t, early, topic, 4, "four-in-time"); e != sarama.ErrNoError {
		t.Fatalf("sent after the wait it was given, the request was %v (told %s more)", e, throttle)
	}
}
