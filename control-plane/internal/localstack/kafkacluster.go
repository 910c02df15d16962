package localstack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Kafka runs as one KRaft node (Config.KafkaBrokers 0 or 1), configured as it always was, or as
// a cluster of N nodes in combined mode (broker and controller), node i with node.id i+1 and
// every listener on its kind's port + i. The quorum is static (controller.quorum.voters): those
// N controllers for good. AddKafkaBroker adds a broker-only node, which joins by registering
// with the quorum, with no change to any running node; another controller would need every
// voter reconfigured and restarted (or a dynamic quorum and its add-voter steps), which adding a
// broker, what a test of a changing cluster needs, does not. The nodes share one cluster id and
// each keeps its data in <WorkDir>/kafka-<i>; they log to kafka-<i>.log.

// kafkaNode is what kafkaConfig renders for one node.
type kafkaNode struct {
	Roles                          string // process.roles
	NodeID                         int
	Voters                         string // controller.quorum.voters
	Broker, Controller, Advertised int    // GATEWAY's port and advertised port; Controller 0: broker-only
	Direct, SASL, SSL, SASLSSL     int
	Dir, TLSDir, Baseline          string
	SASLUsers, SASLListeners       []string
	Replication, MinISR            int // the internal topics' and, in a cluster, every topic's default
}

// kafkaBrokerCount is how many brokers the stack starts with.
func (c Config) kafkaBrokerCount() int { return max(c.KafkaBrokers, 1) }

// kafkaCluster: more than one broker, each advertising itself on every listener.
func (c Config) kafkaCluster() bool { return c.kafkaBrokerCount() > 1 }

// kafkaName names node i's process and log: as it always was with one.
func (c Config) kafkaName(i int) string {
	if !c.kafkaCluster() {
		return "kafka"
	}
	return "kafka-" + strconv.Itoa(i)
}

// kafkaDir holds node i's configuration and data.
func (c Config) kafkaDir(i int) string { return filepath.Join(c.WorkDir, c.kafkaName(i)) }

// kafkaNode is node i's configuration. Node i ≥ kafkaBrokerCount was added later: a broker only.
// A cluster replicates three ways with two in sync (fewer with two brokers, which could not
// host three replicas nor lose one of two in sync), its internal topics too.
func (s *Stack) kafkaNode(i int) kafkaNode {
	p, n := s.cfg.Ports, s.cfg.kafkaBrokerCount()
	voters := make([]string, n)
	for j := range voters {
		voters[j] = strconv.Itoa(j+1) + "@" + addr(p.KafkaController+j)
	}
	rf := min(n, 3)
	node := kafkaNode{
		Roles: "broker,controller", NodeID: i + 1, Voters: strings.Join(voters, ","),
		Broker: p.KafkaUpstream + i, Controller: p.KafkaController + i, Advertised: p.KafkaUpstream + i,
		Direct: p.KafkaDirect + i, SASL: p.KafkaSASLUp + i, SSL: p.KafkaSSLUp + i, SASLSSL: p.KafkaSASLSSLUp + i,
		Dir: s.cfg.kafkaDir(i), TLSDir: s.tls.dir, Baseline: BaselineKafkaUser,
		SASLUsers: s.cfg.kafkaSASLUsers(), SASLListeners: []string{"sasl", "saslssl"},
		Replication: rf, MinISR: max(rf-1, 1),
	}
	if n == 1 {
		node.Advertised = p.Kafka // the single broker's GATEWAY listener advertises the gateway
	}
	if i >= n {
		node.Roles, node.Controller = "broker", 0
	}
	return node
}

// startKafka starts every node before it waits for any: a cluster's controllers elect a leader,
// and its brokers register, only once a majority is up.
func (s *Stack) startKafka() error {
	var err error
	if s.kafkaClusterID, err = s.existingKafkaClusterID(); err != nil {
		return err
	}
	for i := range s.cfg.kafkaBrokerCount() {
		p, err := s.startKafkaNode(i)
		if err != nil {
			return err
		}
		s.KafkaBrokers = append(s.KafkaBrokers, p)
		s.procs = append(s.procs, p)
	}
	s.Kafka = s.KafkaBrokers[0]
	for i := range s.KafkaBrokers {
		if err := s.waitKafkaListeners(i); err != nil {
			return err
		}
	}
	if s.cfg.kafkaCluster() {
		if err := s.waitKafkaCluster(s.cfg.kafkaBrokerCount(), kafkaStartTimeout); err != nil {
			return err
		}
	}
	return addSCRAMUsers(s.KafkaBrokerDirectAddr(0), s.cfg.kafkaSASLUsers())
}

