package e2ekafkacluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weighstation/weighstation/control-plane/internal/gatewaycheck"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// kind is one listener kind of the gateway in front of the cluster, as a client reaches it.
type kind struct {
	name      string
	bootstrap int // replica 0's bootstrap listener
	first     int // the kind's first gateway port (Ports.KafkaBroker…): node n's follows from it
	opts      func(t *testing.T) []kgo.Opt
}

// nodePort is replica 0's port for node n.
func (k kind) nodePort(n int32) int { return stack.KafkaGatewayPort(k.first, int(n)-1) }

// gatewayPorts are every port of the kind on every replica: all a client may be told of.
func (k kind) gatewayPorts() map[int]bool {
	out := map[int]bool{}
	for r := range replicas {
		out[k.bootstrap+r] = true
		for n := int32(1); n <= int32(kafkaBrokers+1); n++ {
			out[k.nodePort(n)+r] = true
		}
	}
	return out
}

func kinds() []kind {
	pool := func(t *testing.T) *x509.CertPool {
		pem, err := os.ReadFile(filepath.Join(stack.TLSDir(), "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(pem)
		return p
	}
	acme := kgo.SASL(plain.Auth{User: "acme-svc", Pass: "acme-svc-secret"}.AsMechanism())
	return []kind{
		{"gateway", ports.Kafka, ports.KafkaGatewayBroker, func(*testing.T) []kgo.Opt { return []kgo.Opt{kgo.ClientID("cluster-limited-addresses")} }},
		{"direct", ports.KafkaBroker, ports.KafkaBroker, func(*testing.T) []kgo.Opt { return localstack.DirectKafka("")[1:] }},
		{"sasl", ports.KafkaSASL, ports.KafkaSASL, func(*testing.T) []kgo.Opt { return []kgo.Opt{acme} }},
		{"ssl", ports.KafkaTLS, ports.KafkaTLS, func(t *testing.T) []kgo.Opt {
			pair, err := tls.LoadX509KeyPair(filepath.Join(stack.TLSDir(), "acme.crt"), filepath.Join(stack.TLSDir(), "acme.key"))
			if err != nil {
				t.Fatal(err)
			}
			return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool(t), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})}
		}},
		{"sasl_ssl", ports.KafkaSASLSSL, ports.KafkaSASLSSL, func(t *testing.T) []kgo.Opt {
			return []kgo.Opt{acme, kgo.DialTLSConfig(&tls.Config{RootCAs: pool(t), MinVersion: tls.VersionTLS12})}
		}},
	}
}

