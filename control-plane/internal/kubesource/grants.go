package kubesource

import (
	"fmt"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// permitted says whether a LimitPolicy of namespace ns may define its tenant, claim every
// identity it names and grant every permission it states. The platform's own namespace needs
// no grant; any other needs one grant (or several together) covering the tenant, each identity
// and each permission pattern. why says what is missing.
func permitted(ns, platformNS string, lp *policy.LimitPolicy, gd *policy.GatewayDefaults) (ok bool, why string) {
	if ns == platformNS {
		return true, ""
	}
	var covering []policy.Grant
	for _, g := range gd.Grants {
		if matchAny(g.Namespaces, ns) && matchAny(g.Tenants, lp.Tenant) {
			covering = append(covering, g)
		}
	}
	if len(covering) == 0 {
		return false, fmt.Sprintf("no grant in GatewayDefaults %q lets namespace %q define tenant %q", gd.Name, ns, lp.Tenant)
	}
	id := lp.Identify
	oauthClaims := []string{}
	if id.KafkaOAuthClaim != "" && id.KafkaOAuthClaim != "sub" {
		oauthClaims = append(oauthClaims, id.KafkaOAuthClaim)
	}
	for _, claim := range []struct {
		what    string
		values  []string
		granted func(policy.Grant) []string
		match   func([]string, string) bool
	}{
		{"NATS user", id.NATSUsers, func(g policy.Grant) []string { return g.NATSUsers }, matchAny},
		{"NATS nkey", id.NATSNkeys, func(g policy.Grant) []string { return g.NATSNkeys }, matchAny},
		{"NATS account", id.NATSAccounts, func(g policy.Grant) []string { return g.NATSAccounts }, matchAny},
		{"SASL principal", id.KafkaSASLPrincipals, func(g policy.Grant) []string { return g.SASLPrincipals }, matchAny},
		{"client.id prefix", id.KafkaClientIDPrefixes, func(g policy.Grant) []string { return g.ClientIDPrefixes }, withinPrefix},
		// A principal is matched against the token claim oauthClaim names: another claim than
		// the default would match other clients' tokens to a granted principal.
		{"OAUTHBEARER claim", oauthClaims, func(g policy.Grant) []string { return g.OAuthClaims }, matchAny},
		{"certificate subject", id.TLSSubjects, func(g policy.Grant) []string { return g.TLSSubjects }, matchAny},
		{"certificate SAN", id.TLSSANs, func(g policy.Grant) []string { return g.TLSSANs }, matchAny},
		// A pattern is granted when every name it matches is one a granted pattern matches:
		// it is granted, or starts with the prefix of one ending in *.
		{"permission to produce to", lp.Permissions.KafkaProduce.Values, func(g policy.Grant) []string { return g.Permissions.KafkaProduce.Values }, matchAny},
		{"permission to consume from", lp.Permissions.KafkaConsume.Values, func(g policy.Grant) []string { return g.Permissions.KafkaConsume.Values }, matchAny},
		{"permission to use consumer groups", lp.Permissions.KafkaGroups.Values, func(g policy.Grant) []string { return g.Permissions.KafkaGroups.Values }, matchAny},
		{"permission to use transactional ids", lp.Permissions.KafkaTransactionalIDs.Values, func(g policy.Grant) []string { return g.Permissions.KafkaTransactionalIDs.Values }, matchAny},
		{"permission to create topics", lp.Permissions.KafkaCreateTopics.Values, func(g policy.Grant) []string { return g.Permissions.KafkaCreateTopics.Values }, matchAny},
		{"permission to delete topics", lp.Permissions.KafkaDeleteTopics.Values, func(g policy.Grant) []string { return g.Permissions.KafkaDeleteTopics.Values }, matchAny},
		{"permission to alter the configs of topics", lp.Permissions.KafkaAlterTopicConfigs.Values, func(g policy.Grant) []string { return g.Permissions.KafkaAlterTopicConfigs.Values }, matchAny},
		{"permission to delete groups", lp.Permissions.KafkaDeleteGroups.Values, func(g policy.Grant) []string { return g.Permissions.KafkaDeleteGroups.Values }, matchAny},
		{"cluster permission", lp.Permissions.KafkaCluster.Values, func(g policy.Grant) []string { return g.Permissions.KafkaCluster.Values }, matchAny},
		{"permission to publish to", lp.Permissions.NATSPublish.Values, func(g policy.Grant) []string { return g.Permissions.NATSPublish.Values }, withinSubjects},
		{"permission to subscribe to", lp.Permissions.NATSSubscribe.Values, func(g policy.Grant) []string { return g.Permissions.NATSSubscribe.Values }, withinSubjects},
		{"permission to administer streams", lp.Permissions.NATSJetStreamAdmin.Values, func(g policy.Grant) []string { return g.Permissions.NATSJetStreamAdmin.Values }, matchAny},
	} {
		for _, v := range claim.values {
			found := false
			for _, g := range covering {
				if claim.match(claim.granted(g), v) {
					found = true
					break
				}
			}
			if !found {
				return false, fmt.Sprintf("no grant in GatewayDefaults %q lets namespace %q claim %s %q", gd.Name, ns, claim.what, v)
			}
		}
	}
	// A grant that bounds a list whose default is every name (the subjects its namespaces'
	// tenants may publish or subscribe to, the topics they may produce to, consume from or
	// create, the groups and transactional ids they may use) binds a policy that states none
	// too: left out, the list would be every name.
	for _, bound := range []struct {
		what   string // what the grant bounds
		field  string
		stated bool
		bounds func(policy.Grant) bool
	}{
		{"subjects", "spec.permissions.nats.publish", lp.Permissions.NATSPublish.Set, func(g policy.Grant) bool { return g.Permissions.NATSPublish.Set }},
		{"subjects", "spec.permissions.nats.subscribe", lp.Permissions.NATSSubscribe.Set, func(g policy.Grant) bool { return g.Permissions.NATSSubscribe.Set }},
		{"topics", "spec.permissions.kafka.produce", lp.Permissions.KafkaProduce.Set, func(g policy.Grant) bool { return g.Permissions.KafkaProduce.Set }},
		{"topics", "spec.permissions.kafka.consume", lp.Permissions.KafkaConsume.Set, func(g policy.Grant) bool { return g.Permissions.KafkaConsume.Set }},
		{"consumer groups", "spec.permissions.kafka.groups", lp.Permissions.KafkaGroups.Set, func(g policy.Grant) bool { return g.Permissions.KafkaGroups.Set }},
		{"transactional ids", "spec.permissions.kafka.transactionalIds", lp.Permissions.KafkaTransactionalIDs.Set, func(g policy.Grant) bool { return g.Permissions.KafkaTransactionalIDs.Set }},
		{"topics", "spec.permissions.kafka.createTopics", lp.Permissions.KafkaCreateTopics.Set, func(g policy.Grant) bool { return g.Permissions.KafkaCreateTopics.Set }},
	} {
		for _, g := range covering {
			if bound.bounds(g) && !bound.stated {
				return false, fmt.Sprintf("a grant in GatewayDefaults %q bounds the %s of namespace %q: state %s within it", gd.Name, bound.what, ns, bound.field)
			}
		}
	}
	return true, ""
}

// matchAny: v is one of the granted values, or starts with one that ends in *.
func matchAny(granted []string, v string) bool {
	for _, g := range granted {
		if g == v || strings.HasSuffix(g, "*") && strings.HasPrefix(v, strings.TrimSuffix(g, "*")) {
			return true
		}
	}
	return false
}

// withinPrefix: a claimed client.id prefix is granted when every client id it matches is one
// a granted prefix matches, that is, when it starts with a granted prefix.
func withinPrefix(granted []string, prefix string) bool {
	for _, g := range granted {
		if strings.HasPrefix(prefix, strings.TrimSuffix(g, "*")) {
			return true
		}
	}
	return false
}

// withinSubjects: a subject pattern is granted when every subject it matches is one a granted
// pattern matches (token by token: a granted * covers a token or *, a granted final > the
// rest).
func withinSubjects(granted []string, pattern string) bool {
	for _, g := range granted {
		if coversSubject(strings.Split(g, "."), strings.Split(pattern, ".")) {
			return true
		}
	}
	return false
}

func coversSubject(grant, p []string) bool {
	for i, g := range grant {
		if i >= len(p) {
			return false
		}
		switch {
		case g == ">":
			return true
		case g == "*" && p[i] != ">":
		case g == p[i] && p[i] != "*" && p[i] != ">":
		default:
			return false
		}
	}
	return len(grant) == len(p)
}
