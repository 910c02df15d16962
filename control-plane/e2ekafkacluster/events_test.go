package e2ekafkacluster

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// offered is what cluster-limited's producers of a run offer together, records per second,
// over its limit, so every window without a fault shows the limit held and the gateway has
// refusals to report (the clients retry each one).
const offered = 400

// delayedOffered is what librdkafka offers as cluster-delayed, over its limit: it is held.
const delayedOffered = 125

// warmUp is the start of a run whose admitted rate is not judged: a producer's first refusals,
// before it has shown that it retries (the gateway sets rate aside for the retries of a
// connection that does: kafka.md, "Retries"), and a JVM still compiling (measured: 275 records/s
// in the first 10 s of a run, 299 in the next).
const warmUp = 5 * time.Second

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// bootstraps is every gateway replica's bootstrap listener, as a client lists them.
func bootstraps() string {
	out := make([]string, replicas)
	for r := range out {
		out[r] = addr(ports.Kafka + r)
	}
	return strings.Join(out, ",")
}

// producerBootstrap is the first replica's bootstrap listener, where every producer of a run
// bootstraps (the consumer group uses every replica's). cluster-limited's limit is per replica
// (scope perGateway): producers spread over three replicas would each find a bucket of their
// own, and the run could not show the tenant held to its limit. With scope: global across the
// replicas instead, the quota service divides the limit by connections, and a refused
// librdkafka producer (which drains and bumps its epoch after each refusal) left its part
// unused: 248–279 records/s admitted in windows without a fault at 400 offered.
func producerBootstrap() string { return addr(ports.Kafka) }

// clients says who runs in a ride: the Java idempotent producer always; in the matrix franz-go's
// idempotent producer and a Java transactional producer beside it (sharing the offered rate),
// librdkafka's idempotent producer as a tenant of its own (cluster-delayed), and a Java
// consumer group of two.
type clients struct{ others, group bool }

// rideThrough runs one event under load: producers of cluster-limited offer `offered` records a
// second for d across a fresh topic's six partitions, through the gateway's bootstrap
// listeners (and librdkafka, in the matrix, delayedOffered as cluster-delayed); the event runs a
// third of the way in. Then: every acknowledged record is stored once, no client connection to
// a broker was anyone's but the gateway's, each tenant's admitted rate stayed within its limit,
// the gateway counted every record stored, and a consumer group reading through the gateway
// read every record.
func rideThrough(t *testing.T, topic string, d time.Duration, with clients, event func(t *testing.T)) {
	t.Helper()
	createTopic(t, topic)
	prefix := "cluster-limited-" + topic
	delayed := "cluster-delayed-" + topic
	tenants := []string{"cluster-limited"}
	conns := stack.WatchConnections(clientListenerPorts)
	var group *javaGroup
	if with.group {
		group = startJavaGroup(t, topic, prefix+"-group")
	}
	rate := float64(offered)
	var txn *processProducer
	if with.others {
		// A transactional producer in a topic of its own (its markers take offsets, and its
		// consumer reads committed records only), with an eighth of the load.
		createTopic(t, topic+"-txn")
		txn = startTxnProducer(t, producerBootstrap(), topic+"-txn", prefix+"-txn", offered/8, d)
		rate = (offered - offered/8) / 2
		tenants = append(tenants, "cluster-delayed")
	}
	processes := map[string]*processProducer{prefix + "-java": startJavaProducer(t, producerBootstrap(), topic, prefix+"-java", rate, d)}
	var franz *franzProducer
	if with.others {
		franz = startFranzProducer(t, topic, prefix+"-franz", rate, d)
		processes[delayed+"-librdkafka"] = startLibrdkafkaProducer(t, producerBootstrap(), topic, delayed+"-librdkafka", delayedOffered, d)
	}
	start := time.Now()
	time.Sleep(d / 3)
	f := fault{from: time.Now()}
	event(t)
	f.to = time.Now()
	t.Logf("event took %v", f.to.Sub(f.from).Round(time.Millisecond))
	runs := map[string]producerRun{}
	for name, p := range processes {
		runs[name] = p.wait(t)
	}
	var txnRun producerRun
	if txn != nil {
		txnRun = txn.wait(t)
	}
	if franz != nil {
		runs[prefix+"-franz"] = franz.wait(t, 2*time.Minute)
	}
	end := time.Now()
	samples, foreign, unheld, err := conns.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(foreign) > 0 {
		t.Errorf("%d connections to a broker around the gateway, e.g. %s", len(foreign), foreign[0])
	}
	t.Logf("broker sockets sampled %d times: every client connection was an Envoy's (%d sockets held by no process passed over)", samples, unheld)
	s := readTopic(t, topic)
	for name, run := range runs {
		checkDelivery(t, run, s, name+"-")
	}
	if txn != nil {
		checkTransactions(t, txnRun, readCommitted(t, topic+"-txn"), prefix+"-txn-")
	}
	if group != nil {
		group.check(t, s)
	}
	admitted := admittedPerSecond(t, start.Add(-2*time.Second), end.Add(2*time.Second))
	// From warmUp on, until the producers' backlog ran out (their flush returned).
	from := int(warmUp/time.Second) + 2
	counted := 0.0
	for _, tenant := range tenants {
		checkRate(t, tenant, admitted[tenant][from:len(admitted[tenant])-2], []fault{f}, start.Add(warmUp), start.Add(d))
		for _, n := range admitted[tenant] {
			counted += n
		}
	}
	if t.Failed() {
		names := make([]string, 0, len(runs))
		for name := range runs {
			names = append(names, name)
		}
		sort.Strings(names)
		logStoredPerWindow(t, s, names, start.Add(warmUp))
	}
	if int(counted+0.5) < len(s.count) {
		t.Errorf("the gateway counted %.0f records of %v, %d are stored: some went around it", counted, tenants, len(s.count))
	} else {
		t.Logf("the gateway counted %.0f records admitted (a retry of a batch counts again), %d stored", counted, len(s.count))
	}
}

