package localstack

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kafkaStack is a stack of these counts on the default ports, as `make run` lays them out.
func kafkaStack(t *testing.T, counts Counts) *Stack {
	t.Helper()
	p, err := defaultPorts(t).ForReplicas(counts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Stack{
		cfg: Config{WorkDir: "/w", Ports: p, Replicas: counts.Replicas, KafkaBrokers: counts.KafkaBrokers, WithKafka: true},
		tls: &tlsMaterial{dir: "/w/tls"},
	}
}

func renderKafka(t *testing.T, s *Stack, i int) string {
	t.Helper()
	var b bytes.Buffer
	if err := kafkaConfig.Execute(&b, s.kafkaNode(i)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// One broker is configured byte for byte as it always was (testdata: the configuration the
// single-node template rendered before clusters), its GATEWAY listener advertising the gateway.
func TestOneKafkaBrokerIsConfiguredAsAlways(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "kafka-one-node.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1} {
		s := kafkaStack(t, Counts{KafkaBrokers: n})
		if got := renderKafka(t, s, 0); got != string(want) {
			t.Errorf("KafkaBrokers=%d renders\n%s\nwant\n%s", n, got, want)
		}
		if dir := s.cfg.kafkaDir(0); dir != "/w/kafka" {
			t.Errorf("KafkaBrokers=%d: data in %s", n, dir)
		}
	}
}

// Node i of a cluster is broker and controller with node.id i+1, votes with every controller,
// listens and advertises itself on every port + i, and replicates three ways, two in sync.
func TestClusterNodeAdvertisesItself(t *testing.T) {
	s := kafkaStack(t, Counts{KafkaBrokers: 3})
	conf := renderKafka(t, s, 1)
	for _, want := range []string{
		"process.roles=broker,controller\nnode.id=2\n",
		"controller.quorum.voters=1@127.0.0.1:19102,2@127.0.0.1:19103,3@127.0.0.1:19104\n",
		"listeners=GATEWAY://127.0.0.1:19093,CONTROLLER://127.0.0.1:19103,DIRECT://127.0.0.1:19113,SASL://127.0.0.1:19123,SSL://127.0.0.1:19133,SASLSSL://127.0.0.1:19143\n",
		"advertised.listeners=GATEWAY://127.0.0.1:19093,DIRECT://127.0.0.1:19113,SASL://127.0.0.1:19123,SSL://127.0.0.1:19133,SASLSSL://127.0.0.1:19143\n",
		"log.dirs=/w/kafka-1/data\n",
		"offsets.topic.replication.factor=3\n", "transaction.state.log.replication.factor=3\n",
		"transaction.state.log.min.isr=2\n", "default.replication.factor=3\n", "min.insync.replicas=2\n",
		"listener.name.gateway.ssl.client.auth=required\n", "inter.broker.listener.name=DIRECT\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("no %q in\n%s", want, conf)
		}
	}
	if name := s.cfg.kafkaName(1); name != "kafka-1" {
		t.Errorf("node 1 is named %s", name)
	}
}

// The broker added later is a broker only, with the next node.id, on the ports kept for it; the
// quorum stays the first nodes'.
func TestAddedBrokerIsABrokerOnly(t *testing.T) {
	conf := renderKafka(t, kafkaStack(t, Counts{KafkaBrokers: 3}), 3)
	for _, want := range []string{
		"process.roles=broker\nnode.id=4\n",
		"controller.quorum.voters=1@127.0.0.1:19102,2@127.0.0.1:19103,3@127.0.0.1:19104\n",
		"listeners=GATEWAY://127.0.0.1:19095,DIRECT://127.0.0.1:19115,",
		"advertised.listeners=GATEWAY://127.0.0.1:19095,DIRECT://127.0.0.1:19115,",
		"log.dirs=/w/kafka-3/data\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("no %q in\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "CONTROLLER://") {
		t.Errorf("a broker-only node with a controller listener:\n%s", conf)
	}
}

// Two brokers cannot host three replicas nor lose one of two in sync.
func TestTwoBrokersReplicateTwice(t *testing.T) {
	conf := renderKafka(t, kafkaStack(t, Counts{KafkaBrokers: 2}), 0)
	for _, want := range []string{"default.replication.factor=2\n", "min.insync.replicas=1\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("no %q in\n%s", want, conf)
		}
	}
}

