package e2ekafkacluster

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzProducer is franz-go's idempotent producer (its default: acks=all, retries until
// delivered) producing open loop through the gateway's bootstrap listener, record n keyed "n"
// with value "<clientID>-<n>". kgo.AlwaysRetryEOF: behind the gateway a broker that is down
// shows as a connection closed before its first answer, which franz-go otherwise takes for a
// TLS or SASL mistake (kafka.md, "While the broker is down").
type franzProducer struct {
	cl   *kgo.Client
	done chan producerRun
}

func startFranzProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration) *franzProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstraps(), ",")...), kgo.ClientID(clientID), kgo.AlwaysRetryEOF(),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.ProducerBatchMaxBytes(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("franz-go: %v", err)
	}
	p := &franzProducer{cl: cl, done: make(chan producerRun, 1)}
	go func() {
		defer cl.Close()
		var mu sync.Mutex
		run := producerRun{sent: int(rate * d.Seconds())}
		errs := map[string]int{}
		var wg sync.WaitGroup
		start := time.Now()
		for n := 0; n < run.sent; n++ {
			if wait := time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			value := clientID + "-" + strconv.Itoa(n)
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(n)), Value: []byte(value)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					run.failed++
					errs[err.Error()]++
					return
				}
				run.acked++
				run.ackedValues = append(run.ackedValues, value)
			})
		}
		wg.Wait()
		var parts []string
		for e, n := range errs {
			parts = append(parts, fmt.Sprintf("%s:%d", e, n))
		}
		sort.Strings(parts)
		run.errors = strings.Join(parts, ",")
		p.done <- run
	}()
	return p
}

// wait waits for every record to be answered, at most `within`: then the client is closed,
// which fails the records still unanswered (counted as failed, and the test fails).
func (p *franzProducer) wait(t *testing.T, within time.Duration) producerRun {
	t.Helper()
	select {
	case run := <-p.done:
		return run
	case <-time.After(within):
		t.Errorf("franz-go: records still unanswered %v after the run", within)
		p.cl.Close()
		return <-p.done
	}
}

// groupConsumer reads a topic through the gateway in a consumer group, as users do (franz-go,
// cooperative-sticky, offsets committed as it goes), and keeps every record it was given with
// its partition and offset.
type groupConsumer struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	// read is every record delivered, in the order delivered, per partition.
	read map[int32][]consumed
	// rebalances counts assignments after the first, and revocations or losses.
	rebalances int
}

type consumed struct {
	offset int64
	value  string
}

func startGroupConsumer(t *testing.T, topic, group string) *groupConsumer {
	t.Helper()
	c := &groupConsumer{stop: make(chan struct{}), done: make(chan struct{}), read: map[int32][]consumed{}}
	assigned := 0
	rebalance := func(context.Context, *kgo.Client, map[string][]int32) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.rebalances++
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstraps(), ",")...), kgo.ClientID("cluster-limited-consumer"), kgo.AlwaysRetryEOF(),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if assigned++; assigned > 1 {
				rebalance(ctx, cl, m)
			}
		}),
		kgo.OnPartitionsRevoked(rebalance), kgo.OnPartitionsLost(rebalance))
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	go func() {
		defer close(c.done)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-c.stop; cancel() }()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				c.read[r.Partition] = append(c.read[r.Partition], consumed{r.Offset, string(r.Value)})
			})
			c.mu.Unlock()
		}
	}()
	return c
}

// total is how many distinct records (by value) the consumer has read.
func (c *groupConsumer) distinct() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, rs := range c.read {
		for _, r := range rs {
			out[r.value] = true
		}
	}
	return out
}

// check waits until the consumer has read every stored record, then stops it: it read each at
// least once, in offset order per partition; a record read again (after a rebalance or a
// reconnection, from the last committed offset) is counted, not an error.
func (c *groupConsumer) check(t *testing.T, s stored) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		read := c.distinct()
		missing := 0
		for v := range s.count {
			if !read[v] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the group consumer has not read %d of %d stored records", missing, len(s.count))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(c.stop)
	<-c.done
	c.cl.Close()
	rereads := 0
	for p, rs := range c.read {
		prev := int64(-1)
		for _, r := range rs {
			if r.offset > prev+1 {
				t.Errorf("partition %d: offset %d delivered after %d: records skipped, out of order", p, r.offset, prev)
			}
			if r.offset <= prev {
				rereads++ // delivered again from an earlier offset: resumed from the last commit
			}
			prev = r.offset
		}
	}
	t.Logf("the group consumer read every stored record in order; %d read again, after %d rebalances", rereads, c.rebalances)
	if rereads > 0 && c.rebalances == 0 {
		t.Errorf("%d records read again without a rebalance", rereads)
	}
}
