package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// The read side (limits.consume, testdata/consume.yaml): consume-limited may receive 256 KiB/s
// in responses of up to its 32 KiB burst, consume-free is unlimited.
const consumeLimit, consumeBurst = 256 << 10, 32 << 10

// consumeBacklog is what each consumer reads: 14 s of the limit, so that the measured window
// (after the first 2 s, which the full bucket's burst skews) holds 10 s of throttled reading.
const consumeRecords, consumeRecordBytes = 3584, 1024

// consumeBatchBytes is the backlog's largest record batch: what one Fetch may overshoot by.
const consumeBatchBytes = 16 << 10

// received is one record as a consumer saw it.
type received struct {
	at        time.Time
	partition int32
	offset    int64
	bytes     int
}

// produceBacklog creates topic with `partitions` partitions and writes n records of
// consumeRecordBytes spread evenly over them, straight to the broker (its DIRECT listener, as
// the baseline user).
func produceBacklog(t *testing.T, topic string, partitions, n int) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin([]string{addr(ports.KafkaDirect)}, asBaseline(kafkaConfig("backlog")))
	if err != nil {
		t.Fatal(err)
	}
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: 1}, false)
	_ = admin.Close()
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	baseline := plain.Auth{User: localstack.BaselineKafkaUser, Pass: localstack.BaselineKafkaUser + "-secret"}
	// Uncompressed and incompressible: the limit counts record bytes as the broker sends them,
	// which are then what the consumer receives. Batches of 16 KiB: what one Fetch may
	// overshoot the bucket by.
	client, err := kgo.NewClient(kgo.SeedBrokers(addr(ports.KafkaDirect)), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.SASL(baseline.AsMechanism()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(consumeBatchBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	records := make([]*kgo.Record, n)
	for i := range records {
		value := make([]byte, consumeRecordBytes)
		_, _ = rand.Read(value)
		records[i] = &kgo.Record{Value: value, Partition: int32(i % partitions)}
	}
	if err := client.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		t.Fatalf("producing the backlog: %v", err)
	}
}

// franzConsume reads topic from its start through the gateway in a consumer group, as clientID,
// until it has n records or the deadline passes; it counts the group's rebalances after the
// first assignment.
func franzConsume(t *testing.T, topic, group, clientID string, n int, deadline time.Duration) ([]received, int) {
	t.Helper()
	var assigned, revoked atomic.Int32
	client, err := kgo.NewClient(kgo.SeedBrokers(addr(ports.Kafka)), kgo.ClientID(clientID),
		kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Add(1) }),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { revoked.Add(1) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { revoked.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var got []received
	for len(got) < n && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, received{at: now, partition: r.Partition, offset: r.Offset, bytes: len(r.Key) + len(r.Value)})
		})
	}
	// Counted before Close, whose leaving the group revokes the partitions itself.
	rebalances := int(revoked.Load()) + max(int(assigned.Load())-1, 0)
	client.Close()
	return got, rebalances
}

// librdkafkaConsume runs clients/librdkafka/consumer_probe.py: librdkafka (confluent-kafka) in a
// consumer group, reading topic from its start through the gateway as clientID.
func librdkafkaConsume(t *testing.T, topic, group, clientID string, n int, deadline time.Duration) ([]received, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, ".tools/venv/bin/python"), "clients/librdkafka/consumer_probe.py",
		addr(ports.Kafka), topic, group, clientID, fmt.Sprint(n), fmt.Sprint(deadline.Seconds()))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("librdkafka consumer: %v\n%s", err, tail(stderr.String(), 2000))
	}
	var probe struct {
		Records    [][4]float64 `json:"records"`
		Rebalances int          `json:"rebalances"`
	}
	if err := json.Unmarshal(out, &probe); err != nil {
		t.Fatalf("librdkafka consumer output: %v\n%s", err, tail(string(out), 500))
	}
	got := make([]received, len(probe.Records))
	for i, r := range probe.Records {
		got[i] = received{at: time.Unix(0, int64(r[0]*1e9)), partition: int32(r[1]), offset: int64(r[2]), bytes: int(r[3])}
	}
	return got, probe.Rebalances
}

