package weighstation

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/grafana/sobek"
)

type kafkaOptions struct {
	Brokers  []string `js:"brokers"`
	ClientID string   `js:"clientId"` // its prefix selects the tenant at the gateway
	Acks     string   `js:"acks"`     // "1" or "all" (default)
	Timeout  string   `js:"timeout"`  // default 10s
}

// kafkaKey is kafkaOptions made comparable, to share producers.
type kafkaKey struct{ brokers, clientID, acks, timeout string }

type kafkaPool struct{ producer sarama.SyncProducer }

// Kafka is the script's handle.
type Kafka struct {
	m    *instance
	pool *kafkaPool
}

func (m *instance) kafkaClient(v sobek.Value) (*Kafka, error) {
	var o kafkaOptions
	if err := m.options(v, &o); err != nil {
		return nil, err
	}
	if len(o.Brokers) == 0 {
		o.Brokers = []string{"127.0.0.1:9092"}
	}
	if o.ClientID == "" {
		o.ClientID = "k6-weighstation"
	}
	if o.Acks == "" {
		o.Acks = "all"
	}
	if o.Timeout == "" {
		o.Timeout = "10s"
	}
	key := kafkaKey{fmt.Sprint(o.Brokers), o.ClientID, o.Acks, o.Timeout}
	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	if p, ok := m.root.kafka[key]; ok {
		return &Kafka{m, p}, nil
	}
	conf := sarama.NewConfig()
	conf.ClientID = o.ClientID
	conf.Version = sarama.V3_6_0_0
	conf.Producer.Return.Successes = true
	conf.Producer.Retry.Max = 0 // a refusal is reported, not retried away
	switch o.Acks {
	case "1":
		conf.Producer.RequiredAcks = sarama.WaitForLocal
	case "all":
		conf.Producer.RequiredAcks = sarama.WaitForAll
	default:
		return nil, fmt.Errorf(`acks %q: want "1" or "all"`, o.Acks)
	}
	var err error
	if conf.Producer.Timeout, err = time.ParseDuration(o.Timeout); err != nil {
		return nil, fmt.Errorf("timeout: %w", err)
	}
	producer, err := sarama.NewSyncProducer(o.Brokers, conf)
	if err != nil {
		return nil, fmt.Errorf("producer for %v: %w", o.Brokers, err)
	}
	p := &kafkaPool{producer: producer}
	m.root.kafka[key] = p
	return &Kafka{m, p}, nil
}

// Produce sends one record and waits for its acknowledgement.
func (k *Kafka) Produce(topic, value string) Result {
	start := time.Now()
	_, _, err := k.pool.producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(value)})
	refused := errors.Is(err, sarama.ErrThrottlingQuotaExceeded) || errors.Is(err, sarama.ErrMessageSizeTooLarge)
	return k.m.record("kafka_produce", start, refused, err)
}
