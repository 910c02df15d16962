package policy

import (
	"strings"
	"testing"
)

// billing is a tenant with client limits and an override; limits, clients and overrides are
// its spec's YAML (each at two spaces' indent).
func billing(limits, clients, overrides string) string {
	return `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: billing
spec:
  tenant: billing
  identify:
    nats: { users: [billing] }
  limits:
` + limits + `  clients:
` + clients + `  overrides:
` + overrides
}

// A client's or override's burst left out is one second of its rate, at most a quarter of its
// tenant's, never below one message of the maximum size (bytes) or one message.
func TestDefaultBurstIsAQuarterOfTheTenantsAtMost(t *testing.T) {
	cases := []struct {
		name                             string
		limits, clients, overrides       string
		named, dflt, override            uint64 // burstMessages
		namedBytes, dfltBytes, overBytes uint64 // burstBytes; 0: no byte rate
	}{
		{
			name:      "the issue's tenant: burst 50, a client at 100/s",
			limits:    "    rate: { messagesPerSecond: 300, burstMessages: 50 }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60 } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n",
			named:     12, dflt: 12, override: 12,
		},
		{
			name:      "the tenant's burst left out: one second of its rate",
			limits:    "    rate: { messagesPerSecond: 300 }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60 } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n",
			named:     75, dflt: 60, override: 75,
		},
		{
			name:      "the tenant's burst unlimited: its bucket is one second deep (the filter's rule)",
			limits:    "    rate: { messagesPerSecond: 400, burstMessages: unlimited }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60 } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 150 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n",
			named:     100, dflt: 60, override: 100,
		},
		{
			name:      "no tenant rate: one second of its own",
			limits:    "    rate: { messagesPerSecond: unlimited }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60 } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n",
			named:     100, dflt: 60, override: 200,
		},
		{
			name:      "a tenant burst under four: one message",
			limits:    "    rate: { messagesPerSecond: 300, burstMessages: 3 }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60 } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n",
			named:     1, dflt: 1, override: 1,
		},
		{
			name:       "bytes: a quarter, but one message of the maximum size at least",
			limits:     "    maxMessageBytes: 64KiB\n    rate: { messagesPerSecond: unlimited, bytesPerSecond: 1MiB, burstBytes: 512KiB }\n",
			clients:    "    default: { rate: { bytesPerSecond: 100KiB } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { bytesPerSecond: 256KiB } }\n",
			overrides:  "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { bytesPerSecond: 300KiB } }\n",
			namedBytes: 128 << 10, dfltBytes: 100 << 10, overBytes: 128 << 10,
		},
		{
			name:       "bytes: the maximum size over a quarter of the tenant's burst",
			limits:     "    maxMessageBytes: 256KiB\n    rate: { messagesPerSecond: unlimited, bytesPerSecond: 1MiB, burstBytes: 512KiB }\n",
			clients:    "    default: { rate: { bytesPerSecond: 300KiB } }\n    named:\n      - match: { nats: [a] }\n        limits: { rate: { bytesPerSecond: 1MiB } }\n",
			overrides:  "    - match: { nats: [\"orders.>\"] }\n      limits: { maxMessageBytes: 64KiB, rate: { bytesPerSecond: 1MiB } }\n",
			namedBytes: 256 << 10, dfltBytes: 256 << 10, overBytes: 128 << 10,
		},
	}
	u := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := parse(map[string]string{"a.yaml": defaultsDoc, "b.yaml": billing(c.limits, c.clients, c.overrides)})
			if err != nil {
				t.Fatal(err)
			}
			if len(set.Warnings) != 0 {
				t.Errorf("a default burst warned: %v", set.Warnings)
			}
			var tn *Tenant
			for _, x := range set.Tenants {
				if x.Policy.Tenant == "billing" {
					tn = x
				}
			}
			named, dflt, over := tn.Clients.Named[0].Limits, *tn.Clients.Default, tn.Overrides[0].Limits
			got := [6]uint64{u(named.BurstMessages), u(dflt.BurstMessages), u(over.BurstMessages), u(named.BurstBytes), u(dflt.BurstBytes), u(over.BurstBytes)}
			want := [6]uint64{c.named, c.dflt, c.override, c.namedBytes, c.dfltBytes, c.overBytes}
			if got != want {
				t.Errorf("bursts (named, default, override; messages then bytes) = %v, want %v", got, want)
			}
		})
	}
}

