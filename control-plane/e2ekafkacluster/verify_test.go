package e2ekafkacluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// tenantLimits are the rates of the runs' tenants (testdata/tenants.yaml), records per second.
var tenantLimits = map[string]float64{"cluster-limited": 300, "cluster-delayed": 100}

// directClient is the test's baseline view of the cluster: every broker's DIRECT listener as
// the stack's baseline user, never through the gateway (a connection the socket watch allows).
func directClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	seeds := make([]string, stack.KafkaBrokerCount())
	for i := range seeds {
		seeds[i] = stack.KafkaBrokerDirectAddr(i)
	}
	cl, err := kgo.NewClient(append(append(localstack.DirectKafka(seeds[0]), kgo.SeedBrokers(seeds...)), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic of 6 partitions, replicated three ways with two in sync, whose
// records carry the time the leader appended them (the admitted rate is measured from those).
func createTopic(t *testing.T, name string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, 6, 3
	for k, v := range map[string]string{"min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		topic.Configs = append(topic.Configs, c)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, directClient(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
}

// stored is a topic's content read directly: how often each value is stored, and where each
// copy is (partition, offset, the producer id and epoch of its batch), to tell how a duplicate
// came about.
type stored struct {
	count map[string]int
	where map[string][]string
	// appended is when the broker appended each value first (the topics use LogAppendTime).
	appended map[string]time.Time
}

func newStored() stored {
	return stored{count: map[string]int{}, where: map[string][]string{}, appended: map[string]time.Time{}}
}

func (s stored) add(r *kgo.Record) {
	v := string(r.Value)
	if s.count[v] == 0 {
		s.appended[v] = r.Timestamp
	}
	s.count[v]++
	s.where[v] = append(s.where[v], fmt.Sprintf("p%d@%d pid %d epoch %d at %s", r.Partition, r.Offset, r.ProducerID,
		r.ProducerEpoch, r.Timestamp.Format("15:04:05.000")))
}

// readCommitted reads what a read_committed consumer of topic is given, until 3 s pass with
// nothing more (the transactions are all over by then: their markers end each partition, so
// the last offsets are never delivered and cannot tell the end).
func readCommitted(t *testing.T, topic string) stored {
	t.Helper()
	cl := directClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	s := newStored()
	deadline := time.Now().Add(90 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			s.add(r)
			n++
		})
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return s
}

// checkTransactions: a read_committed consumer is given every committed record once and none
// of an aborted transaction.
func checkTransactions(t *testing.T, run producerRun, s stored, prefix string) {
	t.Helper()
	checkDelivery(t, run, s, prefix)
	leaked := 0
	for _, v := range run.abortedValues {
		leaked += s.count[v]
	}
	t.Logf("%s: %d records of aborted transactions, none given to a read_committed consumer: %v", prefix, len(run.abortedValues), leaked == 0)
	if leaked > 0 {
		t.Errorf("%s: %d records of aborted transactions read by a read_committed consumer", prefix, leaked)
	}
}

// readTopic reads every record of topic up to each partition's end as it is now.
func readTopic(t *testing.T, topic string) stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ends := endOffsets(ctx, t, topic)
	cl := directClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	s := newStored()
	read := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if read[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: read %v of %v", topic, read, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				s.add(r)
			}
			read[r.Partition] = max(read[r.Partition], r.Offset+1)
		})
	}
	return s
}

