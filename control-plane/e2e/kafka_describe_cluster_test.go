package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// DescribeCluster, what admin tools read the brokers from (Admin.describeCluster,
// kafka-cluster.sh), names the gateway, not the broker's own listener, in every version.
func TestKafkaDescribeClusterNamesTheGateway(t *testing.T) {
	for version := int16(0); version <= 2; version++ {
		brokers := describeCluster(t, addr(ports.KafkaBroker), version)
		if len(brokers) == 0 {
			t.Fatalf("v%d: no broker described", version)
		}
		for _, b := range brokers {
			if got := addr(int(b.Port)); b.Host != "127.0.0.1" || got != addr(ports.KafkaBroker) {
				t.Errorf("v%d: broker %d described at %s:%d, want the gateway %s", version, b.NodeID, b.Host, b.Port, addr(ports.KafkaBroker))
			}
		}
	}
	// The broker itself describes its own listener: what the gateway has to rewrite.
	for _, b := range describeCluster(t, addr(ports.KafkaDirect), 2) {
		if addr(int(b.Port)) != addr(ports.KafkaDirect) {
			t.Errorf("the broker describes broker %d at port %d, not its own listener: the test proves nothing", b.NodeID, b.Port)
		}
	}
}

// describeCluster sends DescribeCluster at version to at, as the baseline user.
func describeCluster(t *testing.T, at string, version int16) []kmsg.DescribeClusterResponseBroker {
	t.Helper()
	cl, err := kgo.NewClient(append(localstack.DirectKafka(at), kgo.MaxVersions(kversionsWithDescribeCluster(version)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = version
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeCluster v%d at %s: %v", version, at, err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("DescribeCluster v%d at %s: error %d", version, at, resp.ErrorCode)
	}
	return resp.Brokers
}

// kversionsWithDescribeCluster pins franz-go's DescribeCluster to version (it otherwise sends the
// highest the broker and it share).
func kversionsWithDescribeCluster(version int16) *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.DescribeCluster.Int16(), version)
	return v
}
