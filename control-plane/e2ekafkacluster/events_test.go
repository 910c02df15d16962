package e2ekafkacluster

import (
	"fmt"
	"testing"
	"time"
)

// offered is the producer's fixed rate, over its tenant's limit, so every window without a
// fault shows the limit held, and the gateway has refusals to report (the Java producer
// retries each one).
const offered = 400

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// rideThrough runs one event under load: a Java idempotent producer of cluster-limited offers
// `offered` records a second for d across a fresh topic's six partitions, through the gateway's
// bootstrap listener; the event runs a third of the way in. Then: every acknowledged record is
// stored once, no client connection to a broker was anyone's but the gateway's, the tenant's
// admitted rate stayed within its limit, and the gateway counted every record stored.
func rideThrough(t *testing.T, topic string, d time.Duration, event func(t *testing.T)) {
	t.Helper()
	createTopic(t, topic)
	prefix := "cluster-limited-" + topic
	before := acceptedByGateway(t, "cluster-limited")
	conns := watchConnections()
	p := startJavaProducer(t, addr(ports.Kafka), topic, prefix, offered, d)
	start := time.Now()
	time.Sleep(d / 3)
	f := fault{from: time.Now()}
	event(t)
	f.to = time.Now()
	t.Logf("event took %v", f.to.Sub(f.from).Round(time.Millisecond))
	run := p.wait(t)
	conns.check(t)
	s := readTopic(t, topic)
	checkDelivery(t, run, s, prefix)
	checkRate(t, admittedPerSecond(t, "cluster-limited", start, start.Add(d)), []fault{f}, start)
	storedHere := len(s.count)
	if counted := acceptedByGateway(t, "cluster-limited") - before; counted < storedHere {
		t.Errorf("the gateway counted %d records of cluster-limited, %d are stored: some went around it", counted, storedHere)
	} else {
		t.Logf("the gateway counted %d records admitted (a retry of a batch counts again), %d stored", counted, storedHere)
	}
}

// A broker restarted as a rollout does (SIGTERM: a controlled shutdown hands its leaderships
// to the others) while a producer writes through the gateway.
func TestBrokerRestartedUnderLoad(t *testing.T) {
	rideThrough(t, "restart-one", 24*time.Second, func(t *testing.T) {
		if err := stack.RestartKafkaBroker(1); err != nil {
			t.Fatal(err)
		}
	})
}

// A fourth broker joins, partitions are moved onto it and it becomes their leader, while a
// producer writes through the gateway: the gateway discovers it, hands it out at its own port
// for node 4, and the records it leads go through the gateway.
func TestScaleOutWithReassignment(t *testing.T) {
	topic := "scale-out"
	rideThrough(t, topic, 30*time.Second, func(t *testing.T) {
		i, err := stack.AddKafkaBroker()
		if err != nil {
			t.Fatal(err)
		}
		node := stack.KafkaBrokerID(i)
		if err := stack.ReassignPartitions(topic, map[int32][]int32{0: {node, 1, 2}, 3: {node, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		if err := stack.ElectPreferredLeaders(topic); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %d joined and leads partitions 0 and 3", node)
	})
	// What a client of each listener kind is told now: node 4 at the gateway's port for it.
	for _, k := range kinds() {
		brokers := metadataBrokers(t, k)
		want := k.nodePort(4)
		if got, ok := brokers[4]; !ok || got != addr(want) {
			t.Errorf("%s: node 4 at %q, want %s (brokers %v)", k.name, got, addr(want), brokers)
		}
	}
}
