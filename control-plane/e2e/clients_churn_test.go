package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// churnPool is tenant churn's clients.pool (testdata/tenants.yaml).
const churnPool = 200

// produceAs is a Produce request (v3, acks=1) of one record to partition 0 of topic, with its
// own client.id in the request header.
func produceAs(clientID string, corr int32, topic string) []byte {
	record := []byte{0}
	record = binary.AppendVarint(record, 0)
	record = binary.AppendVarint(record, 0)
	record = binary.AppendVarint(record, -1)
	record = binary.AppendVarint(record, int64(len(clientID)))
	record = append(record, clientID...)
	record = binary.AppendVarint(record, 0)
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		FirstTimestamp: now, MaxTimestamp: now, Records: append(binary.AppendVarint(nil, int64(len(record))), record...)}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 3, 1, 5000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = raw
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.Partitions = topic, []kmsg.ProduceRequestTopicPartition{part}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	body := req.AppendTo(nil)
	f := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(clientID)+len(body)))
	f = binary.BigEndian.AppendUint16(f, 0)
	f = binary.BigEndian.AppendUint16(f, 3)
	f = binary.BigEndian.AppendUint32(f, uint32(corr))
	f = binary.BigEndian.AppendUint16(f, uint16(len(clientID)))
	return append(append(f, clientID...), body...)
}

// produceOutcome reads a Produce v3 response of one partition: "ok", or what went wrong.
func produceOutcome(frame []byte) string {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 3
	if len(frame) < 4 {
		return "a short frame"
	}
	if err := resp.ReadFrom(frame[4:]); err != nil {
		return "unreadable: " + err.Error()
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Sprintf("%d topics (want 1 of 1 partition)", len(resp.Topics))
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		return fmt.Sprintf("error code %d", code)
	}
	return "ok"
}

// envoyRSS is the gateway's resident memory (bytes), from /proc.
func envoyRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", stack.Envoy.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// 100,000 distinct client.ids in about a minute, one per request over four pinned connections,
// against one tenant whose clients are limited: every record is stored (the tenant and each
// client are far under their limits), the Envoy's resident memory grows by less than 64 MiB, and
// the filter's shared data gains no more entries than the pool's slots (two each: a bucket and
// its owner) and the overflow bucket.
func TestKafkaClientIDChurnKeepsMemoryBounded(t *testing.T) {
	const clients, conns, window, maxOutstanding = 100000, 4, 60 * time.Second, 200
	topic := fmt.Sprintf("churn-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(append(localstack.DirectKafka(addr(ports.KafkaDirect)), kgo.MaxVersions(kversion.V3_0_0()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createLogAppendTopic(t, cl, topic)

	// send writes a Produce per client id; correlation ids go on from first, never reused on a
	// connection (a Kafka client's never are while a request is in flight).
	send := func(c net.Conn, first int, ids []string) {
		for i, id := range ids {
			if _, err := c.Write(produceAs(id, int32(first+i), topic)); err != nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	}
	// A request first, until the broker stores it (the new topic known to it), so the tenant's
	// own state is in shared data before the count starts.
	warmed := 0
	eventually(t, 20*time.Second, "a first record stored through the gateway", func() bool {
		warm, err := net.Dial("tcp", addr(ports.Kafka))
		if err != nil {
			t.Fatal(err)
		}
		defer warm.Close()
		send(warm, 0, []string{"churn-warm"})
		warmed++
		frame, err := readKafkaFrame(bufio.NewReader(warm))
		return err == nil && produceOutcome(frame) == "ok"
	})
	keys0 := metric(t, "weighstation_shared_data_keys", nil)
	overflow0 := metric(t, "weighstation_client_pool_overflow", kafkaLabels("churn"))
	rss0 := envoyRSS(t)

	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	perConn := clients / conns
	for c := range conns {
		conn, err := net.Dial("tcp", addr(ports.Kafka))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * window))
		ids := make([]string, perConn)
		for i := range ids {
			ids[i] = fmt.Sprintf("churn-%d-%d", c, i)
		}
		// Requests awaiting their answer, at most maxOutstanding on the connection: the tenant's
		// inFlight (1,000, the default) is shared by the four, and a client pipelines only so far.
		outstanding := make(chan struct{}, maxOutstanding)
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Paced to spread the clients over the window: a batch of 50 every 50/rate s.
			rate := float64(perConn) / window.Seconds()
			for i := 0; i < len(ids); i += 50 {
				time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				batch := ids[i:min(i+50, len(ids))]
				for range batch {
					outstanding <- struct{}{}
				}
				send(conn, i, batch)
			}
		}()
		go func() {
			defer wg.Done()
			r := bufio.NewReader(conn)
			for range perConn {
				frame, err := readKafkaFrame(r)
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				if outcome := produceOutcome(frame); outcome != "ok" {
					if failed.Add(1) <= 3 {
						t.Logf("a Produce answered %s", outcome)
					}
				}
				answered.Add(1)
				<-outstanding
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(time.Second) // the workers' metrics flush
	rss := envoyRSS(t)
	keys := metric(t, "weighstation_shared_data_keys", nil) - keys0
	overflow := metric(t, "weighstation_client_pool_overflow", kafkaLabels("churn")) - overflow0
	t.Logf("%d client.ids in %s: %d answered, %d refused or failed; Envoy RSS %d → %d MiB (%+.1f MiB); shared data +%.0f keys (pool %d); overflow %.0f",
		clients, elapsed.Round(time.Millisecond), answered.Load(), failed.Load(), rss0>>20, rss>>20, float64(rss-rss0)/(1<<20), keys, churnPool, overflow)
	if answered.Load() != clients || failed.Load() != 0 {
		// What the gateway says it refused, by limit and detail.
		refusals := map[string]int{}
		for _, d := range decisionsFor(t, "churn", "kafka") {
			refusals[d.Limit+": "+d.Detail]++
		}
		t.Logf("the decision log for tenant churn: %v", refusals)
		t.Errorf("answered %d of %d, %d refused or failed: a tenant and clients under their limits are never refused", answered.Load(), clients, failed.Load())
	}
	if rss-rss0 >= 64<<20 {
		t.Errorf("Envoy RSS grew by %.1f MiB under client.id churn: want less than 64 MiB", float64(rss-rss0)/(1<<20))
	}
	if keys > 2*churnPool+1 {
		t.Errorf("shared data gained %.0f keys: want at most the pool's %d slots × 2 and the overflow bucket", keys, churnPool)
	}
	// And the warm-up's: stored once at least (an earlier try may have been stored unanswered).
	if stored := len(topicRecords(t, topic)); stored < clients+1 || stored > clients+warmed {
		t.Errorf("stored %d records: want %d and the warm-up's", stored, clients)
	}
}
