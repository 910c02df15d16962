package kubesource

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// lp is a LimitPolicy object created at second `at`, with spec given as YAML.
func lp(ns, name string, gen int64, at int, spec string) object {
	return mkObject("LimitPolicy", ns, name, gen, at, spec)
}

func mkObject(kind, ns, name string, gen int64, at int, spec string) object {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(spec), &m); err != nil {
		panic(err)
	}
	return object{Kind: kind, Namespace: ns, Name: name, UID: kind + ns + name, Generation: gen, Created: epoch.Add(time.Duration(at) * time.Second), Spec: m}
}

const defaultsSpec = `
defaultTenant: base
grants:
  - namespaces: [team-a]
    tenants: [acme]
    identities: {natsUsers: ["acme-*"], clientIdPrefixes: ["acme-"]}
    permissions: {kafka: {deleteTopics: ["acme.*"]}}
  - namespaces: [team-b]
    tenants: [acme]
    identities: {natsUsers: ["acme-*"]}
    permissions: {nats: {publish: ["acme.>"], subscribe: ["acme.*", "_INBOX.>"]}}
  - namespaces: [team-k]
    tenants: [acme]
    identities: {clientIdPrefixes: ["acme-"]}
    permissions:
      kafka: {produce: ["acme.*"], consume: ["acme.*", "shared.news"], groups: ["acme-*"], transactionalIds: ["acme-tx-*"], createTopics: ["acme.*"]}
`

func defaults() []object {
	return []object{mkObject("GatewayDefaults", "", "default", 1, 0, defaultsSpec)}
}

var base = lp("platform", "base", 1, 0, `{tenant: base}`)