// One broker's gateway flags are what they always were.
func TestOneBrokerGatewayFlagsAsAlways(t *testing.T) {
	s := kafkaStack(t, Counts{})
	want := []string{
		"--kafka-broker", "127.0.0.1:19094=127.0.0.1:9093",
		"--kafka-broker", "127.0.0.1:19095=127.0.0.1:9192,upstream-tls",
		"--kafka-broker", "127.0.0.1:19096=127.0.0.1:9292,mtls,upstream-tls",
		"--kafka-broker", "127.0.0.1:19097=127.0.0.1:9392,tls,upstream-tls",
		"--kafka-listen", "127.0.0.1:9092,upstream-tls", "--kafka-upstream", "127.0.0.1:19092",
	}
	if got := s.kafkaBrokerArgs(); !slices.Equal(got, want) {
		t.Errorf("flags\n%q\nwant\n%q", got, want)
	}
	if got := s.KafkaBrokerGatewayAddr(0); got != "127.0.0.1:19092" {
		t.Errorf("--kafka-upstream %s", got)
	}
	if got, want := s.kafkaGatewayListeners(), []int{9092, 9093, 9192, 9292, 9392}; !slices.Equal(got, want) {
		t.Errorf("listeners %v, want %v", got, want)
	}
}

// A cluster is fronted by discovery on every listener kind, GATEWAY too: node ids 1 to the
// spans' room (the broker AddKafkaBroker adds included), node n in the n-th block of replicas;
// the GATEWAY kind bootstraps at Ports.Kafka, to every broker the stack starts with.
func TestClusterGatewayFlagsDiscoverEveryBroker(t *testing.T) {
	s := kafkaStack(t, Counts{Replicas: 2, KafkaBrokers: 3})
	want := []string{
		"--kafka-cluster", "gateway=127.0.0.1:9494,nodes=1-4,stride=2,listen=127.0.0.1:9092,bootstrap=127.0.0.1:19092+127.0.0.1:19093+127.0.0.1:19094,upstream-tls",
		"--kafka-cluster", "direct=127.0.0.1:9096,nodes=1-4,stride=2,listen=127.0.0.1:9094,bootstrap=127.0.0.1:19112+127.0.0.1:19113+127.0.0.1:19114",
		"--kafka-cluster", "sasl=127.0.0.1:9194,nodes=1-4,stride=2,listen=127.0.0.1:9192,bootstrap=127.0.0.1:19122+127.0.0.1:19123+127.0.0.1:19124,upstream-tls",
		"--kafka-cluster", "ssl=127.0.0.1:9294,nodes=1-4,stride=2,listen=127.0.0.1:9292,bootstrap=127.0.0.1:19132+127.0.0.1:19133+127.0.0.1:19134,mtls,upstream-tls",
		"--kafka-cluster", "sasl_ssl=127.0.0.1:9394,nodes=1-4,stride=2,listen=127.0.0.1:9392,bootstrap=127.0.0.1:19142+127.0.0.1:19143+127.0.0.1:19144,tls,upstream-tls",
		"--kafka-listen", "",
	}
	if got := s.kafkaBrokerArgs(); !slices.Equal(got, want) {
		t.Errorf("flags\n%q\nwant\n%q", got, want)
	}
	// Broker 2 (node 3) of the SASL kind: the gateway's node 3 port on replica 0.
	if got := s.KafkaGatewayPort(s.cfg.Ports.KafkaSASL, 2); got != 9198 {
		t.Errorf("node 3's SASL port %d, want 9192 + 3·2", got)
	}
	listeners := s.kafkaGatewayListeners()
	// 9092 and four kinds' bootstrap listeners, and five kinds' ports of each of 3 brokers.
	if len(listeners) != 20 || !slices.Contains(listeners, 9498) || !slices.Contains(listeners, 9092) || !slices.Contains(listeners, 9192) {
		t.Errorf("listeners %v", listeners)
	}
}
