package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

func kafkaConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V3_6_0_0
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 0
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	return c
}

// asBaseline makes a sarama configuration authenticate as the baseline user, the only one the
// broker's DIRECT listener (and the gateway's rewriting listener in front of it) admits.
func asBaseline(c *sarama.Config) *sarama.Config {
	c.Net.SASL.Enable = true
	c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	c.Net.SASL.User, c.Net.SASL.Password = localstack.BaselineKafkaUser, localstack.BaselineKafkaUser+"-secret"
	return c
}

var kafkaLabels = func(tenant string) map[string]string {
	return map[string]string{"protocol": "kafka", "tenant": tenant}
}

// A record produced through the gateway is read back by a consumer that also goes through the
// gateway, and is counted for the tenant whose client.id prefix the producer uses.
func TestKafkaProduceAndConsumeThroughGateway(t *testing.T) {
	topic := fmt.Sprintf("spine-%d", time.Now().UnixNano())
	before := metric(t, "weighstation_messages_accepted", kafkaLabels("acme"))
	beforeGlobex := metric(t, "weighstation_messages_accepted", kafkaLabels("globex"))

	producer, err := sarama.NewSyncProducer([]string{addr(ports.Kafka)}, kafkaConfig("acme-spine-producer"))
	if err != nil {
		t.Fatalf("producer through the gateway: %v", err)
	}
	defer producer.Close()
	const n = 5
	for i := 0; i < n; i++ {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("record-%d", i))}); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	consumer, err := sarama.NewConsumer([]string{addr(ports.Kafka)}, kafkaConfig("globex-spine-consumer"))
	if err != nil {
		t.Fatalf("consumer through the gateway: %v", err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			if want := fmt.Sprintf("record-%d", i); string(m.Value) != want {
				t.Fatalf("record %d = %q, want %q", i, m.Value, want)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatalf("record %d never arrived", i)
		}
	}
	eventually(t, 5*time.Second, "acme's kafka counter moves by the records produced", func() bool {
		return metric(t, "weighstation_messages_accepted", kafkaLabels("acme")) == before+n
	})
	if got := metric(t, "weighstation_messages_accepted", kafkaLabels("globex")); got != beforeGlobex {
		t.Errorf("the consumer's tenant counted produced records: %v → %v", beforeGlobex, got)
	}
}

// Every broker address a client learns through the gateway is the gateway's.
func TestKafkaMetadataAdvertisesTheGateway(t *testing.T) {
	client, err := sarama.NewClient([]string{addr(ports.Kafka)}, kafkaConfig("acme-metadata"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	requireBrokersAt(t, client.Brokers(), addr(ports.Kafka))
}

// requireBrokersAt: the client learned at least one broker, and every one is at want.
func requireBrokersAt(t *testing.T, brokers []*sarama.Broker, want string) {
	t.Helper()
	if len(brokers) == 0 {
		t.Fatal("the client learned no broker")
	}
	for _, b := range brokers {
		if b.Addr() != want {
			t.Errorf("broker %d advertised at %s, want %s", b.ID(), b.Addr(), want)
		}
	}
}

// A broker that advertises its own address (like those of an existing cluster) is fronted by a
// gateway listener: every broker and coordinator address a client learns is the gateway's, and
// producing and consuming work through it.
func TestKafkaBrokerAddressesAreRewrittenToTheGateway(t *testing.T) {
	direct, err := sarama.NewClient([]string{addr(ports.KafkaDirect)}, asBaseline(kafkaConfig("direct")))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	// The broker itself advertises its own listener: what the gateway has to rewrite.
	requireBrokersAt(t, direct.Brokers(), addr(ports.KafkaDirect))

	cfg := asBaseline(kafkaConfig("rewrite"))
	client, err := sarama.NewClient([]string{addr(ports.KafkaBroker)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	requireBrokersAt(t, client.Brokers(), addr(ports.KafkaBroker))
	coordinator, err := client.Coordinator("weighstation-rewrite-group")
	if err != nil {
		t.Fatal(err)
	}
	if coordinator.Addr() != addr(ports.KafkaBroker) {
		t.Errorf("coordinator at %s, want the gateway %s", coordinator.Addr(), addr(ports.KafkaBroker))
	}
	topic := fmt.Sprintf("rewrite-%d", time.Now().UnixNano())
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("via the gateway")}); err != nil {
		t.Fatalf("produce through the rewritten address: %v", err)
	}
}
