package xds

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

func saslCluster() KafkaCluster {
	return KafkaCluster{Name: "sasl", Listen: "0.0.0.0:9192", Bootstrap: "kafka-bootstrap:9093", Brokers: "0.0.0.0:9193",
		Advertise: "gw.example:9193", FirstNode: 1, LastNode: 3, UpstreamTLS: false}
}

// Every node id of the range has its listener from the start, to an upstream named for it that
// exists once the broker is discovered; the filter hands out only nodes with an upstream and
// handed out (SetKafkaNodes' lead); the bootstrap listener balances the bootstrap brokers.
func TestAKafkaClusterHasAListenerPerNodeIDAndUpstreamsForTheDiscovered(t *testing.T) {
	g := gateway
	g.KafkaClusters = []KafkaCluster{saslCluster()}
	g.KafkaNodes = map[string]map[int32]string{"weighstation-kafka-sasl": {1: "kafka-1.kafka:9093", 2: "kafka-2.kafka:9093"}}
	g.KafkaFronted = map[string]map[int32]string{"weighstation-kafka-sasl": {1: "kafka-1.kafka:9093", 3: "kafka-3.kafka:9093"}}
	res, err := Resources(g, examples(t), "1-a")
	if err != nil {
		t.Fatal(err)
	}
	listeners := map[string]string{} // name: "address:port → cluster"
	for _, r := range res[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		if !strings.HasPrefix(l.Name, "kafka_sasl") {
			continue
		}
		chain := l.FilterChains[0]
		if chain.Name != "weighstation-kafka-sasl" {
			t.Errorf("%s: chain %q", l.Name, chain.Name)
		}
		var proxy tcpproxyv3.TcpProxy
		if err := chain.Filters[len(chain.Filters)-1].GetTypedConfig().UnmarshalTo(&proxy); err != nil {
			t.Fatal(err)
		}
		listeners[l.Name] = l.Address.GetSocketAddress().GetAddress() + ":" + strconv.Itoa(int(l.Address.GetSocketAddress().GetPortValue())) + " → " + proxy.GetCluster()
	}
	want := map[string]string{
		"kafka_sasl":        "0.0.0.0:9192 → kafka_sasl_bootstrap",
		"kafka_sasl_node_1": "0.0.0.0:9193 → kafka_sasl_node_1",
		"kafka_sasl_node_2": "0.0.0.0:9194 → kafka_sasl_node_2",
		"kafka_sasl_node_3": "0.0.0.0:9195 → kafka_sasl_node_3",
	}
	if !reflect.DeepEqual(listeners, want) {
		t.Errorf("listeners %v, want %v", listeners, want)
	}
	clusters := map[string]bool{}
	for _, r := range res[resourcev3.ClusterType] {
		c := r.(*clusterv3.Cluster)
		clusters[c.Name] = true
		if c.Name == "kafka_sasl_bootstrap" && (c.LbPolicy != clusterv3.Cluster_ROUND_ROBIN || len(c.HealthChecks) != 1) {
			t.Errorf("the bootstrap brokers are not balanced and health-checked: %v", c)
		}
	}
	for name, want := range map[string]bool{"kafka_sasl_bootstrap": true, "kafka_sasl_node_1": true, "kafka_sasl_node_2": true, "kafka_sasl_node_3": false} {
		if clusters[name] != want {
			t.Errorf("upstream %s: %v, want %v", name, clusters[name], want)
		}
	}
	got := filterConfigFor(t, res, compile.Kafka).KafkaClusters
	wantFilter := []compile.KafkaCluster{{Chain: "weighstation-kafka-sasl", FirstNode: 1, LastNode: 3, AdvertiseHost: "gw.example",
		AdvertiseFirstPort: 9193, Stride: 1, Fronted: []int32{1}}}
	if !reflect.DeepEqual(got, wantFilter) {
		t.Errorf("filter %+v, want %+v: only node 1 has an upstream and is handed out", got, wantFilter)
	}
}

// A replica on a shared host (the local stack) has its ports moved; with stride = replicas
// they interleave, so no replica's port of one node is another's.
func TestKafkaClusterPortsMoveWithTheReplica(t *testing.T) {
	c := saslCluster()
	c.Advertise, c.Stride = "", 3
	g := gateway
	g.KafkaClusters = []KafkaCluster{c}
	seen := map[string]bool{}
	for r := range 3 {
		moved, err := g.WithPortOffset(r)
		if err != nil {
			t.Fatal(err)
		}
		mc := moved.KafkaClusters[0]
		for n := mc.FirstNode; n <= mc.LastNode; n++ {
			a, err := mc.nodeAddress(mc.Brokers, n)
			if err != nil {
				t.Fatal(err)
			}
			if seen[a] {
				t.Errorf("replica %d node %d on %s, another's", r, n, a)
			}
			seen[a] = true
		}
		fc, err := mc.filter(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fc.AdvertiseFirstPort != uint32(9193+r) || fc.Stride != 3 {
			t.Errorf("replica %d advertises from %d by %d", r, fc.AdvertiseFirstPort, fc.Stride)
		}
	}
}

func TestKafkaClusterConfigurationErrors(t *testing.T) {
	ok := saslCluster()
	cases := map[string]func(c *KafkaCluster){
		"name":               func(c *KafkaCluster) { c.Name = "SASL!" },
		"nodes 3-1":          func(c *KafkaCluster) { c.FirstNode, c.LastNode = 3, 1 },
		"at most 1024 ids":   func(c *KafkaCluster) { c.FirstNode, c.LastNode = 0, 1024 },
		"past 65535":         func(c *KafkaCluster) { c.Brokers = "0.0.0.0:65534" },
		"listen= and bootst": func(c *KafkaCluster) { c.Bootstrap = "" },
		"brokers=":           func(c *KafkaCluster) { c.Brokers = "" },
	}
	for want, mutate := range cases {
		c := ok
		mutate(&c)
		err := checkKafkaClusters([]KafkaCluster{c})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
	}
	other := ok
	other.Name, other.Listen, other.Brokers = "ssl", "0.0.0.0:9292", "0.0.0.0:9194"
	if err := checkKafkaClusters([]KafkaCluster{ok, other}); err == nil || !strings.Contains(err.Error(), "both listen on 0.0.0.0:9194") {
		t.Errorf("overlapping ranges: %v", err)
	}
	if err := checkKafkaClusters([]KafkaCluster{ok, ok}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("twice: %v", err)
	}
}
