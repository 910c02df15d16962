package e2e

import (
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// pacedProduce sends single-record requests at a fixed rate (open loop) over conns raw broker
// connections, acks as given, for d. It returns sent, acknowledged and refused (89) counts.
func pacedProduce(t *testing.T, clientID, topic string, rate float64, conns int, d time.Duration, acks sarama.RequiredAcks) (int, int, int) {
	sent, acked, refused, _ := pacedProduceSpan(t, clientID, topic, rate, conns, d, acks)
	return sent, acked, refused
}

// pacedProduceSpan is pacedProduce that also returns the time from the first request to the last
// response: a client that cannot keep its schedule spreads the load over a longer span.
func pacedProduceSpan(t *testing.T, clientID, topic string, rate float64, conns int, d time.Duration, acks sarama.RequiredAcks) (int, int, int, time.Duration) {
	t.Helper()
	return pacedProduceVia(t, addr(ports.Kafka), clientID, topic, rate, conns, d, acks)
}

// pacedProduceVia is pacedProduceSpan through the gateway listener at via.
func pacedProduceVia(t *testing.T, via, clientID, topic string, rate float64, conns int, d time.Duration, acks sarama.RequiredAcks) (int, int, int, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var sent, acked, refused int
	var wg sync.WaitGroup
	perConn := rate / float64(conns)
	began := time.Now()
	for c := 0; c < conns; c++ {
		b := sarama.NewBroker(via)
		if err := b.Open(kafkaConfig(clientID + "-" + strconv.Itoa(c))); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		wg.Add(1)
		go func(c int, b *sarama.Broker) {
			defer wg.Done()
			// In flight per connection: an open-loop schedule over a request/response protocol.
			var inner sync.WaitGroup
			onSchedule(perConn, d, func(n int) bool {
				req := &sarama.ProduceRequest{RequiredAcks: acks, Timeout: 10000, Version: 7}
				req.AddBatch(topic, 0, &sarama.RecordBatch{Version: 2, FirstTimestamp: time.Now(), MaxTimestamp: time.Now(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
					Records: []*sarama.Record{{Value: []byte(strconv.Itoa(c) + "-" + strconv.Itoa(n))}}})
				mu.Lock()
				sent++
				mu.Unlock()
				inner.Add(1)
				go func() {
					defer inner.Done()
					resp, err := b.Produce(req)
					mu.Lock()
					defer mu.Unlock()
					if acks == sarama.NoResponse {
						return
					}
					switch {
					case err != nil:
						t.Errorf("produce: %v", err)
					case resp.GetBlock(topic, 0).Err == sarama.ErrNoError:
						acked++
					case errors.Is(resp.GetBlock(topic, 0).Err, sarama.ErrThrottlingQuotaExceeded):
						refused++
					default:
						t.Errorf("produce: %v", resp.GetBlock(topic, 0).Err)
					}
				}()
				return true
			})
			inner.Wait()
		}(c, b)
	}
	wg.Wait()
	return sent, acked, refused, time.Since(began)
}

func TestKafkaRateAccuracyAcrossWorkers(t *testing.T) {
	const limit, burst = 100.0, 10.0
	const window = 5 * time.Second
	for _, overload := range []float64{2, 10} {
		t.Run(strconv.Itoa(int(overload))+"x", func(t *testing.T) {
			topic := strings.ReplaceAll(uniqueSubject("kafka-accuracy"), ".", "-")
			produceEach(t, "acme-create", topic, 1, 1)
			time.Sleep(200 * time.Millisecond)
			sent, acked, refused, span := pacedProduceSpan(t, "kafka-accuracy-"+strconv.Itoa(int(overload)), topic, limit*overload, 4, window, sarama.WaitForAll)
			stored := len(topicRecords(t, topic)) - 1
			expected := limit*span.Seconds() + burst
			dev := (float64(acked) - expected) / expected
			t.Logf("kafka %.0fx overload: sent %d over %s, acked %d (%.1f records/s), refused %d, stored %d; expected %.0f: %+.2f%%",
				overload, sent, span.Round(time.Millisecond), acked, float64(acked-int(burst))/span.Seconds(), refused, stored, expected, dev*100)
			if acked+refused != sent || stored != acked {
				t.Fatalf("conservation: sent %d, acked %d, refused %d, stored %d", sent, acked, refused, stored)
			}
			if math.Abs(dev) > 0.05 {
				t.Fatalf("acked %d, outside ±5%% of %.0f", acked, expected)
			}
		})
	}
}

func TestKafkaNoisyNeighbourIsolation(t *testing.T) {
	quiet := strings.ReplaceAll(uniqueSubject("kafka-quiet"), ".", "-")
	noisy := strings.ReplaceAll(uniqueSubject("kafka-noisy"), ".", "-")
	produceEach(t, "acme-create", quiet, 1, 1)
	produceEach(t, "acme-create", noisy, 1, 1)
	var wg sync.WaitGroup
	var qs, qa, qr, ns, na, nr int
	wg.Add(2)
	go func() {
		defer wg.Done()
		qs, qa, qr = pacedProduce(t, "kafka-quiet-a", quiet, 50, 2, 3*time.Second, sarama.WaitForAll)
	}()
	go func() {
		defer wg.Done()
		ns, na, nr = pacedProduce(t, "kafka-accuracy-noisy", noisy, 1000, 2, 3*time.Second, sarama.WaitForAll)
	}()
	wg.Wait()
	t.Logf("quiet: sent %d acked %d refused %d; noisy at 10x: sent %d acked %d refused %d", qs, qa, qr, ns, na, nr)
	if qa != qs || qr != 0 {
		t.Fatalf("the quiet tenant lost records to the noisy one: sent %d, acked %d, refused %d", qs, qa, qr)
	}
	if nr == 0 {
		t.Fatal("the noisy tenant was not limited")
	}
}

// acks=0 has no response to carry a refusal: the refused records are not stored and are counted.
// The filter's counters settle once every record is decided (accepted + refused = sent); the
// topic must then hold exactly the accepted ones.
func TestKafkaFireAndForgetRefusalsAreCounted(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("kafka-acks0"), ".", "-")
	produceEach(t, "acme-create", topic, 1, 1)
	refusedLabels := map[string]string{"protocol": "kafka", "tenant": "kafka-quiet", "reason": "rate"}
	refusedBefore := metric(t, "weighstation_messages_refused", refusedLabels)
	acceptedBefore := metric(t, "weighstation_messages_accepted", kafkaLabels("kafka-quiet"))
	sent, _, _ := pacedProduce(t, "kafka-quiet-acks0", topic, 500, 1, time.Second, sarama.NoResponse)
	var accepted, refused int
	eventually(t, 10*time.Second, "every record decided", func() bool {
		refused = int(metric(t, "weighstation_messages_refused", refusedLabels) - refusedBefore)
		accepted = int(metric(t, "weighstation_messages_accepted", kafkaLabels("kafka-quiet")) - acceptedBefore)
		return accepted+refused >= sent
	})
	var stored int
	eventually(t, 10*time.Second, "the accepted records are stored", func() bool {
		stored = len(topicRecords(t, topic)) - 1
		return stored >= accepted
	})
	t.Logf("acks=0: sent %d, accepted %d and stored %d, refused and counted %d", sent, accepted, stored, refused)
	if accepted+refused != sent || stored != accepted || refused == 0 {
		t.Fatalf("sent %d: accepted %d + refused %d, stored %d", sent, accepted, refused, stored)
	}
}

// The tenant's fifth concurrent connection is closed, as a broker closes what it will not serve,
// and counted as refused for its connection limit; once one of the four closes, a new one is
// served.
func TestKafkaConnectionLimit(t *testing.T) {
	labels := map[string]string{"protocol": "kafka", "tenant": "kafka-accuracy", "reason": "connections"}
	refusedBefore := metric(t, "weighstation_messages_refused", labels)
	open := func() (*sarama.Broker, error) {
		b := sarama.NewBroker(addr(ports.Kafka))
		if err := b.Open(kafkaConfig("kafka-accuracy-conn")); err != nil {
			return nil, err
		}
		if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil {
			return b, err
		}
		// A claimed client.id attributes from the first request after the handshake
		// (ApiVersions, SASL): before it, the connection is the default tenant's.
		_, err := b.GetMetadata(&sarama.MetadataRequest{})
		return b, err
	}
	var served []*sarama.Broker
	defer func() {
		for _, b := range served {
			b.Close()
		}
	}()
	for i := 0; i < 4; i++ {
		b, err := open()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		served = append(served, b)
	}
	fifth, err := open()
	if fifth != nil {
		defer fifth.Close()
	}
	// The gateway closes the connection on its first request after the handshake: sarama reads
	// end of file, or a reset when the close races its write.
	if err == nil {
		t.Fatal("the fifth connection of a 4-connection tenant was served")
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("the fifth connection failed with %v; want it closed by the gateway", err)
	}
	eventually(t, 5*time.Second, "the refusal is counted with reason connections", func() bool {
		return metric(t, "weighstation_messages_refused", labels) == refusedBefore+1
	})

	served[0].Close()
	served = served[1:]
	eventually(t, 5*time.Second, "a freed place admits a new connection", func() bool {
		b, err := open()
		if b != nil && err != nil {
			b.Close()
		}
		if err != nil {
			return false
		}
		served = append(served, b)
		return true
	})
}

// inFlight counts Produce requests awaiting their response across the tenant's connections:
// four connections at 400 requests/s overlap their requests all the time, so the bound of 1
// shows at the broker: a relay between the gateway and the broker (relay_test.go) counts the
// Produce requests the broker was sent and has not answered, outside the filter. reject refuses
// the overlap; delay holds it and loses nothing.
func TestKafkaInFlight(t *testing.T) {
	for _, mode := range []string{"reject", "delay"} {
		t.Run(mode, func(t *testing.T) {
			tenant := "kafka-inflight-" + mode
			topic := strings.ReplaceAll(uniqueSubject(tenant), ".", "-")
			produceEach(t, "acme-create", topic, 1, 1)
			inFlightRelay.reset()
			sent, acked, refused, _ := pacedProduceVia(t, addr(kafkaRelayed), tenant+"-p", topic, 400, 4, time.Second, sarama.WaitForAll)
			peak, reached := inFlightRelay.peak.Load(), inFlightRelay.produces.Load()
			stored := len(topicRecords(t, topic)) - 1
			t.Logf("inFlight 1, %s: sent %d, acked %d, refused %d, stored %d; the broker was sent %d, at most %d at once",
				mode, sent, acked, refused, stored, reached, peak)
			if acked+refused != sent || stored != acked {
				t.Fatalf("conservation: sent %d, acked %d, refused %d, stored %d", sent, acked, refused, stored)
			}
			if reached != int64(acked) {
				t.Fatalf("the broker was sent %d Produce requests for %d acknowledged", reached, acked)
			}
			if peak != 1 {
				t.Fatalf("the broker had up to %d of the tenant's Produce requests at once; want exactly its inFlight of 1", peak)
			}
			if mode == "reject" && refused == 0 {
				t.Fatal("4 connections at 400 requests/s never had two requests in flight at once")
			}
			if mode == "delay" && refused != 0 {
				t.Fatalf("delay mode refused %d", refused)
			}
		})
	}
}
