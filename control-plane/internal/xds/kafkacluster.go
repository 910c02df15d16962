package xds

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/discovery"
)

// In front of a Kafka cluster the gateway discovers (docs/kafka.md "In front of a Kafka
// cluster"), a broker's gateway port follows from its node id: node n of a listener kind is at
// the first port + (n − first node id)·stride, on every replica alike, so no replica needs to
// know what another told a client (Kroxylicious' portIdentifiesNode). Every node id of the
// range has its listener from the start; the upstream behind it (a cluster named for the node)
// exists once the broker has been discovered (internal/discovery), and until then the filter
// withholds the node from every response. Listeners never change as brokers come and go: only
// clusters do, so no discovery drains a listener.

// KafkaCluster is one listener kind (plaintext, SASL, TLS…) of a discovered Kafka cluster.
type KafkaCluster struct {
	// Name names its listeners, upstreams and filter chain.
	Name string
	// Bootstrap lists brokers (comma-separated host:port) that the bootstrap listener Listen
	// forwards to, balanced and health-checked: where clients first ask, since a node's
	// listener reaches its broker only once discovered.
	Bootstrap string
	Listen    string
	// Brokers is the host and port of FirstNode's listener.
	Brokers string
	// Advertise is the host and port clients are told for FirstNode (default Brokers): the
	// Service in front of every replica.
	Advertise           string
	FirstNode, LastNode int32
	// Stride is how many ports apart consecutive node ids are (0 or 1: adjacent; the local
	// stack interleaves its replicas).
	Stride      int
	Downstream  Downstream
	UpstreamTLS bool
}

// kafkaClusterName is what a name may be: it goes into listener, cluster and chain names.
var kafkaClusterName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,30}$`)

// maxKafkaNodes matches the filter's bound (core/src/kafka/brokers.rs MAX_NODES).
const maxKafkaNodes = 1024

// Chain is the filter chain name of every listener of the cluster kind: the filter reads it to
// know which range a connection's responses are rewritten with.
func (c KafkaCluster) Chain() string { return "weighstation-kafka-" + c.Name }

func (c KafkaCluster) stride() int { return max(c.Stride, 1) }

func (c KafkaCluster) advertise() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	return c.Brokers
}

// Range is the node ids the cluster kind has ports for, as discovery checks brokers.
func (c KafkaCluster) Range() discovery.Range {
	return discovery.Range{Chain: c.Chain(), First: c.FirstNode, Last: c.LastNode}
}

// nodeAddress is node n's address from the first node's (host:port).
func (c KafkaCluster) nodeAddress(first string, n int32) (string, error) {
	host, port, err := splitHostPort(first)
	if err != nil {
		return "", err
	}
	p := int(port) + int(n-c.FirstNode)*c.stride()
	if p > 65535 {
		return "", fmt.Errorf("node id %d's port %d is past 65535", n, p)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

func (c KafkaCluster) check() error {
	what := "--kafka-cluster " + c.Name
	switch {
	case !kafkaClusterName.MatchString(c.Name):
		return fmt.Errorf("--kafka-cluster name %q: lower-case letters, digits, - and _, at most 31", c.Name)
	case c.FirstNode < 0 || c.LastNode < c.FirstNode || c.LastNode-c.FirstNode >= maxKafkaNodes:
		return fmt.Errorf("%s: nodes %d-%d: need 0 <= first <= last, at most %d ids", what, c.FirstNode, c.LastNode, maxKafkaNodes)
	case c.Brokers == "":
		return fmt.Errorf("%s: brokers= (the first node's listener) is required", what)
	case c.Listen == "" || c.Bootstrap == "":
		// A node's listener reaches its broker only once a response has named it: clients
		// need somewhere to ask first.
		return fmt.Errorf("%s: listen= and bootstrap= are required: the bootstrap listener and the brokers it forwards to", what)
	}
	for _, first := range []string{c.Brokers, c.advertise()} {
		if _, err := c.nodeAddress(first, c.LastNode); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// checkKafkaClusters reports a cluster that is unusable, or two that share a name or a port.
func checkKafkaClusters(cs []KafkaCluster) error {
	names := map[string]bool{}
	ports := map[string]string{}
	claim := func(addr, what string) error {
		if other, ok := ports[addr]; ok {
			return fmt.Errorf("%s and %s both listen on %s", what, other, addr)
		}
		ports[addr] = what
		return nil
	}
	for _, c := range cs {
		if err := c.check(); err != nil {
			return err
		}
		if names[c.Name] {
			return fmt.Errorf("--kafka-cluster %s is given twice", c.Name)
		}
		names[c.Name] = true
		if err := claim(c.Listen, "--kafka-cluster "+c.Name+" listen"); err != nil {
			return err
		}
		for n := c.FirstNode; n <= c.LastNode; n++ {
			addr, _ := c.nodeAddress(c.Brokers, n)
			if err := claim(addr, fmt.Sprintf("--kafka-cluster %s node %d", c.Name, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// moved is the cluster kind on a replica whose every port is offset higher.
func (c KafkaCluster) moved(move func(string) (string, error)) (KafkaCluster, error) {
	out := c
	var err error
	for _, a := range []*string{&out.Listen, &out.Brokers, &out.Advertise} {
		if *a, err = move(*a); err != nil {
			return c, err
		}
	}
	return out, nil
}

func (c KafkaCluster) nodeName(n int32) string { return fmt.Sprintf("kafka_%s_node_%d", c.Name, n) }

// specs are the cluster kind's listeners (bootstrap, and one per node id of the range) and
// upstreams (the bootstrap brokers, and each fronted node).
func (c KafkaCluster) specs(fronted map[int32]string) ([]listenerSpec, []clusterSpec, error) {
	name := "kafka_" + c.Name
	clusters := []clusterSpec{{name: name + "_bootstrap", upstream: c.Bootstrap, tls: c.UpstreamTLS, seeds: true}}
	listeners := []listenerSpec{{proto: compile.Kafka, name: name, listen: c.Listen,
		cluster: name + "_bootstrap", downstream: c.Downstream, chain: c.Chain(), retries: true}}
	for n := c.FirstNode; n <= c.LastNode; n++ {
		addr, err := c.nodeAddress(c.Brokers, n)
		if err != nil {
			return nil, nil, err
		}
		listeners = append(listeners, listenerSpec{proto: compile.Kafka, name: c.nodeName(n), listen: addr,
			cluster: c.nodeName(n), downstream: c.Downstream, chain: c.Chain()})
		if up, ok := fronted[n]; ok {
			clusters = append(clusters, clusterSpec{name: c.nodeName(n), upstream: up, tls: c.UpstreamTLS})
		}
	}
	return listeners, clusters, nil
}

// filter is the cluster kind as the filter rewrites responses with it: the nodes handed out are
// those with an upstream.
func (c KafkaCluster) filter(upstreams, handedOut map[int32]string) (compile.KafkaCluster, error) {
	host, port, err := splitHostPort(c.advertise())
	if err != nil {
		return compile.KafkaCluster{}, err
	}
	nodes := make([]int32, 0, len(handedOut))
	for n := range handedOut {
		if _, ok := upstreams[n]; ok && n >= c.FirstNode && n <= c.LastNode {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	return compile.KafkaCluster{Chain: c.Chain(), FirstNode: c.FirstNode, LastNode: c.LastNode,
		AdvertiseHost: host, AdvertiseFirstPort: port, Stride: uint32(c.stride()), Fronted: nodes}, nil
}
