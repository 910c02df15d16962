package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// produceEach sends n records one request each and returns how many were acknowledged and the
// errors of the rest.
func produceEach(t *testing.T, clientID, topic string, n, size int) (int, []error) {
	t.Helper()
	cfg := kafkaConfig(clientID)
	p, err := sarama.NewSyncProducer([]string{addr(ports.Kafka)}, cfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer p.Close()
	acked := 0
	var errs []error
	for i := 0; i < n; i++ {
		value := fmt.Sprintf("%s-%d-", clientID, i)
		value += strings.Repeat("x", max(0, size-len(value)))
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(value)}); err != nil {
			errs = append(errs, err)
		} else {
			acked++
		}
	}
	return acked, errs
}

// topicRecords reads partition 0 of topic from the start up to its high watermark, read first:
// every record the broker has committed (acks=all acknowledges only committed records), and no
// waiting for a quiet moment. acme consumes within its default consume limit.
func topicRecords(t *testing.T, topic string) []string {
	t.Helper()
	client, err := sarama.NewClient([]string{addr(ports.Kafka)}, kafkaConfig("acme-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatalf("the end of %s: %v", topic, err)
	}
	c, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []string
	for int64(len(out)) < end {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("reading %s: %v", topic, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("read %d of the %d records in %s", len(out), end, topic)
		}
	}
	return out
}

func errorsWith(errs []error, target error) int {
	n := 0
	for _, e := range errs {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

func TestKafkaOversizedBatchIsRefusedAndNeverStored(t *testing.T) {
	topic := uniqueSubject("kafka-size")
	topic = strings.ReplaceAll(topic, ".", "-")
	okAcked, okErrs := produceEach(t, "kafka-size-small", topic, 1, 100)
	if okAcked != 1 || len(okErrs) != 0 {
		t.Fatalf("a small record: acked %d, errors %v", okAcked, okErrs)
	}
	// 512 KiB spans many Envoy reads and buffers: the request is still read whole and decided.
	acked, errs := produceEach(t, "kafka-size-big", topic, 1, 512<<10)
	if acked != 0 || errorsWith(errs, sarama.ErrMessageSizeTooLarge) != 1 {
		t.Fatalf("a 512 KiB record at a 1 KiB limit: acked %d, errors %v; want %v", acked, errs, sarama.ErrMessageSizeTooLarge)
	}
	records := topicRecords(t, topic)
	if len(records) != 1 || !strings.HasPrefix(records[0], "kafka-size-small") {
		t.Fatalf("the topic holds %d records; want only the small one", len(records))
	}
}

// A Produce many times Envoy's per-connection buffer is held whole, decided, and forwarded.
func TestKafkaLargeProduceWithinTheLimitsIsStored(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-large"), ".", "-")
	acked, errs := produceEach(t, "kafka-delay-large", topic, 2, 768<<10)
	if acked != 2 || len(errs) != 0 {
		t.Fatalf("two 768 KiB records: acked %d, errors %v", acked, errs)
	}
	if records := topicRecords(t, topic); len(records) != 2 {
		t.Fatalf("the topic holds %d records; want 2", len(records))
	}
}

// Conservation with acks=all: acknowledged = present in the topic, refused = errors returned.
func TestKafkaRateRejectRefusesWithThrottlingQuotaExceeded(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-reject"), ".", "-")
	const n = 30
	acked, errs := produceEach(t, "kafka-reject-1", topic, n, 50)
	refused := errorsWith(errs, sarama.ErrThrottlingQuotaExceeded)
	stored := len(topicRecords(t, topic))
	t.Logf("kafka rate reject: sent %d, acked %d, refused %d, stored %d", n, acked, refused, stored)
	if acked+refused != n || stored != acked || refused == 0 {
		t.Fatalf("sent %d: acked %d + refused %d (other errors %v), stored %d", n, acked, refused, errs, stored)
	}
}

func TestKafkaRateDelayHoldsTheProducerAndLosesNothing(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-delay"), ".", "-")
	labels := map[string]string{"protocol": "kafka", "tenant": "kafka-delay"}
	delayedBefore := metric(t, "weighstation_messages_delayed", labels)
	const n = 40
	start := time.Now()
	acked, errs := produceEach(t, "kafka-delay-1", topic, n, 50)
	elapsed := time.Since(start)
	if acked != n || len(errs) != 0 {
		t.Fatalf("delay mode: acked %d of %d, errors %v", acked, n, errs)
	}
	if stored := len(topicRecords(t, topic)); stored != n {
		t.Fatalf("stored %d of %d", stored, n)
	}
	t.Logf("kafka delay: %d records at 50/s took %s", n, elapsed.Round(time.Millisecond))
	if elapsed < 500*time.Millisecond {
		t.Fatalf("the producer was not slowed: %s", elapsed)
	}
	if metric(t, "weighstation_messages_delayed", labels) <= delayedBefore {
		t.Fatal("no delayed records counted")
	}
}

// throttle_time_ms in the real Produce response reports the delay the gateway added: fifteen
// connections send one Produce each at once to a 50/s tenant with a burst of 5, so ten are held
// for about 20 to 200 ms. Each response's throttle_time_ms must be the hold its own client saw:
// no more than the round trip, and no less than the round trip minus throttleSlack (the broker's
// acks=all write and the loopback hops, which a loaded 2-core machine stretches).
func TestKafkaDelayIsReportedInThrottleTime(t *testing.T) {
	const conns = 15
	const throttleSlack = 50 * time.Millisecond
	topic := strings.ReplaceAll(uniqueSubject("kafka-throttle"), ".", "-")
	produceEach(t, "kafka-delay-warm", topic, 1, 10) // creates the topic
	var brokers []*sarama.Broker
	for i := 0; i < conns; i++ {
		b := sarama.NewBroker(addr(ports.Kafka))
		if err := b.Open(kafkaConfig("kafka-delay-raw")); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil { // connected
			t.Fatal(err)
		}
		brokers = append(brokers, b)
	}
	roundTrip := make([]time.Duration, conns)
	throttle := make([]time.Duration, conns)
	errs := make([]error, conns)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &sarama.ProduceRequest{RequiredAcks: sarama.WaitForAll, Timeout: 10000, Version: 7}
			req.AddBatch(topic, 0, &sarama.RecordBatch{
				Version: 2, FirstTimestamp: time.Now(), MaxTimestamp: time.Now(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
				Records: []*sarama.Record{{Value: []byte(fmt.Sprintf("r%d", i))}},
			})
			<-start
			sent := time.Now()
			resp, err := b.Produce(req)
			roundTrip[i] = time.Since(sent)
			switch {
			case err != nil:
				errs[i] = err
			case resp.GetBlock(topic, 0) == nil || resp.GetBlock(topic, 0).Err != sarama.ErrNoError:
				errs[i] = fmt.Errorf("%+v", resp.GetBlock(topic, 0))
			default:
				throttle[i] = resp.ThrottleTime
			}
		}()
	}
	close(start)
	wg.Wait()
	held := 0
	for i := range brokers {
		if errs[i] != nil {
			t.Fatalf("produce %d: %v", i, errs[i])
		}
		t.Logf("request %2d: round trip %6.1f ms, throttle_time_ms %4d", i, float64(roundTrip[i].Microseconds())/1000, throttle[i].Milliseconds())
		// throttle_time_ms is whole milliseconds, truncated, so it never exceeds a true round trip.
		if throttle[i] > roundTrip[i] {
			t.Errorf("request %d: throttle_time_ms %s is more than its round trip %s", i, throttle[i], roundTrip[i])
		}
		if roundTrip[i]-throttle[i] > throttleSlack {
			t.Errorf("request %d: throttle_time_ms %s is more than %s under its round trip %s", i, throttle[i], throttleSlack, roundTrip[i])
		}
		if throttle[i] >= 20*time.Millisecond {
			held++
		}
	}
	if held < conns/2 {
		t.Fatalf("%d of %d requests were reported held ≥ 20 ms; ten of them had to wait for the 50/s rate", held, conns)
	}
}

func TestKafkaDryRunForwardsEverythingAndCounts(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-dry"), ".", "-")
	labels := func(reason string) map[string]string {
		return map[string]string{"protocol": "kafka", "tenant": "kafka-dry", "reason": reason}
	}
	rateBefore := metric(t, "weighstation_dryrun_would_refuse", labels("rate"))
	sizeBefore := metric(t, "weighstation_dryrun_would_refuse", labels("size"))
	acked, errs := produceEach(t, "kafka-dry-1", topic, 30, 2048)
	if acked != 30 || len(errs) != 0 {
		t.Fatalf("dryRun: acked %d of 30, errors %v", acked, errs)
	}
	if metric(t, "weighstation_dryrun_would_refuse", labels("rate")) <= rateBefore ||
		metric(t, "weighstation_dryrun_would_refuse", labels("size")) < sizeBefore+30 {
		t.Fatal("dryRun did not count its would-be refusals")
	}
}

// A consumer group consumes through the gateway (FindCoordinator, JoinGroup, SyncGroup, Fetch
// and OffsetCommit all pass untouched).
func TestKafkaConsumerGroupThroughGateway(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-group"), ".", "-")
	if acked, errs := produceEach(t, "acme-group-producer", topic, 5, 20); acked != 5 {
		t.Fatalf("produce: %d acked, %v", acked, errs)
	}
	cfg := kafkaConfig("acme-group-consumer")
	group, err := sarama.NewConsumerGroup([]string{addr(ports.Kafka)}, "weighstation-e2e-"+topic, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	h := &countingHandler{want: 5, done: make(chan struct{})}
	consumed := make(chan error, 1)
	go func() {
		for {
			if err := group.Consume(t.Context(), []string{topic}, h); err != nil {
				consumed <- err
				return
			}
			select {
			case <-h.done:
				return
			default:
			}
		}
	}()
	select {
	case <-h.done:
	case err := <-consumed:
		t.Fatalf("the group stopped after %d of 5 records: %v", h.count(), err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the group consumed %d of 5 records", h.count())
	}
}

// countingHandler closes done once it has consumed want records. sarama calls ConsumeClaim on
// its own goroutines (one per claimed partition), so the count is guarded.
type countingHandler struct {
	want int
	done chan struct{}
	mu   sync.Mutex
	got  int
}

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got++
		reached := h.got == h.want
		h.mu.Unlock()
		if reached {
			close(h.done)
			return nil
		}
	}
	return nil
}