// saramaConsume reads topic from its start through the gateway with sarama's ConsumerGroup, as
// clientID.
func saramaConsume(t *testing.T, topic, group, clientID string, n int, deadline time.Duration) ([]received, int) {
	t.Helper()
	c := kafkaConfig(clientID)
	cg, err := sarama.NewConsumerGroup([]string{addr(ports.Kafka)}, group, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	h := &saramaClaims{want: n, done: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Errorf("sarama consumer group: %v", err)
			break
		}
	}
	h.mu.Lock()
	got, sessions := h.got, h.sessions
	h.mu.Unlock()
	if err := cg.Close(); err != nil {
		t.Errorf("closing the sarama consumer group: %v", err)
	}
	return got, max(sessions-1, 0)
}

// saramaClaims receives for saramaConsume; each group session (a rebalance starts a new one)
// is counted.
type saramaClaims struct {
	mu       sync.Mutex
	want     int
	got      []received
	sessions int
	done     func()
}

func (h *saramaClaims) Setup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.sessions++
	h.mu.Unlock()
	return nil
}

func (h *saramaClaims) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaClaims) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.got = append(h.got, received{at: time.Now(), partition: m.Partition, offset: m.Offset, bytes: len(m.Key) + len(m.Value)})
		full := len(h.got) >= h.want
		h.mu.Unlock()
		s.MarkMessage(m, "")
		if full {
			h.done()
			return nil
		}
	}
	return nil
}

// checkExactlyOnceInOrder fails unless got holds n records, each partition's offsets 0, 1, …
// in order.
func checkExactlyOnceInOrder(t *testing.T, who string, got []received, n int) {
	t.Helper()
	if len(got) != n {
		t.Errorf("%s received %d records of %d", who, len(got), n)
	}
	next := map[int32]int64{}
	for _, r := range got {
		if r.offset != next[r.partition] {
			t.Errorf("%s: partition %d gave offset %d after %d (duplicated, lost or out of order)",
				who, r.partition, r.offset, next[r.partition]-1)
			return
		}
		next[r.partition]++
	}
}

// javaConsume runs two clients/java/ConsumerProbe members in one group (the topic has two
// partitions): Apache Kafka's Java consumer, subscribed. What they received is merged in time
// order; a rebalance is a revocation while both members were receiving (the second member's
// joining and the first's leaving are not ones the throttle caused).
func javaConsume(t *testing.T, topic, group, clientID string, n int, deadline time.Duration) ([]received, int) {
	t.Helper()
	libs := filepath.Join(root, ".tools/kafka/libs/*")
	javaConsumerProbe.once.Do(func() {
		javaConsumerProbe.dir, javaConsumerProbe.err = os.MkdirTemp("", "weighstation-java-consumer-")
		if javaConsumerProbe.err == nil {
			out, err := exec.Command("javac", "-d", javaConsumerProbe.dir, "-cp", libs, "clients/java/ConsumerProbe.java").CombinedOutput()
			if err != nil {
				javaConsumerProbe.err = fmt.Errorf("javac: %v\n%s", err, out)
			}
		}
	})
	if javaConsumerProbe.err != nil {
		t.Fatal(javaConsumerProbe.err)
	}
	type member struct {
		Records [][4]float64 `json:"records"`
		Revoked []float64    `json:"revoked"`
	}
	members := make([]member, 2)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("java", "-cp", javaConsumerProbe.dir+string(os.PathListSeparator)+libs, "ConsumerProbe",
				addr(ports.Kafka), topic, group, fmt.Sprintf("%s-%d", clientID, i), fmt.Sprint(n), "4", fmt.Sprint(deadline.Seconds()))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(out, &members[i])
			}
			if err != nil {
				t.Errorf("java consumer %d: %v\n%s", i, err, tail(stderr.String(), 2000))
			}
		}()
	}
	wg.Wait()
	// Both members consuming: from the later first record to the earlier last (a member that
	// is done leaves the group after a quiet 4 s, and the other's partition moves).
	var got []received
	from, to := 0.0, math.MaxFloat64
	for _, m := range members {
		if len(m.Records) == 0 {
			t.Errorf("a java group member received nothing")
			continue
		}
		from, to = max(from, m.Records[0][0]), min(to, m.Records[len(m.Records)-1][0])
		for _, r := range m.Records {
			got = append(got, received{at: time.Unix(0, int64(r[0]*1e9)), partition: int32(r[1]), offset: int64(r[2]), bytes: int(r[3])})
		}
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].at.Before(got[j].at) })
	rebalances := 0
	for _, m := range members {
		for _, at := range m.Revoked {
			if at > from && at < to {
				rebalances++
			}
		}
	}
	return got, rebalances
}

var javaConsumerProbe struct {
	once sync.Once
	dir  string
	err  error
}

