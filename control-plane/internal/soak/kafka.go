package soak

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// Kafka message kinds: produced with acks=1 (not idempotent: a retry across a broker restart
// may store a record twice) and with acks=all by an idempotent producer.
const (
	KindAcks1   = "kafka-acks1"
	KindAcksAll = "kafka-acksall"
)

// KafkaRates are each tenant's records per second of each kind.
var KafkaRates = map[string]float64{KindAcks1: 20, KindAcksAll: 20}

// deliveryTimeout bounds a record's retries: longer than a broker restart here (13–18 s).
const deliveryTimeout = 60 * time.Second

func topic(tenant, kind string) string {
	return "soak-" + tenant + "-" + strings.TrimPrefix(kind, "kafka-")
}

// kafkaProducer is one tenant's producer of one kind, through the gateway.
type kafkaProducer struct {
	tenant, kind string
	client       *kgo.Client
	rec          *recorder
}

func startKafkaProducer(gateway, tenant, kind string) (*kafkaProducer, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(gateway), kgo.ClientID(tenant + "-" + kind),
		kgo.DefaultProduceTopic(topic(tenant, kind)), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.ProducerBatchMaxBytes(16384),
		// The settings docs/kafka.md gives franz-go users: retry THROTTLING_QUOTA_EXCEEDED in
		// time (after a metadata refresh), and retry a connection the gateway accepted and closed
		// while the broker was down (franz-go takes it for a TLS misconfiguration otherwise).
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.AlwaysRetryEOF(),
	}
	if kind == KindAcks1 {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaProducer{tenant: tenant, kind: kind, client: cl, rec: newRecorder(tenant, kind, kafkaErrKind)}, nil
}

// warm creates the topic (auto-created by the first produce) before the soak's clock starts.
func (p *kafkaProducer) warm(ctx context.Context) error {
	return p.client.ProduceSync(ctx, &kgo.Record{Key: []byte("warm-up"), Value: []byte("warm-up")}).FirstErr()
}

func (p *kafkaProducer) run(ctx context.Context) {
	value := make([]byte, 128)
	paced(ctx, KafkaRates[p.kind], func(at time.Time) {
		seq := p.rec.next(at)
		p.client.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(seq)), Value: value},
			func(_ *kgo.Record, err error) {
				if refusedByGateway(err) {
					p.rec.refused(seq)
				}
				p.rec.answered(seq, err)
			})
	})
}

// refusedByGateway: the errors the gateway answers a refused Produce with (docs/kafka.md).
func refusedByGateway(err error) bool {
	return errors.Is(err, kerr.ThrottlingQuotaExceeded) || errors.Is(err, kerr.MessageTooLarge)
}

// finish waits for every record's outcome (up to its delivery timeout) and closes the client.
func (p *kafkaProducer) finish() {
	ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout+10*time.Second)
	defer cancel()
	_ = p.client.Flush(ctx)
	p.client.Close()
}

// readTopics counts the records of the soak's topics, read directly from the broker, into
// present (keyed by sequence number; the warm-up record is skipped).
func readTopics(ctx context.Context, broker string, flows map[string][]string, present *presence) (int, error) {
	var topics []string
	owner := map[string][2]string{}
	for tenant, kinds := range flows {
		for _, kind := range kinds {
			t := topic(tenant, kind)
			topics = append(topics, t)
			owner[t] = [2]string{tenant, kind}
		}
	}
	cl, err := kgo.NewClient(append(localstack.DirectKafka(broker), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	n, quiet := 0, 0
	// Read until three polls in a row bring nothing (the producers are done, so the topics are
	// complete); the first records may take a few polls to come.
	for quiet < 3 || (n == 0 && quiet < 15) {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		got := 0
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			seq, err := strconv.Atoi(string(r.Key))
			if err != nil {
				return
			}
			o := owner[r.Topic]
			present.add(o[0], o[1], seq)
		})
		n += got
		if got == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return n, nil
}