// event is one change to the cluster or the gateway, made under load. Smoke events run in
// make test; the rest in make test-clusters (WEIGHSTATION_CLUSTERS=full), with three gateway
// replicas and franz-go and a consumer group beside the Java producer.
type event struct {
	name  string
	smoke bool
	// d is how long the producers offer load; the event starts a third of the way in.
	d  time.Duration
	do func(t *testing.T, topic string)
	// after checks what a client is told once the run is over.
	after func(t *testing.T)
}

var events = []event{
	// A broker restarted as a rollout does (SIGTERM: a controlled shutdown hands its
	// leaderships to the others).
	{"broker-restarted", true, 50 * time.Second, func(t *testing.T, _ string) { restartBroker(t, 1) }, nil},
	{"every-broker-restarted-in-turn", false, 90 * time.Second, func(t *testing.T, _ string) {
		for i := range kafkaBrokers {
			restartBroker(t, i)
		}
	}, nil},
	// Killed (-9): its leaderships move once the controller misses its heartbeats; the
	// supervisor starts it again 5 s later, as a crash-looping pod would be.
	{"broker-killed", false, 60 * time.Second, func(t *testing.T, _ string) {
		release, err := stack.KillKafkaBroker(2)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		release()
		if err := stack.WaitKafkaBroker(2, true, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}, nil},
	// Each partition's replicas listed in another order, then each led by its first.
	{"preferred-leader-election", false, 40 * time.Second, func(t *testing.T, topic string) {
		rotated := map[int32][]int32{}
		for p := range int32(6) {
			rotated[p] = []int32{(p+1)%3 + 1, (p+2)%3 + 1, p%3 + 1}
		}
		if err := stack.ReassignPartitions(topic, rotated); err != nil {
			t.Fatal(err)
		}
		if err := stack.ElectPreferredLeaders(topic); err != nil {
			t.Fatal(err)
		}
	}, nil},
	{"gateway-replicas-rolled", false, 60 * time.Second, rollGatewayReplicas, nil},
	// A fourth broker joins, partitions are moved onto it and it becomes their leader: the
	// gateway discovers it and hands it out at its port for node 4 (last: it stays).
	{"scale-out", true, 40 * time.Second, func(t *testing.T, topic string) {
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
	}, func(t *testing.T) {
		for _, k := range kinds() {
			brokers := metadataBrokers(t, k)
			want := k.nodePort(4)
			if got, ok := brokers[4]; !ok || got != addr(want) {
				t.Errorf("%s: node 4 at %q, want %s (brokers %v)", k.name, got, addr(want), brokers)
			}
		}
	}},
}

// Each event under the load of a limited tenant's producers: nothing acknowledged is lost or
// stored twice, no client reaches a broker around the gateway, and the limit holds.
func TestEventsUnderLoad(t *testing.T) {
	for _, e := range events {
		if !full && !e.smoke {
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			rideThrough(t, e.name, e.d, clients{others: full, group: full}, func(t *testing.T) { e.do(t, e.name) })
			if e.after != nil {
				e.after(t)
			}
		})
	}
}

func restartBroker(t *testing.T, i int) {
	t.Helper()
	if err := stack.RestartKafkaBroker(i); err != nil {
		t.Fatal(err)
	}
}

// rollGatewayReplicas restarts each Envoy in turn (SIGTERM; the supervisor starts it again) and
// waits until it is ready and its bootstrap listener accepts before the next.
func rollGatewayReplicas(t *testing.T, _ string) {
	for i := range replicas {
		pid := stack.Envoys[i].PID()
		if err := stack.Envoys[i].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for stack.Envoys[i].PID() == pid {
			time.Sleep(20 * time.Millisecond)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", ports.Admin+i))
			ready := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			if ready {
				if c, err := net.DialTimeout("tcp", addr(ports.Kafka+i), time.Second); err == nil {
					c.Close()
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("gateway replica %d not back within 60 s", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