// endOffsets is each partition's high watermark.
func endOffsets(ctx context.Context, t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(6) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, directClient(t))
		if err == nil {
			ends := map[int32]int64{}
			for _, p := range resp.Topics[0].Partitions {
				if kerr.ErrorForCode(p.ErrorCode) == nil {
					ends[p.Partition] = p.Offset
				}
			}
			if len(ends) == 6 {
				return ends
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkDelivery: every record the client saw acknowledged is stored once; none is stored twice
// (an idempotent producer's retry never duplicates); every record is answered. None fails: Java
// and franz-go retry everything the gateway and brokers answer; librdkafka reports the
// gateway's refusals (docs/kafka.md "Retries"), and a record reported refused is never stored.
func checkDelivery(t *testing.T, run producerRun, s stored, prefix string) {
	t.Helper()
	lost, duplicated, unacked := 0, 0, 0
	acked := map[string]bool{}
	for _, v := range run.ackedValues {
		acked[v] = true
		if s.count[v] == 0 {
			lost++
		}
	}
	for v, n := range s.count {
		if !strings.HasPrefix(v, prefix) {
			continue
		}
		if n > 1 {
			if duplicated == 0 {
				t.Logf("%s stored %d times: %s", v, n, strings.Join(s.where[v], ", "))
			}
			duplicated += n - 1
		}
		if !acked[v] {
			unacked++
		}
	}
	refusedStored := 0
	for _, v := range run.refused {
		refusedStored += s.count[v]
	}
	t.Logf("%s: sent %d, acknowledged %d, refused %d (stored: %d), failed %d (%s); stored %d of them; lost %d, duplicated %d",
		prefix, run.sent, run.acked, len(run.refused), refusedStored, run.failed, run.errors, len(run.ackedValues)-lost, lost, duplicated)
	if lost > 0 || duplicated > 0 {
		t.Errorf("%s: %d acknowledged records lost, %d duplicated", prefix, lost, duplicated)
	}
	unreported := run.sent - run.acked - len(run.refused) - run.failed
	if lost > 0 || duplicated > 0 || run.failed > 0 || unacked > 0 || unreported != 0 {
		t.Logf("the client's log:\n%s", run.log)
	}
	if refusedStored > 0 {
		t.Errorf("%s: %d records reported refused to the client were stored", prefix, refusedStored)
	}
	if run.failed > 0 || unreported != 0 {
		t.Errorf("%s: %d of %d records failed or went unreported (%d acknowledged): %s", prefix, run.sent-run.acked, run.sent, run.acked, run.errors)
	}
	if unacked > 0 {
		t.Errorf("%s: %d records stored that the client did not see acknowledged", prefix, unacked)
	}
}

// fault is when an event ran, from its start to its end.
type fault struct{ from, to time.Time }

// admittedPerSecond is the tenant's Kafka records the gateway admitted each second from `from`
// to `to`, as its filters reported them (the control plane's /usage/history, what
// `weighstation usage export --resolution 1s` reads). This is the admitted rate as the gateway
// decided it: the brokers' append times would move a batch admitted before a fault to when
// the broker, slow to take it, appended it; what the gateway counts is checked against what
// the brokers stored (rideThrough).
func admittedPerSecond(t *testing.T, from, to time.Time) map[string][]float64 {
	t.Helper()
	// Reports come every second and are spread over the seconds they cover: wait for the last.
	time.Sleep(2500 * time.Millisecond)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/usage/history?since=15m&format=json&resolution=1s", ports.ControlPlane))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	perSecond := map[string]map[int64]float64{}
	dec := json.NewDecoder(resp.Body)
	for {
		var b struct {
			Start    time.Time `json:"start"`
			Protocol string    `json:"protocol"`
			Tenant   string    `json:"tenant"`
			Messages float64   `json:"messages"`
		}
		if err := dec.Decode(&b); err != nil {
			break
		}
		if _, limited := tenantLimits[b.Tenant]; b.Protocol == "kafka" && limited {
			if perSecond[b.Tenant] == nil {
				perSecond[b.Tenant] = map[int64]float64{}
			}
			perSecond[b.Tenant][b.Start.Unix()] += b.Messages
		}
	}
	out := map[string][]float64{}
	for tenant := range tenantLimits {
		for sec := from.Unix(); sec < to.Unix(); sec++ {
			out[tenant] = append(out[tenant], perSecond[tenant][sec])
		}
	}
	return out
}

// oneRequest bounds the records of one Produce request of the run's producers: the gateway
// decides a request whole, and one that finds the bucket full is admitted and leaves it in
// debt (kafka.md, "rate, inFlight and the queue"). A producer that was held up by a fault sends
// full batches: 1 KiB (the producers' batch size here) of ~55-byte records, for each of the
// three partitions one surviving broker of three leads. With the clients' default 16 KiB, one
// request is 900 records, three seconds of this tenant's limit: a window after a fault then
// measured 350 records/s, the one before it 251.
const oneRequest = 3 * 1024 / 55

// checkRate: the tenant's admitted records are within its limit ± 5% (and one request more
// above) in every whole 10 s window of the run without a fault, while the producers offer load (until offeredUntil); after
// it only their backlog is left, which runs out at different times for each, so only the upper
// bound is judged (measured: franz-go's backlog ran out 6 s after the schedule, Java's 15 s:
// 185 records/s admitted in the window between). The windows with a fault (one that overlaps an event, or
// begins within 2 s of its end: clients are still reconnecting then), with the window after
// them (where the debt is paid), are judged as one span for their upper bound: limit + 5%, and
// one request more. A batch held up by the fault is admitted whole into debt, and a batch
// refused during it has its rate set aside for the time it could be admitted, its retry
// admitted up to 3 s later without paying again (retries.rs): admissions move across window
// edges without the limit being exceeded over the span (measured: 341 and 312 records/s in the
// two windows of a broker restart, 299 in the next).
func checkRate(t *testing.T, tenant string, perSecond []float64, faults []fault, start, offeredUntil time.Time) {
	t.Helper()
	limit := tenantLimits[tenant]
	const window = 10
	var spanSum float64
	spanWindows := 0
	endSpan := func(next float64) {
		if spanWindows == 0 {
			return
		}
		seconds := float64((spanWindows + 1) * window)
		allowed := limit*1.05*seconds + oneRequest
		t.Logf("%s: windows with a fault and the next: %.0f records admitted, %.0f allowed", tenant, spanSum+next, allowed)
		if spanSum+next > allowed {
			t.Errorf("%s: %d windows with a fault and the next: %.0f records admitted, over the limit %.0f + 5%% and one request (%.0f)", tenant, spanWindows, spanSum+next, limit, allowed)
		}
		spanSum, spanWindows = 0, 0
	}
	whole := len(perSecond) / window
	for i := 0; i < whole; i++ {
		var sum float64
		for _, n := range perSecond[i*window : (i+1)*window] {
			sum += n
		}
		rate := sum / window
		from := start.Add(time.Duration(i*window) * time.Second)
		faulty := false
		for _, f := range faults {
			faulty = faulty || (f.from.Before(from.Add(window*time.Second)) && f.to.Add(2*time.Second).After(from))
		}
		t.Logf("%s: window %d: %.0f records/s admitted (fault: %v)", tenant, i, rate, faulty)
		if faulty {
			spanSum += sum
			spanWindows++
			continue
		}
		if spanWindows > 0 {
			endSpan(sum)
			continue
		}
		// A request is admitted whole, into debt, and paid for in the next window (oneRequest):
		// the upper bound has one request more, as a span's (measured: 317 records/s in a
		// window without a fault, 3170 admitted against 3150 without it).
		offering := !from.Add(window * time.Second).After(offeredUntil)
		if sum > limit*1.05*window+oneRequest || (rate < limit*0.95 && offering) {
			t.Errorf("%s: window %d without a fault: %.0f records/s admitted, not within the limit %.0f ± 5%% (and one request more)", tenant, i, rate, limit)
		}
	}
	endSpan(0)
}

// clientListenerPorts are the listeners of every broker that clients use (GATEWAY, SASL, SSL,
// SASL_SSL), a broker added later included. DIRECT is the brokers' own (replication) and the
// baseline's.
func clientListenerPorts() []int {
	var out []int
	for i := range stack.KafkaBrokerCount() {
		out = append(out, ports.KafkaUpstream+i, ports.KafkaSASLUp+i, ports.KafkaSSLUp+i, ports.KafkaSASLSSLUp+i)
	}
	return out
}

// logStoredPerWindow says, when a rate check failed, how many records of each producer the
// brokers appended in each 10 s window from start: which client fell behind, or got ahead.
func logStoredPerWindow(t *testing.T, s stored, producers []string, start time.Time) {
	t.Helper()
	perWindow := map[string]map[int]int{}
	last := 0
	for v, at := range s.appended {
		for _, p := range producers {
			if strings.HasPrefix(v, p+"-") {
				w := int(at.Sub(start) / (10 * time.Second))
				if perWindow[p] == nil {
					perWindow[p] = map[int]int{}
				}
				perWindow[p][w]++
				last = max(last, w)
			}
		}
	}
	for _, p := range producers {
		var parts []string
		for w := 0; w <= last; w++ {
			parts = append(parts, fmt.Sprintf("%d", perWindow[p][w]/10))
		}
		t.Logf("%s: appended per second in each window: %s", p, strings.Join(parts, " "))
	}
}
