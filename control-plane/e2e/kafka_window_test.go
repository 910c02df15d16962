package e2e

import (
	"context"
	"encoding/binary"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// storedBatch is one record batch as the broker stored it: its records, and when the broker
// appended it (the topic's timestamps are LogAppendTime).
type storedBatch struct {
	records  int
	appended time.Time
}

// createLogAppendTopic creates a one-partition topic whose records carry the broker's append
// time, directly on the broker.
func createLogAppendTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "message.timestamp.type", kmsg.StringPtr("LogAppendTime")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating %s: %v %+v", topic, err, resp)
	}
}

// storedBatches reads partition 0 of topic from the broker, batch by batch (Fetch, no client
// library reassembling records), up to its end.
func storedBatches(t *testing.T, cl *kgo.Client, topic string) []storedBatch {
	t.Helper()
	var out []storedBatch
	offset := int64(0)
	for range 1000 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 100, 8<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset, fp.PartitionMaxBytes = offset, 8<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetching %s at %d: error %d", topic, offset, p.ErrorCode)
		}
		raw := p.RecordBatches
		read := 0
		for len(raw) >= 61 {
			size := int(binary.BigEndian.Uint32(raw[8:])) + 12
			if size > len(raw) {
				break
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(raw[:size]); err != nil {
				t.Fatal(err)
			}
			if b.FirstOffset+int64(b.LastOffsetDelta) >= offset {
				out = append(out, storedBatch{records: int(b.NumRecords), appended: time.UnixMilli(b.MaxTimestamp)})
				offset = b.FirstOffset + int64(b.LastOffsetDelta) + 1
				read++
			}
			raw = raw[size:]
		}
		if offset >= p.HighWatermark || read == 0 {
			return out
		}
	}
	return out
}

// The 1-second window bound, as docs/policy-reference.md states it: in any window of length T a
// tenant is admitted at most rate × T + max(burst, its largest batch). librdkafka at full speed
// with its default batching (batch.size 1,000,000, batch.num.messages 10,000) packs 50-byte
// records into batches larger than the burst; each is admitted once the bucket is full and
// leaves it in debt. Measured at the broker (append times of the stored batches), not by the
// filter.
func TestKafkaWindowBoundWithLibrdkafkaDefaultBatching(t *testing.T) {
	const tenant, rate, burst = "window-bound", 2000.0, 2000
	topic := strings.ReplaceAll(uniqueSubject("window-bound"), ".", "-")
	// Fetch by topic name: versions up to Kafka 3.0's (Fetch v12; v13 names topics by id).
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createLogAppendTopic(t, cl, topic)
	conf := map[string]string{"batch.size": "1000000"}
	// As fast as it can, as kcat producing a file: the 20,000 records are due within 2 ms.
	run := librdkafkaProducerWith(t, addr(ports.Kafka), conf, topic, tenant+"-p", 1e7, 2*time.Millisecond, 50)
	batches := storedBatches(t, cl, topic)
	stored, largest := 0, 0
	for _, b := range batches {
		stored += b.records
		largest = max(largest, b.records)
	}
	sort.Slice(batches, func(i, j int) bool { return batches[i].appended.Before(batches[j].appended) })
	// The busiest second: every window starting at a batch's append time (the maximum is met
	// at one of them).
	busiest, at := 0, time.Time{}
	for i, first := range batches {
		n := 0
		for _, b := range batches[i:] {
			if b.appended.Sub(first.appended) >= time.Second {
				break
			}
			n += b.records
		}
		if n > busiest {
			busiest, at = n, first.appended
		}
	}
	bound := rate*1 + float64(max(burst, largest))
	t.Logf("librdkafka 20,000 x 50 B at full speed: acked %d, failed %d (%s); stored %d in %d batches, the largest %d records; busiest second %d records (from %s), bound rate + max(burst, largest batch) = %.0f; rate + burst alone = %.0f",
		run.acked, run.failed, orNone(run.errors), stored, len(batches), largest, busiest, at.Format("15:04:05.000"), bound, rate+burst)
	if stored != run.acked {
		t.Fatalf("the topic holds %d records, the client acknowledged %d", stored, run.acked)
	}
	if float64(busiest) > bound {
		t.Fatalf("%d records stored within one second, over the bound %.0f", busiest, bound)
	}
	if run.failed == 0 {
		t.Fatal("nothing was refused: the load never met the limit")
	}
}