// startKafkaNode writes node i's configuration, formats its storage if it is fresh and starts it.
func (s *Stack) startKafkaNode(i int) (*process, error) {
	dir := s.cfg.kafkaDir(i)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := kafkaConfig.Execute(&b, s.kafkaNode(i)); err != nil {
		return nil, err
	}
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dir, "log4j2.yaml")
	if err := os.WriteFile(log4j, []byte(kafkaLog4j), 0o644); err != nil {
		return nil, err
	}
	classpath := filepath.Join(s.cfg.ToolsDir, "kafka", "libs", "*")
	if _, err := os.Stat(filepath.Join(dir, "data", "meta.properties")); err != nil {
		// A fresh data directory: format it with the cluster's id.
		out, err := exec.Command("java", "-cp", classpath, "kafka.tools.StorageTool", "format",
			"-t", s.kafkaClusterID, "-c", props, "--ignore-formatted").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("formatting %s storage: %v: %s", s.cfg.kafkaName(i), err, strings.TrimSpace(string(out)))
		}
	}
	return s.startProcess(s.cfg.kafkaName(i), []string{"KAFKA_HEAP_OPTS=-Xmx512m"}, "java",
		"-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile="+log4j, "-cp", classpath, "kafka.Kafka", props)
}

// existingKafkaClusterID is the cluster id of a node formatted by an earlier run (`make run`
// keeps run/), so that a fresh node beside it joins the same cluster; else one derived from
// nothing but chance.
func (s *Stack) existingKafkaClusterID() (string, error) {
	for i := range s.cfg.kafkaBrokerCount() {
		id, err := readKafkaClusterID(filepath.Join(s.cfg.kafkaDir(i), "data", "meta.properties"))
		if err != nil || id != "" {
			return id, err
		}
	}
	return randomClusterID(), nil
}

// readKafkaClusterID is meta.properties' cluster.id ("" if the file or the line is missing).
func readKafkaClusterID(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "cluster.id="); ok {
			return strings.TrimSpace(id), nil
		}
	}
	return "", sc.Err()
}

// waitKafkaListeners waits until node i accepts connections on every listener it has.
func (s *Stack) waitKafkaListeners(i int) error {
	n := s.kafkaNode(i)
	for _, port := range []int{n.Broker, n.Direct, n.SASL, n.SSL, n.SASLSSL} {
		if err := waitTCP(s.KafkaBrokers[i], addr(port), kafkaStartTimeout); err != nil {
			return err
		}
	}
	return nil
}

// kafkaBrokerArgs are the gateway's Kafka flags beside its bootstrap listener. One broker: a
// --kafka-broker for each of its DIRECT, SASL, SSL and SASL_SSL listeners (its GATEWAY
// listener advertises the gateway's Kafka listener, which --kafka-listen fronts), then
// Config.ExtraKafkaBrokers. A cluster: a --kafka-cluster per listener kind, whose brokers the
// gateway discovers (kafkaClusterArgs).
func (s *Stack) kafkaBrokerArgs() []string {
	if s.cfg.kafkaCluster() {
		return s.kafkaClusterArgs()
	}
	p := s.cfg.Ports
	gw := func(first int) string { return addr(s.KafkaGatewayPort(first, 0)) }
	args := []string{"--kafka-broker", s.KafkaBrokerDirectAddr(0) + "=" + gw(p.KafkaBroker),
		"--kafka-broker", addr(p.KafkaSASLUp) + "=" + gw(p.KafkaSASL) + ",upstream-tls",
		"--kafka-broker", addr(p.KafkaSSLUp) + "=" + gw(p.KafkaTLS) + ",mtls,upstream-tls",
		"--kafka-broker", addr(p.KafkaSASLSSLUp) + "=" + gw(p.KafkaSASLSSL) + ",tls,upstream-tls",
		"--kafka-listen", addr(p.Kafka) + ",upstream-tls", "--kafka-upstream", s.KafkaBrokerGatewayAddr(0)}
	for _, r := range s.cfg.ExtraKafkaBrokers {
		args = append(args, "--kafka-broker", r.Upstream+"="+addr(r.Listen))
	}
	return args
}