// consumedPerSecond is the rate at which got arrived over about `window` from `skip` after its
// first record, measured between arrivals: a consumer receives the limit in responses of up to
// a burst (a second of it by default), so a window cut at fixed times would count a response
// more or less than arrived in it (±10% over 10 s). Arrivals are records less than 20 ms apart;
// the rate is the bytes of the arrivals from the first that starts after `skip` up to, not
// including, the last that starts within `window` of it, over the time between those two. A
// consumer that receives one record at a time (natscli's `consumer next`, whose records are
// paced a few ms apart) has no such arrivals, or, when a scheduling stall parted its records
// once, too few to span the window: it is measured per record.
func consumedPerSecond(got []received, skip, window time.Duration) float64 {
	var starts []int // index of each arrival's first record
	for i, r := range got {
		if i == 0 || r.at.Sub(got[i-1].at) > 20*time.Millisecond {
			starts = append(starts, i)
		}
	}
	if rate, ok := rateBetweenArrivals(got, starts, skip, window); ok {
		return rate
	}
	each := make([]int, len(got))
	for i := range each {
		each[i] = i
	}
	rate, _ := rateBetweenArrivals(got, each, skip, window)
	return rate
}

// rateBetweenArrivals measures as consumedPerSecond says, with these arrivals; false when none
// starts after skip, or none after that one within window.
func rateBetweenArrivals(got []received, starts []int, skip, window time.Duration) (float64, bool) {
	first, last := -1, -1
	for k, i := range starts {
		switch {
		case first < 0 && got[i].at.After(got[0].at.Add(skip)):
			first = k
		case first >= 0 && got[i].at.Sub(got[starts[first]].at) <= window:
			last = k
		}
	}
	if first < 0 || last < 0 {
		return 0, false
	}
	bytes := 0
	for _, r := range got[starts[first]:starts[last]] {
		bytes += r.bytes
	}
	return float64(bytes) / got[starts[last]].at.Sub(got[starts[first]].at).Seconds(), true
}

// consumers are the clients the read side is tested with: each reads a backlog in a consumer
// group and reports what it received when, and how often its group rebalanced.
var consumers = []struct {
	name       string
	partitions int
	consume    func(t *testing.T, topic, group, clientID string, n int, deadline time.Duration) ([]received, int)
}{
	{"java", 2, javaConsume},
	{"librdkafka", 1, librdkafkaConsume},
	{"franz-go", 1, franzConsume},
	{"sarama", 1, saramaConsume},
}

// A tenant limited to 256 KiB/s replays a 14-second backlog in a consumer group while an
// unlimited tenant (franz-go) replays the same backlog: the limited one receives at its limit
// (±5% over 10 s), every record once and in order, with no rebalance; the unlimited one reads at
// full speed meanwhile. The gateway counts what was delivered and how often it throttled, and
// the decision log has the throttled responses.
func TestKafkaConsumeLimit(t *testing.T) {
	defer awaitConsumeDecision(t, "consume-limited", "kafka", "throttle_time_ms raised")
	for _, c := range consumers {
		t.Run(c.name, func(t *testing.T) { consumeAtTheLimit(t, c.name, c.partitions, c.consume) })
	}
}