func TestEvaluate(t *testing.T) {
	for _, c := range []struct {
		name     string
		policies []object
		want     map[string]string // ref -> reason (and, after a colon, part of the message)
		tenants  string            // of the set in force
	}{
		{"a granted policy is accepted",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": "Accepted"}, "acme base"},
		{"an invalid policy is refused alone",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {inFlight: 0}}`)},
			map[string]string{"LimitPolicy team-a/acme": "Invalid:spec.limits.inFlight: inFlight must be at least 1"}, "base"},
		{"the older of two policies for one tenant keeps it",
			[]object{base, lp("team-a", "b-newer", 1, 2, `{tenant: acme, identify: {nats: {users: [acme-2]}}}`), lp("team-a", "z-older", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy team-a/z-older": "Accepted", "LimitPolicy team-a/b-newer": `Conflicted:tenant "acme" already has a LimitPolicy at LimitPolicy team-a/z-older`}, "acme base"},
		{"an identity claimed twice stays with the first",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`), lp("platform", "other", 1, 2, `{tenant: other, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy platform/other": `Conflicted:NATS user "acme-1" already identifies tenant "acme"`}, "acme base"},
		{"a tenant outside the grant",
			[]object{base, lp("team-a", "globex", 1, 1, `{tenant: globex, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy team-a/globex": `NotPermitted:lets namespace "team-a" define tenant "globex"`}, "base"},
		{"an identity outside the grant",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [globex]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": `NotPermitted:claim NATS user "globex"`}, "base"},
		{"a client.id prefix broader than the grant",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": `NotPermitted:claim client.id prefix "acme"`}, "base"},
		{"a permission within the grant",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, permissions: {kafka: {deleteTopics: ["acme.orders-*"]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": "Accepted"}, "acme base"},
		{"a topic pattern broader than the grant",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, permissions: {kafka: {deleteTopics: ["*"]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": `NotPermitted:claim permission to delete topics "*"`}, "base"},
		{"a cluster operation not granted",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, permissions: {kafka: {cluster: [AlterClientQuotas]}}}`)},
			map[string]string{"LimitPolicy team-a/acme": `NotPermitted:claim cluster permission "AlterClientQuotas"`}, "base"},
		{"subjects within the grant",
			[]object{base, lp("team-b", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, permissions: {nats: {publish: ["acme.orders.>"], subscribe: ["acme.*"]}}}`)},
			map[string]string{"LimitPolicy team-b/acme": "Accepted"}, "acme base"},
		{"a subject outside the grant",
			[]object{base, lp("team-b", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, permissions: {nats: {publish: ["acme.orders.>", "globex.>"], subscribe: ["acme.*"]}}}`)},
			map[string]string{"LimitPolicy team-b/acme": `NotPermitted:claim permission to publish to "globex.>"`}, "base"},
		{"no subjects stated where the grant bounds them",
			[]object{base, lp("team-b", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy team-b/acme": `NotPermitted:state spec.permissions.nats.publish within it`}, "base"},
		{"Kafka data within the grant",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: ["acme.orders"], consume: ["acme.*", "shared.news"], groups: ["acme-billing"], transactionalIds: ["acme-tx-?"], createTopics: ["acme.orders-*"]}}}`)},
			map[string]string{"LimitPolicy team-k/acme": "Accepted"}, "acme base"},
		{"no Kafka data at all ([] is within any grant)",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], consume: [], groups: [], transactionalIds: [], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": "Accepted"}, "acme base"},
		{"a topic to produce to outside the grant",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: ["acme.orders", "shared.news"], consume: [], groups: [], transactionalIds: [], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:claim permission to produce to "shared.news"`}, "base"},
		{"a consumer group broader than the grant",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], consume: [], groups: ["*"], transactionalIds: [], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:claim permission to use consumer groups "*"`}, "base"},
		{"a transactional id outside the grant",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], consume: [], groups: [], transactionalIds: ["globex-tx"], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:claim permission to use transactional ids "globex-tx"`}, "base"},
		{"a topic to create outside the grant",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], consume: [], groups: [], transactionalIds: [], createTopics: ["acme*"]}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:claim permission to create topics "acme*"`}, "base"},
		{"no topics to consume from stated where the grant bounds them",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], groups: [], transactionalIds: [], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:bounds the topics of namespace "team-k": state spec.permissions.kafka.consume within it`}, "base"},
		{"no Kafka data stated where the grant bounds it",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:state spec.permissions.kafka.produce within it`}, "base"},
		{"no transactional ids stated where the grant bounds them",
			[]object{base, lp("team-k", "acme", 1, 1, `{tenant: acme, identify: {kafka: {clientIdPrefixes: [acme-k]}}, permissions: {kafka: {produce: [], consume: [], groups: [], createTopics: []}}}`)},
			map[string]string{"LimitPolicy team-k/acme": `NotPermitted:bounds the transactional ids of namespace "team-k": state spec.permissions.kafka.transactionalIds within it`}, "base"},
		{"a client burst that can empty its tenant's is accepted, with a warning naming its field",
			[]object{base, lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {rate: {messagesPerSecond: 300, burstMessages: 50}}, clients: {named: [{match: {nats: [acme-a]}, limits: {rate: {messagesPerSecond: 100, burstMessages: 100}}}]}}`)},
			map[string]string{"LimitPolicy team-a/acme": "Accepted:spec.clients.named[0].limits.rate.burstMessages: 100 is at least the tenant's burst (50)"}, "acme base"},
		{"a warning on a policy judged before the default tenant's",
			[]object{base, lp("team-a", "acme", 1, -1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {rate: {messagesPerSecond: 300}}, clients: {default: {rate: {messagesPerSecond: 60, burstMessages: 300}}}}`)},
			map[string]string{"LimitPolicy team-a/acme": "Accepted:spec.clients.default.rate.burstMessages: 300 is at least the tenant's burst (300)"}, "acme base"},
		{"a namespace with no grant",
			[]object{base, lp("team-c", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`)},
			map[string]string{"LimitPolicy team-c/acme": `NotPermitted:lets namespace "team-c" define tenant "acme"`}, "base"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := newEvaluator("platform").evaluate(defaults(), c.policies)
			for ref, want := range c.want {
				reason, msg, _ := strings.Cut(want, ":")
				v := ev.Verdicts[ref]
				if v.Reason != reason || !strings.Contains(v.Message, msg) {
					t.Errorf("%s: got %s %q, want %s %q", ref, v.Reason, v.Message, reason, msg)
				}
			}
			if ev.Set == nil {
				t.Fatalf("no set: %v", ev.Err)
			}
			var tenants []string
			for _, tn := range ev.Set.Tenants {
				tenants = append(tenants, tn.Policy.Tenant)
			}
			if got := strings.Join(tenants, " "); got != c.tenants {
				t.Errorf("tenants in force: %q, want %q", got, c.tenants)
			}
		})
	}
}

// An invalid edit leaves the last accepted generation in force; a withdrawn grant does not.
func TestEvaluateKeepsTheLastGoodGeneration(t *testing.T) {
	e := newEvaluator("platform")
	good := lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {inFlight: 5}}`)
	ev := e.evaluate(defaults(), []object{base, good})
	if v := ev.Verdicts["LimitPolicy team-a/acme"]; v.Reason != ReasonAccepted || v.InForce != 1 {
		t.Fatalf("generation 1: %+v", v)
	}
	bad := lp("team-a", "acme", 2, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {inFlight: 0}}`)
	ev = e.evaluate(defaults(), []object{base, bad})
	v := ev.Verdicts["LimitPolicy team-a/acme"]
	if v.Reason != ReasonInvalid || v.InForce != 1 || !strings.Contains(v.Message, "generation 1 stays in force") {
		t.Errorf("an invalid generation 2: %+v", v)
	}
	if tn := ev.Set.Tenants[0]; tn.Policy.Tenant != "acme" || *tn.Limits.InFlight != 5 {
		t.Errorf("in force: tenant %s inFlight %v, want acme's generation 1 (5)", tn.Policy.Tenant, tn.Limits.InFlight)
	}
	outside := lp("team-a", "acme", 3, 1, `{tenant: acme, identify: {nats: {users: [globex]}}}`)
	ev = e.evaluate(defaults(), []object{base, outside})
	if v := ev.Verdicts["LimitPolicy team-a/acme"]; v.Reason != ReasonNotPermitted || v.InForce != 0 {
		t.Errorf("a generation outside the grant: %+v, want nothing in force", v)
	}
	if len(ev.Set.Tenants) != 1 {
		t.Errorf("in force: %d tenants, want only base", len(ev.Set.Tenants))
	}
}

func TestEvaluateWithoutUsableDefaults(t *testing.T) {
	ev := newEvaluator("platform").evaluate(nil, []object{base})
	if ev.Set != nil || ev.Verdicts["LimitPolicy platform/base"].Reason != ReasonPending {
		t.Errorf("no GatewayDefaults: set %v, verdict %+v", ev.Set, ev.Verdicts["LimitPolicy platform/base"])
	}
	two := append(defaults(), mkObject("GatewayDefaults", "", "second", 1, 5, `{defaultTenant: base}`))
	ev = newEvaluator("platform").evaluate(two, []object{base})
	if v := ev.Verdicts["GatewayDefaults second"]; v.Reason != ReasonConflicted {
		t.Errorf("a second GatewayDefaults: %+v", v)
	}
	missing := []object{mkObject("GatewayDefaults", "", "default", 1, 0, `{defaultTenant: nobody}`)}
	ev = newEvaluator("platform").evaluate(missing, []object{base})
	if v := ev.Verdicts["GatewayDefaults default"]; ev.Set != nil || v.Reason != ReasonInvalid || !strings.Contains(v.Message, `tenant "nobody" has no LimitPolicy`) {
		t.Errorf("a default tenant without a policy: set %v, verdict %+v", ev.Set, v)
	}
}

// A restarted replica (or one that never saw the accepted generation) keeps in force the
// earlier generation the status names.
func TestEvaluateKeepsTheGenerationTheStatusNames(t *testing.T) {
	bad := lp("team-a", "acme", 2, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {inFlight: 0}}`)
	earlier := lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}, limits: {inFlight: 5}}`)
	bad.InForce = &accepted{UID: bad.UID, Generation: 1, Spec: earlier.Spec}
	ev := newEvaluator("platform").evaluate(defaults(), []object{base, bad})
	v := ev.Verdicts["LimitPolicy team-a/acme"]
	if v.Reason != ReasonInvalid || v.InForce != 1 || v.Earlier == nil || v.Earlier.Generation != 1 {
		t.Fatalf("verdict %+v", v)
	}
	if tn := ev.Set.Tenants[0]; tn.Policy.Tenant != "acme" || *tn.Limits.InFlight != 5 {
		t.Errorf("in force: %s inFlight %v, want acme's generation 1 (5)", tn.Policy.Tenant, tn.Limits.InFlight)
	}
}

// Defaults that cannot resolve with the policies leave their previous generation in force; with
// no defaults at all, the policies keep the generations they had in force.
func TestEvaluateKeepsTheDefaultsInForce(t *testing.T) {
	e := newEvaluator("platform")
	acme := lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {nats: {users: [acme-1]}}}`)
	if ev := e.evaluate(defaults(), []object{base, acme}); ev.Set == nil {
		t.Fatal(ev.Err)
	}
	nobody := []object{mkObject("GatewayDefaults", "", "default", 2, 0, `{defaultTenant: nobody}`)}
	ev := e.evaluate(nobody, []object{base, acme})
	v := ev.Verdicts["GatewayDefaults default"]
	if ev.Set == nil || ev.Set.DefaultTenant != "base" || v.Reason != ReasonInvalid || v.InForce != 1 || !strings.Contains(v.Message, `tenant "nobody" has no LimitPolicy (generation 1 stays in force)`) {
		t.Fatalf("set %v, verdict %+v", ev.Set, v)
	}
	if a := ev.Verdicts["LimitPolicy team-a/acme"]; a.Reason != ReasonAccepted {
		t.Errorf("acme under the defaults kept in force: %+v", a)
	}
	ev = e.evaluate(nil, []object{base, acme})
	if a := ev.Verdicts["LimitPolicy team-a/acme"]; ev.Set != nil || a.Reason != ReasonPending || a.InForce != 1 {
		t.Errorf("without defaults: set %v, acme %+v", ev.Set, a)
	}
	if ev := e.evaluate(defaults(), []object{base, acme}); ev.Set == nil || ev.Verdicts["LimitPolicy team-a/acme"].Reason != ReasonAccepted {
		t.Errorf("defaults back: %v", ev.Err)
	}
}

