package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// A batch is the unit a Kafka client sends (librdkafka packs up to batch.size bytes of small
// records into one): in delay mode any batch within maxMessageBytes can be held, however many
// more records than the burst it carries. Five batches of 1,000 records, pipelined on one
// connection, to a 2,000 records/s tenant with a burst of 200 and maxWait 200 ms: each must wait
// 500 ms for the one before — longer than maxWait, which counts from when a batch's own records
// have been paced. All are acknowledged and stored, none refused, paced at the rate. (Before,
// every batch after the first was refused at once with reason "queue".)
func TestKafkaDelayHoldsBatchesLargerThanTheBurst(t *testing.T) {
	const tenant, rate, burst = "kafka-pipe-delay", 2000, 200
	const batches, perBatch = 5, 1000
	topic := strings.ReplaceAll(uniqueSubject("kafka-big-batches"), ".", "-")
	produceEach(t, "acme-create", topic, 1, 1)
	refusedBefore := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant))
	cfg := kafkaConfig(tenant + "-batches")
	cfg.Net.MaxOpenRequests = batches
	b := sarama.NewBroker(addr(ports.Kafka))
	if err := b.Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil { // connected
		t.Fatal(err)
	}
	time.Sleep(time.Duration(burst) * time.Second / rate) // the burst is back

	var mu sync.Mutex
	var wg sync.WaitGroup
	var outcomes []string
	start := time.Now()
	for i := 0; i < batches; i++ {
		req := &sarama.ProduceRequest{RequiredAcks: sarama.WaitForAll, Timeout: 10000, Version: 7}
		batch := &sarama.RecordBatch{Version: 2, FirstTimestamp: start, MaxTimestamp: start,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, LastOffsetDelta: perBatch - 1}
		for r := 0; r < perBatch; r++ {
			batch.Records = append(batch.Records, &sarama.Record{OffsetDelta: int64(r), Value: []byte(fmt.Sprintf("b%d-r%d", i, r))})
		}
		req.AddBatch(topic, 0, batch)
		wg.Add(1)
		err := b.AsyncProduce(req, func(resp *sarama.ProduceResponse, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				outcomes = append(outcomes, err.Error())
			case resp.GetBlock(topic, 0) == nil:
				outcomes = append(outcomes, "no answer for the partition")
			case resp.GetBlock(topic, 0).Err == sarama.ErrNoError:
				outcomes = append(outcomes, "acknowledged")
			default:
				outcomes = append(outcomes, resp.GetBlock(topic, 0).Err.Error())
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	stored := len(topicRecords(t, topic)) - 1
	// The first batch goes on a full bucket and leaves it in debt; each next one when the one
	// before has been paid for.
	paced := time.Duration((batches-1)*perBatch) * time.Second / rate
	t.Logf("%d batches of %d records: %v; stored %d in %s (the rate paces them over %s)", batches, perBatch, outcomes, stored, elapsed.Round(time.Millisecond), paced)
	for _, o := range outcomes {
		if o != "acknowledged" {
			t.Fatalf("a batch was answered %q", o)
		}
	}
	if len(outcomes) != batches || stored != batches*perBatch {
		t.Fatalf("%d of %d batches answered, %d of %d records stored", len(outcomes), batches, stored, batches*perBatch)
	}
	if refused := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant)) - refusedBefore; refused != 0 {
		t.Fatalf("%v records counted refused", refused)
	}
	if elapsed < paced*95/100 {
		t.Fatalf("%d records took %s: not paced at %d/s", batches*perBatch, elapsed, rate)
	}
}
