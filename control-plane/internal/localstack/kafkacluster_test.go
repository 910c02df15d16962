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

// Each broker of a cluster is fronted on every listener kind, GATEWAY too, broker i in the i-th
// block of replicas.
func TestClusterGatewayFlagsFrontEveryBroker(t *testing.T) {
	s := kafkaStack(t, Counts{Replicas: 2, KafkaBrokers: 3})
	args := strings.Join(s.kafkaBrokerArgs(), " ")
	for _, want := range []string{
		"--kafka-broker 127.0.0.1:19112=127.0.0.1:9094 ",
		"--kafka-broker 127.0.0.1:19124=127.0.0.1:9196,upstream-tls ",
		"--kafka-broker 127.0.0.1:19133=127.0.0.1:9294,mtls,upstream-tls ",
		"--kafka-broker 127.0.0.1:19144=127.0.0.1:9396,tls,upstream-tls ",
		"--kafka-broker 127.0.0.1:19092=127.0.0.1:9492,upstream-tls ",
		"--kafka-broker 127.0.0.1:19094=127.0.0.1:9496,upstream-tls",
	} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("no %q in %s", want, args)
		}
	}
	if n := strings.Count(args, "--kafka-broker"); n != 15 {
		t.Errorf("%d --kafka-broker flags, want 5 for each of 3 brokers", n)
	}
	listeners := s.kafkaGatewayListeners()
	if len(listeners) != 16 || !slices.Contains(listeners, 9496) || !slices.Contains(listeners, 9092) {
		t.Errorf("listeners %v", listeners)
	}
}