// A principal is matched against the claim oauthClaim names: another claim than sub must be
// granted, or a granted principal would match other clients' tokens.
func TestGrantsCoverTheOAuthClaim(t *testing.T) {
	claim := lp("team-a", "acme", 1, 1, `{tenant: acme, identify: {kafka: {saslPrincipals: [acme-orders], oauthClaim: aud}}}`)
	grant := func(extra string) []object {
		return []object{mkObject("GatewayDefaults", "", "default", 1, 0, `
defaultTenant: base
grants: [{namespaces: [team-a], tenants: [acme], identities: {saslPrincipals: [acme-orders]`+extra+`}}]`)}
	}
	ev := newEvaluator("platform").evaluate(grant(""), []object{base, claim})
	if v := ev.Verdicts["LimitPolicy team-a/acme"]; v.Reason != ReasonNotPermitted || !strings.Contains(v.Message, `claim OAUTHBEARER claim "aud"`) {
		t.Errorf("an ungranted claim: %+v", v)
	}
	ev = newEvaluator("platform").evaluate(grant(", oauthClaims: [aud]"), []object{base, claim})
	if v := ev.Verdicts["LimitPolicy team-a/acme"]; v.Reason != ReasonAccepted {
		t.Errorf("a granted claim: %+v", v)
	}
}
