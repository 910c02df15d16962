package policy

import (
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Permissions is spec.permissions of a LimitPolicy, spec.defaultPermissions of the
// GatewayDefaults, or a grant's permissions: the Kafka data a tenant may touch, the
// destructive, config-altering and cluster-altering Kafka requests it may send, and the NATS
// subjects and streams it may use (docs/security.md). A list not Set is left out; an empty one
// that is Set grants nothing.
type Permissions struct {
	KafkaProduce           Patterns
	KafkaConsume           Patterns
	KafkaGroups            Patterns
	KafkaTransactionalIDs  Patterns
	KafkaCreateTopics      Patterns
	KafkaDeleteTopics      Patterns
	KafkaAlterTopicConfigs Patterns
	KafkaDeleteGroups      Patterns
	KafkaCluster           Patterns
	NATSPublish            Patterns
	NATSSubscribe          Patterns
	NATSJetStreamAdmin     Patterns
}

// Patterns is a list of names with * and ? (or cluster operations) as written.
type Patterns struct {
	Set    bool
	Values []string
	Pos    Pos
}

// KafkaClusterOps are the cluster-altering requests a policy grants by name
// (wasm-filter/core/src/kafka/authz/apis.rs ClusterOp).
var KafkaClusterOps = []string{
	"AlterClientQuotas", "AlterBrokerConfigs", "CreateAcls", "DeleteAcls", "AlterPartitionReassignments",
	"ElectLeaders", "AlterUserScramCredentials", "UpdateFeatures", "UnregisterBroker",
}

// EffectivePermissions are a tenant's grants after defaults: each list its policy's, else the
// GatewayDefaults', else the built-in: nil, which for the Kafka data lists (KafkaProduce,
// KafkaConsume, KafkaGroups, KafkaTransactionalIDs, KafkaCreateTopics) and for NATSPublish and
// NATSSubscribe is every name, and for the others none.
type EffectivePermissions struct {
	KafkaProduce           []string
	KafkaConsume           []string
	KafkaGroups            []string
	KafkaTransactionalIDs  []string
	KafkaCreateTopics      []string
	KafkaDeleteTopics      []string
	KafkaAlterTopicConfigs []string
	KafkaDeleteGroups      []string
	KafkaCluster           []string
	NATSPublish            []string
	NATSSubscribe          []string
	NATSJetStreamAdmin     []string
}

// maxPatterns bounds each list: the filter matches every pattern of a list per resource named.
const maxPatterns = 256

func (d *decoder) permissions(n *yaml.Node, path string) Permissions {
	var ps Permissions
	d.mapping(n, path, fields{
		"kafka": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"produce":           func(n *yaml.Node, p string) { ps.KafkaProduce = d.patterns(n, p, checkTopicPattern) },
				"consume":           func(n *yaml.Node, p string) { ps.KafkaConsume = d.patterns(n, p, checkTopicPattern) },
				"groups":            func(n *yaml.Node, p string) { ps.KafkaGroups = d.patterns(n, p, checkGroupPattern) },
				"transactionalIds":  func(n *yaml.Node, p string) { ps.KafkaTransactionalIDs = d.patterns(n, p, checkGroupPattern) },
				"createTopics":      func(n *yaml.Node, p string) { ps.KafkaCreateTopics = d.patterns(n, p, checkTopicPattern) },
				"deleteTopics":      func(n *yaml.Node, p string) { ps.KafkaDeleteTopics = d.patterns(n, p, checkTopicPattern) },
				"alterTopicConfigs": func(n *yaml.Node, p string) { ps.KafkaAlterTopicConfigs = d.patterns(n, p, checkTopicPattern) },
				"deleteGroups":      func(n *yaml.Node, p string) { ps.KafkaDeleteGroups = d.patterns(n, p, checkGroupPattern) },
				"cluster":           func(n *yaml.Node, p string) { ps.KafkaCluster = d.patterns(n, p, checkClusterOp) },
			})
		},
		"nats": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"publish":        func(n *yaml.Node, p string) { ps.NATSPublish = d.patterns(n, p, checkSubjectPattern) },
				"subscribe":      func(n *yaml.Node, p string) { ps.NATSSubscribe = d.patterns(n, p, checkSubjectPattern) },
				"jetStreamAdmin": func(n *yaml.Node, p string) { ps.NATSJetStreamAdmin = d.patterns(n, p, checkStreamPattern) },
			})
		},
	})
	return ps
}

