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
// with value "<clientID>-<n>", set up as docs/kafka.md tells franz-go users to:
// kgo.AlwaysRetryEOF, since behind the gateway a broker that is down shows as a connection
// closed before its first answer, which franz-go otherwise takes for a TLS or SASL mistake
// ("While the broker is down"); kgo.MetadataMinAge 250 ms, since franz-go retries a refused
// batch only after a metadata refresh, by default at most every 5 s ("Retries").
type franzProducer struct {
	cl   *kgo.Client
	done chan producerRun
}

func startFranzProducer(t *testing.T, topic, clientID string, rate float64, d time.Duration) *franzProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(producerBootstrap()), kgo.ClientID(clientID), kgo.AlwaysRetryEOF(),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.ProducerBatchMaxBytes(1024),
		kgo.MetadataMinAge(250*time.Millisecond))
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