// KafkaClusterKinds are the local cluster's listener kinds as the gateway's --kafka-cluster
// names them (each one's filter chain is weighstation-kafka-<name>).
const (
	KafkaKindGateway = "gateway"
	KafkaKindDirect  = "direct"
	KafkaKindSASL    = "sasl"
	KafkaKindSSL     = "ssl"
	KafkaKindSASLSSL = "sasl_ssl"
)

// kafkaClusterArgs front a cluster as an existing one is fronted: every listener kind is a
// --kafka-cluster whose node ids (1 to the spans' room, the broker AddKafkaBroker starts
// included) have the ports GatewayBrokerPort gives them, replica r's at + r (stride: the
// replica count); the brokers themselves are discovered, never listed. Each kind's bootstrap
// listener (its first port; the GATEWAY kind's is Ports.Kafka) forwards to every broker the
// stack starts with.
func (s *Stack) kafkaClusterArgs() []string {
	p := s.cfg.Ports
	nodes := fmt.Sprintf("nodes=1-%d,stride=%d", s.cfg.Counts().kafkaSlots(), s.cfg.replicaCount())
	kind := func(name string, first, bootstrapListen, upstream int, options string) []string {
		seeds := make([]string, s.cfg.kafkaBrokerCount())
		for i := range seeds {
			seeds[i] = addr(upstream + i)
		}
		return []string{"--kafka-cluster", name + "=" + addr(s.KafkaGatewayPort(first, 0)) + "," + nodes +
			",listen=" + addr(bootstrapListen) + ",bootstrap=" + strings.Join(seeds, "+") + options}
	}
	var args []string
	args = append(args, kind(KafkaKindGateway, p.KafkaGatewayBroker, p.Kafka, p.KafkaUpstream, ",upstream-tls")...)
	args = append(args, kind(KafkaKindDirect, p.KafkaBroker, p.KafkaBroker, p.KafkaDirect, "")...)
	args = append(args, kind(KafkaKindSASL, p.KafkaSASL, p.KafkaSASL, p.KafkaSASLUp, ",upstream-tls")...)
	args = append(args, kind(KafkaKindSSL, p.KafkaTLS, p.KafkaTLS, p.KafkaSSLUp, ",mtls,upstream-tls")...)
	args = append(args, kind(KafkaKindSASLSSL, p.KafkaSASLSSL, p.KafkaSASLSSL, p.KafkaSASLSSLUp, ",tls,upstream-tls")...)
	return append(args, "--kafka-listen", "")
}

// kafkaGatewayListeners are replica 0's Kafka listener ports: the bootstrap listener, every
// --kafka-broker's, and in a cluster every kind's bootstrap listener and its nodes'.
func (s *Stack) kafkaGatewayListeners() []int {
	p := s.cfg.Ports
	ports := []int{p.Kafka}
	kinds := []int{p.KafkaBroker, p.KafkaSASL, p.KafkaTLS, p.KafkaSASLSSL}
	if s.cfg.kafkaCluster() {
		ports = append(ports, kinds...)
		kinds = append(kinds, p.KafkaGatewayBroker)
	}
	for i := range s.cfg.kafkaBrokerCount() {
		for _, first := range kinds {
			ports = append(ports, s.KafkaGatewayPort(first, i))
		}
	}
	for _, r := range s.cfg.ExtraKafkaBrokers {
		ports = append(ports, r.Listen)
	}
	return ports
}

// KafkaGatewayPort is replica 0's port fronting broker i on the gateway listener whose first
// port is first (Ports.KafkaBroker, KafkaSASL, KafkaTLS, KafkaSASLSSL, KafkaGatewayBroker);
// replica r listens on it + r.
func (s *Stack) KafkaGatewayPort(first, i int) int {
	return GatewayBrokerPort(first, i, s.cfg.Counts())
}

// KafkaBrokerCount is how many Kafka brokers run: Config.KafkaBrokers (at least one), and the
// one AddKafkaBroker added.
func (s *Stack) KafkaBrokerCount() int { return len(s.KafkaBrokers) }

// KafkaBrokerID is broker i's node.id.
func (s *Stack) KafkaBrokerID(i int) int32 { return int32(i + 1) }