// client of a kind, through its bootstrap listener, at most at the given versions; the caller
// closes it (a tenant's connections are limited: the default tenant's to 10).
func (k kind) client(t *testing.T, versions *kversion.Versions) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr(k.bootstrap)), kgo.RetryTimeout(20 * time.Second)}, k.opts(t)...)
	if versions != nil {
		opts = append(opts, kgo.MaxVersions(versions))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// metadataBrokers is the broker list a client of the kind is told, by node id, once every
// running broker is in it (the gateway withholds a broker until it has discovered it).
func metadataBrokers(t *testing.T, k kind) map[int32]string {
	t.Helper()
	cl := k.client(t, nil)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		brokers := map[int32]string{}
		if err == nil {
			for _, b := range resp.Brokers {
				brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if len(brokers) == stack.KafkaBrokerCount() {
				return brokers
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: brokers %v (%v), want all %d", k.name, brokers, err, stack.KafkaBrokerCount())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// onlyGateway fails unless host:port is one of the kind's gateway addresses.
func onlyGateway(t *testing.T, k kind, what string, host string, port int32) {
	t.Helper()
	if host != "127.0.0.1" || !k.gatewayPorts()[int(port)] {
		t.Errorf("%s: %s names %s:%d, not the gateway", k.name, what, host, port)
	}
}

// Every response that names a broker, on every listener kind and at old and new versions, names
// the gateway: Metadata, DescribeCluster, FindCoordinator (groups and transactions), and the
// NodeEndpoints a broker that is not a partition's leader sends with its Produce answer
// (KIP-951). None names a broker's own address.
func TestEveryAddressCarryingResponseNamesTheGateway(t *testing.T) {
	topic := "addresses"
	createTopic(t, topic)
	for _, k := range kinds() {
		metadataBrokers(t, k) // discovered on this kind
		for _, v := range []*kversion.Versions{kversion.V0_11_0(), kversion.V2_4_0(), nil} {
			cl := k.client(t, v)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("%s: metadata: %v", k.name, err)
			}
			for _, b := range meta.Brokers {
				onlyGateway(t, k, "Metadata", b.Host, b.Port)
			}
			for _, key := range []struct {
				typ int8
				key string
			}{{0, "address-check-group"}, {1, "address-check-txn"}} {
				fc := kmsg.NewPtrFindCoordinatorRequest()
				fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = key.typ, key.key, []string{key.key}
				resp, err := fc.RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("%s: find coordinator: %v", k.name, err)
				}
				if len(resp.Coordinators) == 0 && kerr.ErrorForCode(resp.ErrorCode) == nil {
					onlyGateway(t, k, "FindCoordinator", resp.Host, resp.Port)
				}
				for _, c := range resp.Coordinators {
					if kerr.ErrorForCode(c.ErrorCode) == nil {
						onlyGateway(t, k, "FindCoordinator", c.Host, c.Port)
					}
				}
			}
			if v == nil {
				dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("%s: describe cluster: %v", k.name, err)
				}
				for _, b := range dc.Brokers {
					onlyGateway(t, k, "DescribeCluster", b.Host, b.Port)
				}
				if len(dc.Brokers) != stack.KafkaBrokerCount() {
					t.Errorf("%s: DescribeCluster lists %d brokers, want %d", k.name, len(dc.Brokers), stack.KafkaBrokerCount())
				}
				produceToAFollower(ctx, t, k, cl, meta, topic)
			}
			cancel()
			cl.Close()
		}
	}
}

// produceToAFollower sends a Produce for partition 0 to a broker that is not its leader: the
// broker answers NOT_LEADER_OR_FOLLOWER with the leader's endpoint (Produce v10+), which must
// name the gateway.
func produceToAFollower(ctx context.Context, t *testing.T, k kind, cl *kgo.Client, meta *kmsg.MetadataResponse, topic string) {
	t.Helper()
	var leader int32 = -1
	for _, mt := range meta.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			for _, p := range mt.Partitions {
				if p.Partition == 0 {
					leader = p.Leader
				}
			}
		}
	}
	var follower int32 = -1
	for _, b := range meta.Brokers {
		if b.NodeID != leader {
			follower = b.NodeID
		}
	}
	if leader < 0 || follower < 0 {
		t.Fatalf("%s: partition 0 of %s: leader %d, no follower among %v", k.name, topic, leader, meta.Brokers)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, gatewaycheck.OneRecordBatch([]byte("to a follower"), time.Now())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(follower)))
	if err != nil {
		t.Fatalf("%s: produce to follower %d: %v", k.name, follower, err)
	}
	code := resp.Topics[0].Partitions[0].ErrorCode
	if !errorsIs(code, kerr.NotLeaderForPartition) {
		t.Fatalf("%s: produce to follower %d answered %v, want NOT_LEADER_OR_FOLLOWER", k.name, follower, kerr.ErrorForCode(code))
	}
	if len(resp.Brokers) == 0 {
		t.Fatalf("%s: NOT_LEADER_OR_FOLLOWER at Produce v%d named no endpoint (KIP-951): nothing checked", k.name, resp.Version)
	}
	for _, b := range resp.Brokers {
		onlyGateway(t, k, "Produce NodeEndpoints", b.Host, b.Port)
		if b.NodeID == leader && int(b.Port) != k.nodePort(leader) {
			t.Errorf("%s: the leader %d at port %d, want %d", k.name, leader, b.Port, k.nodePort(leader))
		}
	}
}

func errorsIs(code int16, want *kerr.Error) bool { return kerr.ErrorForCode(code) == want }
