package policy

import (
	"reflect"
	"strings"
	"testing"
)

func withPermissions(permissions string) string {
	return acme("    rate: { messagesPerSecond: 10 }\n") + "  permissions:\n" + permissions
}

func TestPermissionsResolveFromPolicyThenDefaultsThenNone(t *testing.T) {
	defaults := strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n",
		"  defaultTenant: anonymous\n  defaultPermissions:\n    kafka: { deleteGroups: [\"*\"], cluster: [ElectLeaders], consume: [\"shared.*\"], createTopics: [] }\n", 1)
	set, err := parse(map[string]string{
		"a.yaml": defaults,
		"b.yaml": withPermissions("    kafka:\n      deleteTopics: [\"acme.*\", \"acme-?\"]\n      cluster: []\n      produce: [\"acme.*\"]\n      consume: []\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]EffectivePermissions{}
	for _, tn := range set.Tenants {
		byName[tn.Policy.Tenant] = tn.Permissions
	}
	want := EffectivePermissions{KafkaDeleteTopics: []string{"acme.*", "acme-?"}, KafkaDeleteGroups: []string{"*"}, KafkaCluster: []string{},
		KafkaProduce: []string{"acme.*"}, KafkaConsume: []string{}, KafkaCreateTopics: []string{}}
	if got := byName["acme"]; !reflect.DeepEqual(got, want) {
		t.Errorf("acme: %+v, want its own deleteTopics and produce, the default's deleteGroups and createTopics ([]: none), "+
			"no cluster operation and no topic to consume from ([] grants nothing, over the default's), "+
			"and groups and transactionalIds nil (every name), %+v", got, want)
	}
	if got := byName["anonymous"]; !reflect.DeepEqual(got, EffectivePermissions{KafkaDeleteGroups: []string{"*"}, KafkaCluster: []string{"ElectLeaders"},
		KafkaConsume: []string{"shared.*"}, KafkaCreateTopics: []string{}}) {
		t.Errorf("anonymous states none: the defaults', got %+v", got)
	}
}

func TestBadPermissionsAreNamedByFileLineAndField(t *testing.T) {
	many := make([]string, maxPatterns+1)
	for i := range many {
		many[i] = `"t` + itoa(i) + `"`
	}
	long := strings.Repeat("x", 250)
	for _, c := range []struct {
		name, permissions, want string
	}{
		{"a pattern no topic name matches", "    kafka: { deleteTopics: [\"orders/eu\"] }\n",
			`b.yaml:13:29: spec.permissions.kafka.deleteTopics[0]: "orders/eu" matches no topic`},
		{"an unknown cluster operation", "    kafka: { cluster: [AlterEverything] }\n",
			`b.yaml:13:24: spec.permissions.kafka.cluster[0]: "AlterEverything" is not a cluster operation (AlterClientQuotas, AlterBrokerConfigs,`},
		{"an unknown field", "    kafka: { deleteTopic: [\"x\"] }\n",
			"b.yaml:13:14: spec.permissions.kafka.deleteTopic: unknown field (known: alterTopicConfigs, cluster, consume, createTopics, deleteGroups, deleteTopics, groups, produce, transactionalIds)"},
		{"a topic to produce to no topic name matches", "    kafka: { produce: [\"orders/eu\"] }\n",
			`b.yaml:13:24: spec.permissions.kafka.produce[0]: "orders/eu" matches no topic`},
		{"a topic to consume from no topic name matches", "    kafka: { consume: [\"ok\", \"a b\"] }\n",
			`b.yaml:13:30: spec.permissions.kafka.consume[1]: "a b" matches no topic`},
		{"an empty group", "    kafka: { groups: [\"\"] }\n",
			`b.yaml:13:23: spec.permissions.kafka.groups[0]: "" must be 1 to 249 characters`},
		{"a transactional id too long", "    kafka: { transactionalIds: [\"" + long + "\"] }\n",
			`b.yaml:13:33: spec.permissions.kafka.transactionalIds[0]: "` + long + `" must be 1 to 249 characters`},
		{"a topic to create no topic name matches", "    kafka: { createTopics: [\"*/x\"] }\n",
			`b.yaml:13:29: spec.permissions.kafka.createTopics[0]: "*/x" matches no topic`},
		{"too many topics to produce to", "    kafka: { produce: [" + strings.Join(many, ", ") + "] }\n",
			"b.yaml:13:23: spec.permissions.kafka.produce: has 257 entries, at most 256"},
		{"a subject pattern nats-server would refuse", "    nats: { publish: [\"orders.>.eu\"] }\n",
			`b.yaml:13:23: spec.permissions.nats.publish[0]: "orders.>.eu" is not a subject pattern: it '>' may only be the last token`},
		{"a stream pattern no stream name matches", "    nats: { jetStreamAdmin: [\"ORDERS.EU\"] }\n",
			`b.yaml:13:30: spec.permissions.nats.jetStreamAdmin[0]: "ORDERS.EU" matches no stream`},
		{"too many patterns", "    kafka: { deleteGroups: [" + strings.Join(many, ", ") + "] }\n",
			"b.yaml:13:28: spec.permissions.kafka.deleteGroups: has 257 entries, at most 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(map[string]string{"a.yaml": defaultsDoc, "b.yaml": withPermissions(c.permissions)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
