package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// What a tenant may do, with Kafka's own admin tools (kafka-topics.sh and kafka-configs.sh:
// the Java Admin API) through the gateway's plaintext listener, where the broker sees the
// gateway and not the tenant. acme (client.id acme-*) may delete and reconfigure its own
// topics (policies/acme.yaml: acme.*), not globex's, and may not touch the broker's quotas.
// What happened is checked on the broker directly.
func TestKafkaAdminRequestsAreAuthorizedPerTenant(t *testing.T) {
	theirs, ours := "globex-authz-orders", "acme.authz-orders"
	direct := directAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{theirs, ours} {
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			t.Fatal(err)
		}
	}
	exists := func(topic string) bool {
		t.Helper()
		topics, err := direct.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return topics.Has(topic)
	}

	out, err := kafkaTool(t, "acme-admin", "kafka-topics.sh", "--delete", "--topic", theirs)
	if err == nil || !strings.Contains(out, "TopicAuthorizationException") {
		t.Errorf("acme deleting globex's topic: want TopicAuthorizationException, got %v:\n%s", err, out)
	}
	if !exists(theirs) {
		t.Errorf("globex's topic %s is gone", theirs)
	}

	out, err = kafkaTool(t, "acme-admin", "kafka-configs.sh", "--alter", "--entity-type", "topics", "--entity-name", theirs,
		"--add-config", "retention.ms=1")
	if err == nil || !strings.Contains(out, "TopicAuthorizationException") {
		t.Errorf("acme setting globex's retention: want TopicAuthorizationException, got %v:\n%s", err, out)
	}
	if v := topicConfig(t, direct, theirs, "retention.ms"); v == "1" {
		t.Errorf("globex's topic has retention.ms=1")
	}

	out, err = kafkaTool(t, "acme-admin", "kafka-configs.sh", "--alter", "--entity-type", "clients", "--entity-default",
		"--add-config", "producer_byte_rate=1")
	if err == nil || !strings.Contains(out, "ClusterAuthorizationException") || !strings.Contains(out, "LimitPolicy") {
		t.Errorf("acme setting the broker's default client quota: want ClusterAuthorizationException naming LimitPolicy, got %v:\n%s", err, out)
	}
	quotas, err := direct.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(quotas) > 0 {
		t.Errorf("the broker has client quotas now: %+v", quotas)
	}

	// Granted: acme's own topic, reconfigured then deleted.
	if out, err := kafkaTool(t, "acme-admin", "kafka-configs.sh", "--alter", "--entity-type", "topics", "--entity-name", ours,
		"--add-config", "retention.ms=3600000"); err != nil {
		t.Errorf("acme reconfiguring its own topic: %v\n%s", err, out)
	}
	if v := topicConfig(t, direct, ours, "retention.ms"); v != "3600000" {
		t.Errorf("acme's topic retention.ms = %q, want 3600000", v)
	}
	if out, err := kafkaTool(t, "acme-admin", "kafka-topics.sh", "--delete", "--topic", ours); err != nil {
		t.Errorf("acme deleting its own topic: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for exists(ours) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if exists(ours) {
		t.Errorf("acme's own topic %s was not deleted", ours)
	}

	// globex's own traffic is unaffected.
	if n, errs := produceEach(t, "globex-authz", theirs, 5, 10); n != 5 {
		t.Errorf("globex producing to its topic after acme's attempts: %d of 5 acknowledged: %v", n, errs)
	}
	_, _ = direct.DeleteTopics(ctx, theirs)
}

// kafkaTools are the classes Kafka's command-line tools run (.tools/kafka has the jars, not the
// scripts, which only start these).
var kafkaTools = map[string]string{
	"kafka-topics.sh":  "org.apache.kafka.tools.TopicCommand",
	"kafka-configs.sh": "kafka.admin.ConfigCommand",
}

// kafkaTool runs one of Kafka's command-line tools against the gateway's plaintext listener
// with the given client.id, returning what it printed.
func kafkaTool(t *testing.T, clientID, tool string, args ...string) (string, error) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(config, []byte("client.id="+clientID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-Xmx256m", "-Dorg.apache.logging.log4j.level=WARN",
		"-cp", filepath.Join(root, ".tools/kafka/libs/*"), kafkaTools[tool],
		"--bootstrap-server", addr(ports.Kafka), "--command-config", config}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// directAdmin is an admin client of the broker's own listener, as the baseline user.
func directAdmin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(localstack.DirectKafka(addr(ports.KafkaDirect))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// topicConfig reads one config of a topic from the broker.
func topicConfig(t *testing.T, admin *kadm.Client, topic, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", topic, err))
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c.MaybeValue()
		}
	}
	return ""
}