func consumeAtTheLimit(t *testing.T, name string, partitions int, consume func(*testing.T, string, string, string, int, time.Duration) ([]received, int)) {
	topic := "consume-" + name
	produceBacklog(t, topic, partitions, consumeRecords)
	limited := map[string]string{"protocol": "kafka", "tenant": "consume-limited"}
	consumed0 := metric(t, "weighstation_bytes_consumed", limited)
	throttled0 := metric(t, "weighstation_consume_throttled", limited)
	held0 := metric(t, "weighstation_consume_held_ms", limited)

	var wg sync.WaitGroup
	var free []received
	var freeTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Once the limited consumer has started: both read at once.
		time.Sleep(3 * time.Second)
		start := time.Now()
		free, _ = franzConsume(t, topic, "consume-free-"+name, "consume-free-"+name, consumeRecords, 30*time.Second)
		freeTook = time.Since(start)
	}()
	got, rebalances := consume(t, topic, "consume-limited-"+name, "consume-limited-"+name, consumeRecords, 60*time.Second)
	wg.Wait()
	if len(got) == 0 {
		t.Fatal("the limited consumer received nothing")
	}

	rate := consumedPerSecond(got, 2*time.Second, 10*time.Second)
	total := 0
	for _, r := range got {
		total += r.bytes
	}
	t.Logf("%s, limited: %d records in %s, %.0f B/s over 10 s (limit %d, %.1f%%), %d rebalances, %.0f fetches throttled or held, held %.0f ms in all; unlimited: %d records in %s",
		name, len(got), got[len(got)-1].at.Sub(got[0].at).Round(time.Millisecond), rate, consumeLimit, 100*rate/consumeLimit,
		rebalances, metric(t, "weighstation_consume_throttled", limited)-throttled0, metric(t, "weighstation_consume_held_ms", limited)-held0,
		len(free), freeTook.Round(time.Millisecond))
	checkExactlyOnceInOrder(t, "the limited consumer", got, consumeRecords)
	checkExactlyOnceInOrder(t, "the unlimited consumer", free, consumeRecords)
	if rate < 0.95*consumeLimit || rate > 1.05*consumeLimit {
		t.Errorf("the limited consumer received %.0f B/s over 10 s; its limit is %d (±5%%)", rate, consumeLimit)
	}
	if rebalances != 0 {
		t.Errorf("the limited consumer's group rebalanced %d times", rebalances)
	}
	// The whole backlog at the limit takes 14 s: the unlimited tenant is not held to it.
	if freeTook > 5*time.Second {
		t.Errorf("the unlimited consumer took %s for the backlog", freeTook)
	}
	// Charged: the record sets as sent, batch headers and record framing included; in a group
	// of two, also what the first member fetched of the partition the second then took (at
	// most a response, a burst and a batch, per partition).
	consumed := metric(t, "weighstation_bytes_consumed", limited) - consumed0
	dropped := 0.0
	if partitions > 1 {
		dropped = float64(partitions * (consumeBurst + consumeBatchBytes))
	}
	if consumed < float64(total) || consumed > 1.05*float64(total)+dropped {
		t.Errorf("weighstation_bytes_consumed grew by %.0f for %d bytes of keys and values received", consumed, total)
	}
	if metric(t, "weighstation_consume_throttled", limited)-throttled0 == 0 {
		t.Error("weighstation_consume_throttled did not count the throttled fetches")
	}
}

// An override narrows the consume limit for the topics it matches: consume-limited's consumers
// of consume-slow-* receive 128 KiB/s (±5% over 10 s) within the tenant's 256 KiB/s.
func TestKafkaConsumeLimitOfAnOverride(t *testing.T) {
	const limit, records = 128 << 10, 1664 // 13 s of the override's limit
	topic := "consume-slow-franz"
	produceBacklog(t, topic, 1, records)
	got, _ := franzConsume(t, topic, "consume-limited-slow", "consume-limited-slow", records, 60*time.Second)
	checkExactlyOnceInOrder(t, "the consumer", got, records)
	rate := consumedPerSecond(got, 2*time.Second, 10*time.Second)
	t.Logf("override: %d records, %.0f B/s over 10 s (limit %d, %.1f%%)", len(got), rate, limit, 100*rate/limit)
	if rate < 0.95*limit || rate > 1.05*limit {
		t.Errorf("received %.0f B/s over 10 s; the override's limit is %d (±5%%)", rate, limit)
	}
}

// A dryRun tenant's consumer is never throttled, held or clamped: it reads a backlog 56 times
// its 64 KiB/s at full speed, and the gateway counts the responses it would have throttled.
func TestKafkaConsumeLimitInDryRun(t *testing.T) {
	topic := "consume-dry-franz"
	produceBacklog(t, topic, 1, consumeRecords)
	dry := map[string]string{"protocol": "kafka", "tenant": "consume-dry"}
	would0 := metric(t, "weighstation_dryrun_consume_would_throttle", dry)
	throttled0 := metric(t, "weighstation_consume_throttled", dry)
	start := time.Now()
	got, _ := franzConsume(t, topic, "consume-dry", "consume-dry-1", consumeRecords, 30*time.Second)
	took := time.Since(start)
	checkExactlyOnceInOrder(t, "the dryRun consumer", got, consumeRecords)
	would := metric(t, "weighstation_dryrun_consume_would_throttle", dry) - would0
	t.Logf("dryRun: %d records in %s, %.0f responses would have been throttled", len(got), took.Round(time.Millisecond), would)
	if took > 5*time.Second {
		t.Errorf("the dryRun consumer took %s for a backlog it may read at full speed", took)
	}
	if would == 0 {
		t.Error("weighstation_dryrun_consume_would_throttle counted nothing")
	}
	if n := metric(t, "weighstation_consume_throttled", dry) - throttled0; n != 0 {
		t.Errorf("a dryRun tenant's fetches were throttled %.0f times", n)
	}
}
