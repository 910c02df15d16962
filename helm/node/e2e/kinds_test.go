package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weighstation/weighstation/helm/node/cluster"
)

// clientKind is a client users run, as a pod of team-a, offering its tenant 4× its limit over
// one connection for a while: the Envoy pod that connection reached holds it to the limit.
type clientKind struct {
	name, protocol, tenant string
	command                []string
	env                    []string
}

func clientKinds() []clientKind {
	nats := "nats://" + cluster.EnvoyHost() + ":4222"
	kafka := cluster.EnvoyHost() + ":9092"
	rate := 4 * cluster.OrdersRate
	return []clientKind{
		// natscli stops at its first refusal, so it publishes as shipments (delayed, not refused:
		// TCP holds it to the limit once Envoy's buffer of its messages is full). --password:
		// natscli takes a --user without one as a token.
		{"shipments-natscli", "nats", "shipments", []string{"nats", "--server", nats, "--user", "shipments", "--password", "unused",
			"pub", "shipments.cli", "{{ Random 200 200 }}", "--count", fmt.Sprint(rate * 20), "--sleep", fmt.Sprintf("%dms", 1000/rate), "--quiet"}, nil},
		{"orders-natsgo", "nats", "orders", []string{"/usr/local/bin/weighstation-k8s-client", "--name", "orders-natsgo", "--mode", "nats-pub",
			"--url", nats, "--user", "orders", "--subject", "orders.go", "--rate", fmt.Sprint(rate), "--duration", "20s"}, nil},
		// Kafka producers as shipments (delayed: a producer backs off after a refusal and would
		// offer less than the limit), to a topic of one partition: one connection carries its
		// records. Batches of about 25 records: the admitted count moves a batch at a time, so
		// a batch is at most 2.5% of the 10-second window's 1,000.
		{"shipments-java", "kafka", "shipments", []string{"java", "ProducerProbe", kafka, shipmentsTopic, "shipments-java", fmt.Sprint(rate), "20", "64"},
			[]string{"PROBE_PROPS=batch.size=2048\ndelivery.timeout.ms=60000"}},
		{"shipments-franz", "kafka", "shipments", []string{"/usr/local/bin/weighstation-k8s-client", "--name", "shipments-franz", "--mode", "kafka",
			"--bootstrap", kafka, "--topic", shipmentsTopic, "--rate", fmt.Sprint(rate), "--duration", "20s", "--give-up", "30s", "--batch-bytes", "2048"}, nil},
	}
}

// everyClientKind: natscli, nats.go, Kafka's Java producer and franz-go, one at a time, each
// held to orders' limit by the Envoy pod it reached (±5%, from that pod's metrics over a
// steady window); then Kafka's Java consumer reads the topic through the gateway to its end.
func everyClientKind(t *testing.T) {
	for _, c := range clientKinds() {
		t.Run(c.name, func(t *testing.T) {
			names := []string{"weighstation_messages_accepted", "weighstation_messages_refused", "weighstation_messages_delayed"}
			key := func(m string) string { return fmt.Sprintf("%s{%s,%s}", m, c.protocol, c.tenant) }
			pod := startPod(t, c.name, c.command, c.env)
			time.Sleep(7 * time.Second) // connected, its first burst spent
			b0, t0 := envoyCounters(t, names...), time.Now()
			time.Sleep(10 * time.Second)
			b1, t1 := envoyCounters(t, names...), time.Now()
			out := pod.done(t, 2*time.Minute)
			limited := 0
			for envoy := range b1 {
				accepted := (b1[envoy][key("weighstation_messages_accepted")] - b0[envoy][key("weighstation_messages_accepted")]) / t1.Sub(t0).Seconds()
				refused := b1[envoy][key("weighstation_messages_refused")] - b0[envoy][key("weighstation_messages_refused")]
				delayed := b1[envoy][key("weighstation_messages_delayed")] - b0[envoy][key("weighstation_messages_delayed")]
				if refused+delayed == 0 {
					continue
				}
				limited++
				t.Logf("%s through %s: admitted %.1f/s (limit %d/s), %.0f refused, %.0f delayed", c.name, envoy, accepted, cluster.OrdersRate, refused, delayed)
				if accepted < 0.95*cluster.OrdersRate || accepted > 1.05*cluster.OrdersRate {
					t.Errorf("%s through %s admitted %.1f/s, not orders' limit %d/s ±5%%", c.name, envoy, accepted, cluster.OrdersRate)
				}
			}
			if limited != 1 {
				t.Errorf("%s, one connection 4× over the limit, was held back by %d Envoy pods; output:\n%s", c.name, limited, cluster.Tail(out, 2000))
			}
		})
	}
	t.Run("the Java consumer reads the topic through the gateway", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(kafkaDirect(t)).ListEndOffsets(ctx, topicName)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		out := startPod(t, "payments-java-consumer", []string{"java", "ConsumerProbe", cluster.EnvoyHost() + ":9092", topicName,
			"payments-readers", "payments-java-consumer", fmt.Sprint(total), "10", "120"}, nil).done(t, 3*time.Minute)
		var got struct {
			Records [][]any `json:"records"`
		}
		line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("ConsumerProbe's output: %v\n%s", err, cluster.Tail(out, 2000))
		}
		t.Logf("the Java consumer read %d of the topic's %d records through the gateway", len(got.Records), total)
		if int64(len(got.Records)) != total {
			t.Errorf("the Java consumer read %d records, the topic holds %d", len(got.Records), total)
		}
	})
}