// A burst a policy sets on a client or override that is at least its tenant's loads, with a
// warning at its position; one below it loads without.
func TestBurstThatCanEmptyItsTenantsIsAWarning(t *testing.T) {
	cases := []struct {
		name                       string
		limits, clients, overrides string
		want                       []string
	}{
		{
			name:      "below the tenant's: no warning",
			limits:    "    rate: { messagesPerSecond: 300, burstMessages: 50 }\n",
			clients:   "    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100, burstMessages: 20 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200, burstMessages: 49 } }\n",
		},
		{
			name:      "the issue's client: burst 100 in a tenant of 50",
			limits:    "    rate: { messagesPerSecond: 300, burstMessages: 50 }\n",
			clients:   "    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200, burstMessages: 50 } }\n",
			want: []string{
				"b.yaml:14:66: spec.clients.named[0].limits.rate.burstMessages: 100 is at least the tenant's burst (50): spent at once by one client, it empties the tenant's bucket, and the tenant's other messages are refused or held until it refills; leave it out (the default here is 12) or set it below 50",
				"b.yaml:17:64: spec.overrides[0].limits.rate.burstMessages: 50 is at least the tenant's burst (50): spent at once by the override's messages, it empties the tenant's bucket, and the tenant's other messages are refused or held until it refills; leave it out (the default here is 12) or set it below 50",
			},
		},
		{
			name:      "the tenant's burst left out is one second of its rate",
			limits:    "    rate: { messagesPerSecond: 300 }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60, burstMessages: 300 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200, burstMessages: 299 } }\n",
			want: []string{
				"b.yaml:12:62: spec.clients.default.rate.burstMessages: 300 is at least the tenant's burst (300): spent at once by one client, it empties the tenant's bucket, and the tenant's other messages are refused or held until it refills; leave it out (the default here is 60) or set it below 300",
			},
		},
		{
			name:      "bytes",
			limits:    "    maxMessageBytes: 64KiB\n    rate: { bytesPerSecond: 1MiB, burstBytes: 512KiB }\n",
			clients:   "    default: { rate: { bytesPerSecond: 256KiB, burstBytes: 512KiB } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { bytesPerSecond: 200KiB } }\n",
			want: []string{
				"b.yaml:13:60: spec.clients.default.rate.burstBytes: 524288 is at least the tenant's burst (524288): spent at once by one client, it empties the tenant's bucket, and the tenant's other messages are refused or held until it refills; leave it out (the default here is 131072) or set it below 524288",
			},
		},
		{
			name:      "no tenant rate: nothing to empty",
			limits:    "    rate: { messagesPerSecond: unlimited }\n",
			clients:   "    default: { rate: { messagesPerSecond: 60, burstMessages: 100000 } }\n",
			overrides: "    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200, burstMessages: 100000 } }\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := parse(map[string]string{"a.yaml": defaultsDoc, "b.yaml": billing(c.limits, c.clients, c.overrides)})
			if err != nil {
				t.Fatalf("a warning refused the set: %v", err)
			}
			got := make([]string, len(set.Warnings))
			for i, w := range set.Warnings {
				got[i] = w.Error()
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// A Kubernetes object's warnings name the object and the field path, as its errors do.
func TestObjectWarningsNameTheFieldPath(t *testing.T) {
	const ref = "LimitPolicy team-a/billing"
	lp, _, err := ParseObject(ref, []byte(billing("    rate: { messagesPerSecond: 300, burstMessages: 50 }\n",
		"    named:\n      - match: { nats: [a] }\n        limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }\n",
		"    - match: { nats: [\"orders.>\"] }\n      limits: { rate: { messagesPerSecond: 200 } }\n")))
	if err != nil {
		t.Fatal(err)
	}
	_, gd, err := ParseObject("GatewayDefaults default", []byte("apiVersion: weighstation.io/v1alpha1\nkind: GatewayDefaults\nmetadata:\n  name: default\nspec:\n  defaultTenant: billing\n"))
	if err != nil {
		t.Fatal(err)
	}
	set, errs := Resolve(*gd, []LimitPolicy{*lp}, "h")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := ref + ": spec.clients.named[0].limits.rate.burstMessages: 100 is at least the tenant's burst (50)"
	if len(set.Warnings) != 1 || !strings.HasPrefix(set.Warnings[0].Error(), want) {
		t.Errorf("warnings %v, want one starting %q", set.Warnings, want)
	}
}