// KafkaBrokerDirectAddr is broker i's DIRECT listener (host:port), for clients as
// BaselineKafkaUser (DirectKafka).
func (s *Stack) KafkaBrokerDirectAddr(i int) string { return addr(s.cfg.Ports.KafkaDirect + i) }

// KafkaBrokerGatewayAddr is broker i's GATEWAY listener (host:port), which admits only the
// gateway's client certificate.
func (s *Stack) KafkaBrokerGatewayAddr(i int) string { return addr(s.cfg.Ports.KafkaUpstream + i) }

// KafkaBrokerPID is the process id of broker i's running instance: it changes when the
// supervisor starts it again (after KillKafkaBroker's release).
func (s *Stack) KafkaBrokerPID(i int) int { return s.KafkaBrokers[i].PID() }

// RestartKafkaBroker stops broker i as a rollout does (SIGTERM: a controlled shutdown, which
// hands its leaderships to the other replicas; SIGKILL only after kafkaStopGrace), starts it
// again with the same configuration and data, and waits until it is registered and back in the
// ISR of every partition it replicates. Its *process is a new one. Not while KillKafkaBroker
// holds it down: release it first.
func (s *Stack) RestartKafkaBroker(i int) error {
	old, err := s.kafkaBroker(i)
	if err != nil {
		return err
	}
	next, err := s.restart(old, kafkaStopGrace)
	if err != nil {
		return err
	}
	s.KafkaBrokers[i] = next
	s.Kafka = s.KafkaBrokers[0]
	if err := s.waitKafkaListeners(i); err != nil {
		return err
	}
	return s.WaitKafkaBroker(i, true, kafkaStartTimeout)
}

// KillKafkaBroker kills broker i (SIGKILL: no controlled shutdown, its leaderships move only
// once the controller misses its heartbeats) and keeps it down until release is called; the
// supervisor then starts it again after restartDelay, as a crash would (WaitKafkaBroker waits
// for it). It needs Config.Supervise.
func (s *Stack) KillKafkaBroker(i int) (release func(), err error) {
	p, err := s.kafkaBroker(i)
	if err == nil && !p.supervised {
		err = errors.New(p.name + " is not supervised (Config.Supervise): nothing would start it again")
	}
	if err != nil {
		return nil, err
	}
	return p.KillAndHold()
}

// AddKafkaBroker starts one more node on the ports the cluster's spans keep for it: a broker
// only (the quorum stays the first nodes'), with the next node.id, and empty, as a new broker
// is (whatever an earlier run left in its directory is removed). It returns the broker's index
// once it is registered. The gateway is not told of it: it advertises its own addresses, and
// only the gateway's discovery of brokers can keep clients off them. Only a cluster has room,
// for one.
func (s *Stack) AddKafkaBroker() (i int, err error) {
	i = len(s.KafkaBrokers)
	if !s.cfg.kafkaCluster() || i >= s.cfg.Counts().kafkaSlots() {
		return 0, fmt.Errorf("no room for another Kafka broker: the ports keep room for one beside a cluster of more than one (Config.KafkaBrokers %d, %d running)", s.cfg.KafkaBrokers, i)
	}
	if err := os.RemoveAll(s.cfg.kafkaDir(i)); err != nil {
		return 0, err
	}
	p, err := s.startKafkaNode(i)
	if err != nil {
		return 0, err
	}
	s.KafkaBrokers = append(s.KafkaBrokers, p)
	s.procs = append(s.procs, p)
	if err := s.waitKafkaListeners(i); err != nil {
		return 0, err
	}
	return i, s.WaitKafkaBroker(i, false, kafkaStartTimeout)
}

// stopKafkaCluster stops every node at once. One by one, the last nodes would have lost their
// quorum: a broker's controlled shutdown then waits for a controller that is gone until it is
// killed (stopGrace). At once, every broker shuts down while the controllers still run.
func (s *Stack) stopKafkaCluster() {
	var wg sync.WaitGroup
	for _, p := range s.KafkaBrokers {
		wg.Go(func() { p.stop(stopGrace) })
	}
	wg.Wait()
}

func (s *Stack) kafkaBroker(i int) (*process, error) {
	if i < 0 || i >= len(s.KafkaBrokers) {
		return nil, fmt.Errorf("no Kafka broker %d: the stack runs %d", i, len(s.KafkaBrokers))
	}
	return s.KafkaBrokers[i], nil
}
