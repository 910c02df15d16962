package e2e

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// pipelined sends n single-record Produce v7 requests (acks=all) on each of conns connections at
// once, up to maxOpen awaiting their response per connection (sarama's Broker.AsyncProduce, as
// its producer pipelines), and counts the outcomes. sarama checks every response's correlation
// id against the oldest request awaiting one: a response out of order is a protocol error.
func pipelined(t *testing.T, clientID, topic string, conns, n, maxOpen int) (acked, refused int, failures []error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	for c := 0; c < conns; c++ {
		cfg := kafkaConfig(clientID)
		cfg.Net.MaxOpenRequests = maxOpen
		b := sarama.NewBroker(addr(ports.Kafka))
		if err := b.Open(cfg); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				req := &sarama.ProduceRequest{RequiredAcks: sarama.WaitForAll, Timeout: 10000, Version: 7}
				req.AddBatch(topic, 0, &sarama.RecordBatch{Version: 2, FirstTimestamp: time.Now(), MaxTimestamp: time.Now(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
					Records: []*sarama.Record{{Value: []byte(strconv.Itoa(c) + "-" + strconv.Itoa(i))}}})
				wg.Add(1)
				err := b.AsyncProduce(req, func(resp *sarama.ProduceResponse, err error) {
					defer wg.Done()
					if err != nil {
						fail(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					switch blk := resp.GetBlock(topic, 0); {
					case blk == nil:
						failures = append(failures, errors.New("a response without the partition's answer"))
					case blk.Err == sarama.ErrNoError:
						acked++
					case blk.Err == sarama.ErrThrottlingQuotaExceeded:
						refused++
					default:
						failures = append(failures, blk.Err)
					}
				})
				if err != nil {
					wg.Done()
					fail(err)
				}
			}
		}()
	}
	wg.Wait()
	return acked, refused, failures
}

// Kafka answers a connection's requests strictly in order, and pipelining clients depend on it.
// Four connections each pipelining 750 requests, ten at a time, through a tenant that holds them
// (delay: over its rate and inFlight) or refuses them (reject): every response arrives in order,
// every request is answered, and the topic holds exactly the acknowledged records. (Before the
// fix, ~2,200 of 3,000 delay-mode requests failed with "correlation ID didn't match" and records
// were stored that the client was told nothing about.)
func TestKafkaPipelinedResponsesStayInOrder(t *testing.T) {
	const conns, perConn = 4, 750
	for _, mode := range []string{"delay", "reject"} {
		t.Run(mode, func(t *testing.T) {
			tenant := "kafka-pipe-" + mode
			topic := strings.ReplaceAll(uniqueSubject(tenant), ".", "-")
			produceEach(t, "acme-create", topic, 1, 1)
			refusedBefore := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant))
			acked, refused, failures := pipelined(t, tenant+"-p", topic, conns, perConn, 10)
			stored := len(topicRecords(t, topic)) - 1
			t.Logf("%s: %d requests, acked %d, refused %d, stored %d; failures %d", mode, conns*perConn, acked, refused, stored, len(failures))
			if len(failures) > 0 {
				t.Fatalf("%d requests failed, the first: %v", len(failures), failures[0])
			}
			if acked+refused != conns*perConn || stored != acked {
				t.Fatalf("sent %d: acked %d + refused %d, stored %d", conns*perConn, acked, refused, stored)
			}
			counted := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant)) - refusedBefore
			if int(counted) != refused {
				t.Fatalf("%d refusals reported to the client, %v counted", refused, counted)
			}
			if mode == "reject" && refused == 0 {
				t.Fatal("nothing was refused at 4 × 10 pipelined requests against inFlight 5")
			}
		})
	}
}
