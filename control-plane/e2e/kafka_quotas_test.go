package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// DescribeClientQuotas through the gateway (KIP-546), with Kafka's own tools: a tenant sees its
// own entities only, with the gateway's limits where the gateway has one. The broker holds a
// producer quota for an acme client id and one for a globex client id; acme's client sees its
// own with acme's rate.bytesPerSecond (8 MiB/s, policies/acme.yaml) and consume.bytesPerSecond
// (32 MiB/s) in place of the broker's, and never globex's.
func TestKafkaClientQuotasShowTheCallersOwnGatewayLimits(t *testing.T) {
	direct := directAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set := func(client string, value float64, remove bool) {
		t.Helper()
		alter := kadm.AlterClientQuotaEntry{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &client}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: value, Remove: remove}},
		}
		if _, err := direct.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{alter}); err != nil {
			t.Fatal(err)
		}
	}
	set("acme-quotas", 999, false)
	set("globex-quotas", 1234, false)
	defer set("acme-quotas", 0, true)
	defer set("globex-quotas", 0, true)

	out, err := kafkaTool(t, "acme-quotas", "kafka-configs.sh", "--describe", "--entity-type", "clients")
	if err != nil {
		t.Fatalf("kafka-configs.sh --describe: %v\n%s", err, out)
	}
	t.Logf("kafka-configs.sh --describe --entity-type clients, as acme-quotas:\n%s", out)
	if !strings.Contains(out, "'acme-quotas'") || !strings.Contains(out, "producer_byte_rate=8388608.0") ||
		!strings.Contains(out, "consumer_byte_rate=3.3554432E7") || strings.Contains(out, "globex") || strings.Contains(out, "999") {
		t.Errorf("acme's client sees: want its own client id with producer_byte_rate=8388608.0 and consumer_byte_rate=3.3554432E7, nothing of globex's, not the broker's 999")
	}

	got := authzProbe(t, "acme-quotas", "quotas")["quotas"]
	t.Logf("Admin.describeClientQuotas(all), as acme-quotas: %s %s", got.outcome, got.detail)
	if got.outcome != "ok" || !strings.Contains(got.detail, "{client-id=acme-quotas}{consumer_byte_rate=3.3554432E7,producer_byte_rate=8388608.0}") ||
		strings.Contains(got.detail, "globex") {
		t.Errorf("Java Admin describeClientQuotas: %s %s; want acme-quotas with the gateway's limits only", got.outcome, got.detail)
	}
}