// patterns decodes a list that may be empty (an empty list grants nothing, overriding a
// default), each value checked by check (a reason, or "").
func (d *decoder) patterns(n *yaml.Node, path string, check func(string) string) Patterns {
	ps := Patterns{Set: true, Pos: d.pos(n), Values: []string{}}
	if n.Kind != yaml.SequenceNode {
		d.c.add(d.pos(n), path, "must be a list of strings")
		return ps
	}
	if len(n.Content) > maxPatterns {
		d.c.add(d.pos(n), path, "has %d entries, at most %d", len(n.Content), maxPatterns)
	}
	for i, e := range n.Content {
		p := path + "[" + itoa(i) + "]"
		v := d.str(e, p)
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			continue
		}
		if why := check(v); why != "" {
			d.c.add(d.pos(e), p, "%q %s", v, why)
			continue
		}
		ps.Values = append(ps.Values, v)
	}
	return ps
}

func checkTopicPattern(v string) string {
	if why := kafkaGlobError(v); why != "" {
		return "matches no topic: it " + why
	}
	return ""
}

func checkSubjectPattern(v string) string {
	if why := natsSubjectPatternError(v); why != "" {
		return "is not a subject pattern: it " + why
	}
	return ""
}

// streamName: a JetStream stream name is printable, without '.', '*', '>' or white space
// (patterns add * and ?, where * and ? match within the name).
var streamName = regexp.MustCompile(`^[^.>\s/\\]{1,255}$`)

func checkStreamPattern(v string) string {
	if !streamName.MatchString(v) {
		return "matches no stream: a stream name has no '.', '>', '/', '\\' or white space"
	}
	return ""
}

// checkGroupPattern checks a consumer group or transactional id pattern: 1 to 249 characters.
func checkGroupPattern(v string) string {
	if v == "" || len(v) > 249 {
		return "must be 1 to 249 characters"
	}
	return ""
}

func checkClusterOp(v string) string {
	for _, op := range KafkaClusterOps {
		if v == op {
			return ""
		}
	}
	return "is not a cluster operation (" + strings.Join(KafkaClusterOps, ", ") + ")"
}

// resolvePermissions applies the defaults to a policy's permissions.
func resolvePermissions(own, dflt Permissions) EffectivePermissions {
	pick := func(own, dflt Patterns) []string {
		switch {
		case own.Set:
			return own.Values
		case dflt.Set:
			return dflt.Values
		}
		return nil
	}
	return EffectivePermissions{
		KafkaProduce:           pick(own.KafkaProduce, dflt.KafkaProduce),
		KafkaConsume:           pick(own.KafkaConsume, dflt.KafkaConsume),
		KafkaGroups:            pick(own.KafkaGroups, dflt.KafkaGroups),
		KafkaTransactionalIDs:  pick(own.KafkaTransactionalIDs, dflt.KafkaTransactionalIDs),
		KafkaCreateTopics:      pick(own.KafkaCreateTopics, dflt.KafkaCreateTopics),
		KafkaDeleteTopics:      pick(own.KafkaDeleteTopics, dflt.KafkaDeleteTopics),
		KafkaAlterTopicConfigs: pick(own.KafkaAlterTopicConfigs, dflt.KafkaAlterTopicConfigs),
		KafkaDeleteGroups:      pick(own.KafkaDeleteGroups, dflt.KafkaDeleteGroups),
		KafkaCluster:           pick(own.KafkaCluster, dflt.KafkaCluster),
		NATSPublish:            pick(own.NATSPublish, dflt.NATSPublish),
		NATSSubscribe:          pick(own.NATSSubscribe, dflt.NATSSubscribe),
		NATSJetStreamAdmin:     pick(own.NATSJetStreamAdmin, dflt.NATSJetStreamAdmin),
	}
}
