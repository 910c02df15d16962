package scenario

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/refusals"
)

type acks sarama.RequiredAcks

const (
	acksLeader = acks(sarama.WaitForLocal)
	acksAll    = acks(sarama.WaitForAll)
)

var errClosed = errors.New("target closed before the record was handed to the producer")

// kafkaProduce hands each operation to one of its async producers (one client, so one broker
// connection, each) and completes it when that record's ack or error comes back.
type kafkaProduce struct {
	c         engine.Completer
	producers []sarama.AsyncProducer
	topic     string
	size      int
	drained   sync.WaitGroup // the goroutines reading successes and errors
	// refused are the refusals by error code: sarama keeps no Produce error message, so a Kafka
	// refusal names its limit by code (THROTTLING_QUOTA_EXCEEDED: rate, inFlight or queue) and
	// its tenant only through the run's --kafka-client-id.
	refused refusals.Tally

	// Fire holds mu (shared) while it may send to a producer; Close takes it exclusively after
	// closing closing, so no record is sent to a producer being closed.
	mu      sync.RWMutex
	closing chan struct{}
	closed  bool
}

func openKafka(a acks) opener {
	return func(cfg Config, ep Endpoint, c engine.Completer) (Target, error) {
		conf := kafkaConfig(cfg, ep, a)
		if err := ensureTopic(ep.Kafka, conf, cfg.KafkaTopic); err != nil {
			return nil, err
		}
		t := &kafkaProduce{c: c, topic: cfg.KafkaTopic, size: cfg.Size, closing: make(chan struct{})}
		for range cfg.Connections {
			p, err := sarama.NewAsyncProducer([]string{ep.Kafka}, conf)
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("producer for %s: %w", ep.Kafka, err)
			}
			t.producers = append(t.producers, p)
			t.drained.Add(2)
			go t.successes(p)
			go t.errors(p)
		}
		return t, nil
	}
}

func kafkaConfig(cfg Config, ep Endpoint, a acks) *sarama.Config {
	conf := sarama.NewConfig()
	conf.ClientID = cfg.KafkaClientID
	conf.Version = sarama.V3_6_0_0
	conf.Producer.RequiredAcks = sarama.RequiredAcks(a)
	conf.Producer.Return.Successes = true
	conf.Producer.Return.Errors = true
	conf.Producer.Retry.Max = cfg.KafkaRetries
	conf.Producer.Timeout = cfg.Timeout
	conf.Producer.MaxMessageBytes = 8 << 20
	conf.Metadata.Retry.Backoff = 200 * time.Millisecond
	if ep.PinKafka {
		conf.Net.Proxy.Enable = true
		conf.Net.Proxy.Dialer = pinnedDialer{addr: ep.Kafka}
	}
	if ep.AsBaseline && cfg.DirectKafkaUser != "" {
		conf.Net.SASL.Enable = true
		conf.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		conf.Net.SASL.User, conf.Net.SASL.Password = cfg.DirectKafkaUser, cfg.DirectKafkaPassword
	}
	return conf
}

// pinnedDialer dials addr whatever broker address it is asked for.
type pinnedDialer struct{ addr string }

func (d pinnedDialer) Dial(network, _ string) (net.Conn, error) {
	return net.DialTimeout(network, d.addr, 5*time.Second)
}

// ensureTopic creates the topic (one partition, short retention so repeated runs do not fill
// the disk) unless it exists, so the first measured records do not wait for auto-creation.
func ensureTopic(addr string, conf *sarama.Config, topic string) error {
	admin, err := sarama.NewClusterAdmin([]string{addr}, conf)
	if err != nil {
		return fmt.Errorf("admin client for %s: %w", addr, err)
	}
	defer admin.Close()
	retention, segment := "60000", "16777216"
	err = admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention, "segment.bytes": &segment},
	}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return nil
}

func (t *kafkaProduce) Fire(op engine.Op) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		t.c.Complete(op.Seq, engine.Failed, errClosed)
		return
	}
	m := &sarama.ProducerMessage{Topic: t.topic, Value: sarama.ByteEncoder(payload(t.size, op.Seq)), Metadata: op.Seq}
	select {
	case t.producers[op.Conn].Input() <- m:
	case <-t.closing:
		t.c.Complete(op.Seq, engine.Failed, errClosed)
	}
}

func (t *kafkaProduce) successes(p sarama.AsyncProducer) {
	defer t.drained.Done()
	for m := range p.Successes() {
		t.c.Complete(m.Metadata.(int), engine.OK, nil)
	}
}

func (t *kafkaProduce) errors(p sarama.AsyncProducer) {
	defer t.drained.Done()
	for e := range p.Errors() {
		o := outcome(e.Err)
		if o == engine.Refused {
			t.refused.Code(kafkaCode(e.Err))
		}
		t.c.Complete(e.Msg.Metadata.(int), o, e.Err)
	}
}

// kafkaCode names a refusal's error code as Kafka's protocol does.
func kafkaCode(err error) string {
	switch {
	case errors.Is(err, sarama.ErrThrottlingQuotaExceeded):
		return "THROTTLING_QUOTA_EXCEEDED"
	case errors.Is(err, sarama.ErrMessageSizeTooLarge):
		return "MESSAGE_TOO_LARGE"
	}
	return err.Error()
}

// RefusalReasons are the error codes the refusals carried.
func (t *kafkaProduce) RefusalReasons() []refusals.Reason { return t.refused.Reasons() }

func (t *kafkaProduce) Close() error {
	close(t.closing)
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	for _, p := range t.producers {
		p.AsyncClose()
	}
	t.drained.Wait()
	return nil
}
