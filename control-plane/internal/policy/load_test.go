package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const defaultsDoc = `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata:
  name: defaults
spec:
  defaultTenant: anonymous
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: anonymous
spec:
  tenant: anonymous
`

func acme(limits string) string {
	return `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: acme
spec:
  tenant: acme
  identify:
    nats: { users: [acme] }
    kafka: { clientIdPrefixes: ["acme-"] }
  limits:
` + limits
}

// parse loads files given as name → content, in name order.
func parse(files map[string]string) (*Set, error) {
	names := make([]string, 0, len(files))
	contents := map[string][]byte{}
	for n, c := range files {
		names = append(names, n)
		contents[n] = []byte(c)
	}
	sortStrings(names)
	return Parse("dir", names, contents)
}

func errorLines(err error) []string {
	var es Errors
	if !errors.As(err, &es) {
		return []string{"not policy.Errors: " + err.Error()}
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

// One case per class of error: the exact text and position a user sees.
func TestLoadReportsEachErrorClassWithPosition(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "unknown field",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    maxMesageBytes: 1KiB\n")},
			want:  []string{"b.yaml:11:5: spec.limits.maxMesageBytes: unknown field (known: connections, consume, inFlight, maxMessageBytes, queue, rate)"},
		},
		{
			name:  "bad unit",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    maxMessageBytes: 2KB\n")},
			want:  []string{`b.yaml:11:22: spec.limits.maxMessageBytes: "2KB" is not a size (use an integer, optionally with KiB, MiB or GiB, or "unlimited")`},
		},
		{
			name:  "bad duration",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    queue: { maxWait: soon }\n")},
			want:  []string{`b.yaml:11:23: spec.limits.queue.maxWait: "soon" is not a duration (use Go syntax such as 250ms or 2s, or "unlimited")`},
		},
		{
			name:  "missing default tenant",
			files: map[string]string{"b.yaml": acme("    inFlight: 5\n")},
			want:  []string{"dir:1:1: GatewayDefaults: no GatewayDefaults document: one must name spec.defaultTenant"},
		},
		{
			name:  "default tenant without a policy",
			files: map[string]string{"a.yaml": strings.Replace(defaultsDoc, "defaultTenant: anonymous", "defaultTenant: nobody", 1)},
			want: []string{
				`a.yaml:6:18: spec.defaultTenant: tenant "nobody" has no LimitPolicy`,
				`a.yaml:13:11: spec.identify: is required: only the default tenant ("nobody") may omit it`,
			},
		},
		{
			name: "duplicate tenant",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n"),
				"c.yaml": strings.Replace(acme("    inFlight: 5\n"), "name: acme", "name: acme-two", 1)},
			want: []string{
				`c.yaml:6:11: spec.tenant: tenant "acme" already has a LimitPolicy at b.yaml:6:11`,
			},
		},
		{
			name: "duplicate name",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n"),
				"c.yaml": strings.NewReplacer("tenant: acme", "tenant: other", "[acme]", "[other]", `"acme-"`, `"other-"`).Replace(acme("    inFlight: 5\n"))},
			want: []string{`c.yaml:1:1: metadata.name: "acme" is already used by the LimitPolicy at b.yaml:1:1`},
		},
		{
			name: "overlapping kafka prefixes",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n"),
				"c.yaml": strings.NewReplacer("name: acme", "name: acme-eu", "tenant: acme", "tenant: acme-eu", "[acme]", "[acme-eu]", `"acme-"`, `"acme-eu-"`).Replace(acme("    inFlight: 5\n"))},
			want: []string{`c.yaml:8:5: spec.identify.kafka.clientIdPrefixes: client.id prefix "acme-eu-" overlaps prefix "acme-" of tenant "acme" (b.yaml:8:5): a client id could match both`},
		},
		{
			name:  "burst below one message of maxMessageBytes",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    maxMessageBytes: 1MiB\n    rate: { bytesPerSecond: 512KiB }\n")},
			want:  []string{"b.yaml:12:29: spec.limits.rate.bytesPerSecond: burstBytes (524288) is smaller than maxMessageBytes (1048576): a message of the maximum size could never be admitted"},
		},
		{
			name:  "consume rate 0",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    consume: { bytesPerSecond: 0 }\n")},
			want:  []string{`b.yaml:11:32: spec.limits.consume.bytesPerSecond: consume.bytesPerSecond must be at least 1 (write "unlimited" to remove the limit)`},
		},
		{
			name: "client limits",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n") +
				"  clients:\n    pool: 0\n    named:\n      - match: { kafka: [\"a*b\"] }\n        limits: { rate: { burstMessages: 5 }, consume: { messagesPerSecond: 5 }, fetch: 3 }\n"},
			want: []string{
				"b.yaml:13:11: spec.clients.pool: sizes the buckets of the clients under default: set default too",
				`b.yaml:15:26: spec.clients.named[0].match.kafka[0]: "a*b" is not a client name: exact, or a prefix ending in * (at most 255 characters)`,
				"b.yaml:16:17: spec.clients.named[0].limits.rate: needs messagesPerSecond, bytesPerSecond, or both",
				"b.yaml:16:42: spec.clients.named[0].limits.rate.burstMessages: needs rate.messagesPerSecond in the same limits",
				"b.yaml:16:77: spec.clients.named[0].limits.consume.messagesPerSecond: limits NATS deliveries; an entry with only kafka clients cannot set it (Kafka consumers are limited by consume.bytesPerSecond)",
				"b.yaml:16:82: spec.clients.named[0].limits.fetch: unknown field (known: connections, consume, inFlight, queue, rate)",
			},
		},
		{
			name: "consume burst in an override without its rate",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n") +
				"  overrides:\n    - match: { kafka: [\"audit-*\"] }\n      limits: { consume: { burstBytes: 1MiB } }\n"},
			want: []string{"b.yaml:14:40: spec.overrides[0].limits.consume.burstBytes: needs consume.bytesPerSecond in the same limits"},
		},
		{
			name: "consume messages in an override of kafka topics",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n") +
				"  overrides:\n    - match: { kafka: [\"audit-*\"] }\n      limits: { consume: { messagesPerSecond: 100 } }\n"},
			want: []string{"b.yaml:14:47: spec.overrides[0].limits.consume.messagesPerSecond: limits NATS deliveries; an override with kafka topics cannot set it (Kafka consumers are limited by consume.bytesPerSecond)"},
		},
		{
			name:  "consume messages 0",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    consume: { messagesPerSecond: 0 }\n")},
			want:  []string{`b.yaml:11:35: spec.limits.consume.messagesPerSecond: consume.messagesPerSecond must be at least 1 (write "unlimited" to remove the limit)`},
		},
		{
			name:  "inFlight 0",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 0\n")},
			want:  []string{`b.yaml:11:15: spec.limits.inFlight: inFlight must be at least 1 (write "unlimited" to remove the limit)`},
		},
		{
			name:  "identify missing for a non-default tenant",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), "  identify:\n    nats: { users: [acme] }\n    kafka: { clientIdPrefixes: [\"acme-\"] }\n", "", 1)},
			want:  []string{`b.yaml:6:11: spec.identify: is required: only the default tenant ("anonymous") may omit it`},
		},
		{
			name:  "bad mode and onLimit",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n  mode: enforcing\n  onLimit: drop\n")},
			want: []string{
				`b.yaml:12:9: spec.mode: "enforcing" is not a mode (enforce or dryRun)`,
				`b.yaml:13:12: spec.onLimit: "drop" is not an onLimit action (delay or reject)`,
			},
		},
		{
			// Found by FuzzParse: an empty or non-scalar key gave an empty field path, and two
			// non-scalar keys were reported as the same field twice.
			name:  "empty and non-scalar keys",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": "\"\": x\n? [a]\n: y\n? {b: c}\n: z\n" + acme("    inFlight: 5\n    \"\": 1\n")},
			want: []string{
				`b.yaml:1:1: "": unknown field (known: apiVersion, kind, metadata, spec)`,
				`b.yaml:2:3: (key): a field name must be a single value`,
				`b.yaml:4:3: (key): a field name must be a single value`,
				`b.yaml:17:5: spec.limits."": unknown field (known: connections, consume, inFlight, maxMessageBytes, queue, rate)`,
			},
		},
		{
			// Found by FuzzParse: with no spec.tenant, an error about limits from no field of
			// the policy's own had no position (":0:0:").
			name:  "limits of a policy without a tenant",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": "apiVersion: weighstation.io/v1alpha1\nkind: LimitPolicy\nmetadata: { name: b }\nspec:\n  limits: { maxMessageBytes: unlimited }\n"},
			want: []string{
				"b.yaml:1:1: spec.limits: burstBytes is 67108864 but maxMessageBytes is unlimited: a larger message could never be admitted",
				"b.yaml:5:3: spec.tenant: is required",
			},
		},
		{
			name: "overrides that widen, use unlimited, or override per-tenant limits",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme(`    maxMessageBytes: 64KiB
  overrides:
    - match: { nats: ["orders.>"] }
      limits: { maxMessageBytes: 128KiB, inFlight: unlimited, connections: 3 }
    - match: { nats: ["bad.>.x"], kafka: ["no spaces"] }
      limits: { inFlight: 2 }
`)},
			want: []string{
				"b.yaml:14:34: spec.overrides[0].limits.maxMessageBytes: 131072 is above the tenant's maxMessageBytes (65536): an override can only narrow a limit",
				`b.yaml:14:52: spec.overrides[0].limits.inFlight: an override can only narrow a limit; "unlimited" is not allowed here`,
				"b.yaml:14:76: spec.overrides[0].limits.connections: connections are counted per tenant and cannot be overridden",
				`b.yaml:15:7: spec.overrides[1].match.nats: "bad.>.x" '>' may only be the last token`,
				`b.yaml:15:7: spec.overrides[1].match.kafka: "no spaces" must be a topic name of letters, digits, '.', '_', '-' with '*' or '?' wildcards`,
			},
		},
		{
			name:  "wrong apiVersion and kind",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: x }\nspec: {}\n"},
			want: []string{
				`b.yaml:1:1: apiVersion: must be "weighstation.io/v1alpha1", got "v1"`,
				`b.yaml:2:7: kind: must be LimitPolicy or GatewayDefaults, got "ConfigMap"`,
			},
		},
		{
			// No HTTP ingress exists: an identity for it would do nothing.
			name:  "identify.http is not a field",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), "    kafka: { clientIdPrefixes: [\"acme-\"] }\n", "    kafka: { clientIdPrefixes: [\"acme-\"] }\n    http: { header: x-tenant-id, values: [acme] }\n", 1)},
			want:  []string{"b.yaml:10:5: spec.identify.http: unknown field (known: kafka, nats, tls)"},
		},
		{
			name:  "saslUsers was renamed",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), `clientIdPrefixes: ["acme-"]`, `saslUsers: [acme-svc]`, 1)},
			want:  []string{"b.yaml:9:14: spec.identify.kafka.saslUsers: renamed to saslPrincipals (the principal the broker accepted: PLAIN or SCRAM username, OAUTHBEARER claim)"},
		},
		{
			name: "nkeys and accounts must be public keys of their kind",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), "{ users: [acme] }",
				"{ nkeys: [ABXLZFQBQGNAM7S2UTHCVFEIQPOHZD727PV3NUTCJBY2UGHQRLETAXH6], accounts: [SUAKSIF6] }", 1)},
			want: []string{
				`b.yaml:8:21: spec.identify.nats.nkeys[0]: "ABXLZFQBQGNAM7S2UTHCVFEIQPOHZD727PV3NUTCJBY2UGHQRLETAXH6" is not a NATS user public key (56 characters starting with U)`,
				`b.yaml:8:91: spec.identify.nats.accounts[0]: "SUAKSIF6" is not a NATS account public key (56 characters starting with A)`,
			},
		},
		{
			name:  "oauthClaim without saslPrincipals does nothing",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), `clientIdPrefixes: ["acme-"]`, `oauthClaim: azp`, 1)},
			want:  []string{"b.yaml:9:26: spec.identify.kafka.oauthClaim: names the token claim saslPrincipals are matched against: set saslPrincipals too"},
		},
		{
			name: "one certificate SAN for two tenants",
			files: map[string]string{"a.yaml": defaultsDoc,
				"b.yaml": strings.Replace(acme("    inFlight: 5\n"), "  identify:\n", "  identify:\n    tls: { sans: [spiffe://x/y] }\n", 1),
				"c.yaml": strings.NewReplacer("name: acme", "name: other", "tenant: acme", "tenant: other", "[acme]", "[other]", `"acme-"`, `"other-"`, "  identify:\n", "  identify:\n    tls: { sans: [spiffe://x/y] }\n").Replace(acme("    inFlight: 5\n"))},
			want: []string{`c.yaml:8:5: spec.identify.tls.sans: certificate SAN "spiffe://x/y" already identifies tenant "acme" (b.yaml:8:5)`},
		},
		{
			name:  "global scope without a quota service",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), "  tenant: acme\n", "  tenant: acme\n  scope: global\n", 1)},
			want:  []string{"b.yaml:7:10: spec.scope: global needs a quota service: set spec.quotaService in the GatewayDefaults"},
		},
		{
			name:  "unknown scope",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": strings.Replace(acme("    inFlight: 5\n"), "  tenant: acme\n", "  tenant: acme\n  scope: cluster\n", 1)},
			want:  []string{`b.yaml:7:10: spec.scope: "cluster" is not a scope (perGateway or global)`},
		},
		{
			name: "quota service address and timeout",
			files: map[string]string{
				"a.yaml": strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n", "  defaultTenant: anonymous\n  quotaService: { address: quota, timeout: 1m }\n", 1),
			},
			want: []string{
				`a.yaml:7:28: spec.quotaService.address: "quota" is not host:port`,
				`a.yaml:7:44: spec.quotaService.timeout: 1m0s is outside 10ms..5s`,
			},
		},
		{
			name:  "YAML syntax",
			files: map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: [5\n")},
			want:  []string{"b.yaml:10:1: (yaml): line 10: did not find expected ',' or ']'"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.files)
			if err == nil {
				t.Fatal("loaded without error")
			}
			got := errorLines(err)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestGlobalScopeCarriesTheQuotaService(t *testing.T) {
	defaults := strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n", "  defaultTenant: anonymous\n  quotaService: { address: \"quota.svc:8081\" }\n", 1)
	global := strings.Replace(acme("    inFlight: 5\n"), "  tenant: acme\n", "  tenant: acme\n  scope: global\n", 1)
	set, err := parse(map[string]string{"a.yaml": defaults, "b.yaml": global})
	if err != nil {
		t.Fatal(err)
	}
	if set.QuotaService == nil || set.QuotaService.Address != "quota.svc:8081" || set.QuotaService.Timeout != DefaultQuotaTimeout {
		t.Fatalf("quota service %+v", set.QuotaService)
	}
	scopes := map[string]Scope{}
	for _, tn := range set.Tenants {
		scopes[tn.Policy.Tenant] = tn.Policy.Scope
	}
	if scopes["acme"] != ScopeGlobal || scopes["anonymous"] != ScopePerGateway {
		t.Fatalf("scopes %v", scopes)
	}
}

func TestEveryErrorIsReportedAtOnce(t *testing.T) {
	_, err := parse(map[string]string{
		"b.yaml": acme("    inFlight: 0\n    connections: many\n"),
	})
	if got := len(errorLines(err)); got != 3 {
		t.Fatalf("got %d errors, want 3 (missing defaults, inFlight, connections):\n%v", got, err)
	}
}

func TestLimitsResolveFromPolicyThenDefaultsThenBuiltins(t *testing.T) {
	defaults := strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n",
		"  defaultTenant: anonymous\n  defaultLimits:\n    inFlight: 50\n    connections: unlimited\n    queue: { maxWait: 2s }\n", 1)
	defaults = strings.Replace(defaults, "    inFlight: 50\n", "    inFlight: 50\n    consume: { bytesPerSecond: 1MiB }\n", 1)
	set, err := parse(map[string]string{"a.yaml": defaults, "b.yaml": acme("    rate: { messagesPerSecond: 300, bytesPerSecond: unlimited }\n    inFlight: 7\n    consume: { burstBytes: 4MiB }\n")})
	if err != nil {
		t.Fatal(err)
	}
	var acmeT, anon *Tenant
	for _, tn := range set.Tenants {
		switch tn.Policy.Tenant {
		case "acme":
			acmeT = tn
		case "anonymous":
			anon = tn
		}
	}
	u := func(p *uint64) any {
		if p == nil {
			return "unlimited"
		}
		return *p
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"acme inFlight (own)", u(acmeT.Limits.InFlight), uint64(7)},
		{"anonymous inFlight (defaults)", u(anon.Limits.InFlight), uint64(50)},
		{"acme connections (defaults: unlimited)", u(acmeT.Limits.Connections), "unlimited"},
		{"acme maxMessageBytes (built-in)", u(acmeT.Limits.MaxMessageBytes), BuiltinDefaults.MaxMessageBytes},
		{"acme burstMessages (one second of its rate)", u(acmeT.Limits.BurstMessages), uint64(300)},
		{"acme bytesPerSecond (own: unlimited)", u(acmeT.Limits.BytesPerSecond), "unlimited"},
		{"acme burstBytes (no byte rate)", u(acmeT.Limits.BurstBytes), "unlimited"},
		{"anonymous messagesPerSecond (built-in)", u(anon.Limits.MessagesPerSecond), BuiltinDefaults.MessagesPerSecond},
		{"anonymous queue maxWait (defaults)", *anon.Limits.QueueMaxWait, 2 * time.Second},
		{"anonymous consume (defaults)", u(anon.Limits.ConsumeBytesPerSecond), uint64(1 << 20)},
		{"anonymous consume burst (one second of it)", u(anon.Limits.ConsumeBurstBytes), uint64(1 << 20)},
		{"acme consume (defaults)", u(acmeT.Limits.ConsumeBytesPerSecond), uint64(1 << 20)},
		{"acme consume burst (own)", u(acmeT.Limits.ConsumeBurstBytes), uint64(4 << 20)},
		{"acme consume messages (built-in)", u(acmeT.Limits.ConsumeMessagesPerSecond), BuiltinDefaults.ConsumeMessagesPerSecond},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if set.DefaultTenant != "anonymous" || len(set.Hash) != 64 {
		t.Errorf("default %q hash %q", set.DefaultTenant, set.Hash)
	}
}

func TestShippedExamplesLoad(t *testing.T) {
	set, err := LoadDir("../../../policies")
	if err != nil {
		t.Fatalf("the example policies are invalid:\n%v", err)
	}
	if len(set.Tenants) != 3 {
		t.Errorf("got %d tenants, want acme, globex and anonymous", len(set.Tenants))
	}
}
