package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weighstation/weighstation/helm/node/node"
)

// The brokers are counted from this machine, around the gateway: pod addresses are routed to
// the node, and names resolve through the cluster's DNS Service, as a pod resolves them.
var clusterDNS = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, node.DNSServiceIP+":53")
}}

const (
	streamName = "ORDERS"
	topicName  = "orders"
	// shipmentsTopic has one partition: a producer's records travel on one connection.
	shipmentsTopic = "shipments"
)

// natsDirect connects to the first nats-server pod itself.
func natsDirect(t *testing.T) *nats.Conn {
	t.Helper()
	ips := podIPs(t, "nats", "app=nats")
	ip, ok := ips["nats-0"]
	if !ok {
		t.Fatalf("no nats-0 pod: %v", ips)
	}
	nc, err := nats.Connect("nats://"+ip+":4222", nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// createStream makes the stream the clients publish to, replicated on every server (at most 3).
func createStream(t *testing.T, servers int) {
	t.Helper()
	js, _ := jetstream.New(natsDirect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{"orders.>"}, Replicas: min(servers, 3), Duplicates: 2 * time.Minute,
	}); err != nil {
		t.Fatalf("stream %s: %v", streamName, err)
	}
}

// storedMsgIDs counts the stream's messages by Nats-Msg-Id, read from the servers themselves.
func storedMsgIDs(t *testing.T) map[string]int {
	t.Helper()
	js, _ := jetstream.New(natsDirect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d of %s: %v", seq, streamName, err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// kafkaDirect is a client of the brokers themselves (their bootstrap Service's name).
func kafkaDirect(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second, Resolver: clusterDNS}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("kafka-bootstrap.kafka.svc.cluster.local:9092"), kgo.Dialer(dialer.DialContext)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic makes the topic the clients produce to (3 partitions), and shipments (1).
func createTopic(t *testing.T, brokers int) {
	t.Helper()
	adm := kadm.NewClient(kafkaDirect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for topic, partitions := range map[string]int32{topicName: 3, shipmentsTopic: 1} {
		resp, err := adm.CreateTopic(ctx, partitions, int16(min(brokers, 3)), nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			t.Fatalf("topic %s: %v", topic, err)
		}
	}
}

// storedKeys counts the topic's records by key, read from the brokers themselves.
func storedKeys(t *testing.T) map[string]int {
	t.Helper()
	adm := kadm.NewClient(kafkaDirect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topicName)
	if err != nil {
		t.Fatal(err)
	}
	// Read each partition up to its end offset as it was listed.
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl := kafkaDirect(t, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	keys := map[string]int{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (partitions left: %v)", topicName, ctx.Err(), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			keys[string(r.Key)]++
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return keys
}

// ledger compares what a client had acknowledged with what the brokers hold of its ids:
// none lost (an acknowledged id missing), none duplicated (an id stored twice).
func ledger(t *testing.T, r report, stored map[string]int) (lost, duplicated int) {
	t.Helper()
	for seq := 1; seq <= r.Sent; seq++ {
		n := stored[fmt.Sprintf("%s-%d", r.Client, seq)]
		if n > 1 {
			duplicated += n - 1
		}
	}
	held := 0
	for id, n := range stored {
		if strings.HasPrefix(id, r.Client+"-") && n > 0 {
			held++
		}
	}
	// Every acknowledged message is stored; the given-up ones may or may not be.
	if held < r.Acked {
		lost = r.Acked - held
	}
	return lost, duplicated
}
