package policy

import "strings"

// registry is what the policies checked so far claim — names, tenants and identities, each
// with where it was claimed — so that a further policy's conflicts with them are one lookup
// each: a set is checked in one pass, and a Kubernetes object against those in force without
// checking them again (Admission).
type registry struct {
	names, tenants map[string]Pos
	identities     map[identityKind]map[string]owner
	prefixes       []claimedPrefix
}

type owner struct {
	tenant string
	pos    Pos
}

type claimedPrefix struct {
	prefix string
	owner
}

// identityKind is an identify field whose values are matched exactly.
type identityKind struct{ field, what string }

var exactIdentities = []identityKind{
	{"spec.identify.nats.users", "NATS user"},
	{"spec.identify.nats.nkeys", "NATS nkey"},
	{"spec.identify.nats.accounts", "NATS account"},
	{"spec.identify.kafka.saslPrincipals", "SASL principal"},
	{"spec.identify.tls.subjects", "certificate subject"},
	{"spec.identify.tls.sans", "certificate SAN"},
}

func (k identityKind) values(id Identify) []string {
	switch k.field {
	case "spec.identify.nats.users":
		return id.NATSUsers
	case "spec.identify.nats.nkeys":
		return id.NATSNkeys
	case "spec.identify.nats.accounts":
		return id.NATSAccounts
	case "spec.identify.kafka.saslPrincipals":
		return id.KafkaSASLPrincipals
	case "spec.identify.tls.subjects":
		return id.TLSSubjects
	default:
		return id.TLSSANs
	}
}

// newRegistry is an empty registry for about n policies.
func newRegistry(n int) *registry {
	r := &registry{names: make(map[string]Pos, n), tenants: make(map[string]Pos, n), identities: map[identityKind]map[string]owner{}}
	for _, k := range exactIdentities {
		r.identities[k] = map[string]owner{}
	}
	return r
}

// check reports what of p conflicts with the claims, or breaks a rule that needs the defaults
// (identify required, a global scope's quota service). It claims nothing.
func (r *registry) check(p *LimitPolicy, gd GatewayDefaults, c *collector) {
	if first, dup := r.names[p.Name]; dup && p.Name != "" {
		c.conflict(p.Pos, "metadata.name", "%q is already used by the LimitPolicy at %s", p.Name, posString(first))
	}
	if first, dup := r.tenants[p.Tenant]; dup && p.Tenant != "" {
		c.conflict(p.TenantPos, "spec.tenant", "tenant %q already has a LimitPolicy at %s", p.Tenant, posString(first))
	}
	if !p.Identify.Set && p.Tenant != gd.DefaultTenant && p.Tenant != "" {
		c.add(p.TenantPos, "spec.identify", "is required: only the default tenant (%q) may omit it", gd.DefaultTenant)
	}
	if p.Scope == ScopeGlobal && gd.QuotaService == nil {
		c.add(p.ScopePos, "spec.scope", "global needs a quota service: set spec.quotaService in the GatewayDefaults")
	}
	if p.Tenant == "" {
		return
	}
	// Identities that would attribute one client to two tenants.
	for _, k := range exactIdentities {
		for _, v := range k.values(p.Identify) {
			if o, dup := r.identities[k][v]; dup && o.tenant != p.Tenant {
				c.conflict(p.Identify.Pos, k.field, "%s %q already identifies tenant %q (%s)", k.what, v, o.tenant, posString(o.pos))
			}
		}
	}
	for _, pre := range p.Identify.KafkaClientIDPrefixes {
		for _, other := range r.prefixes {
			if other.tenant != p.Tenant && (strings.HasPrefix(pre, other.prefix) || strings.HasPrefix(other.prefix, pre)) {
				c.conflict(p.Identify.Pos, "spec.identify.kafka.clientIdPrefixes",
					"client.id prefix %q overlaps prefix %q of tenant %q (%s): a client id could match both",
					pre, other.prefix, other.tenant, posString(other.pos))
			}
		}
	}
}

// add claims p's name, tenant and identities; the first claim of each stays.
func (r *registry) add(p *LimitPolicy) {
	if _, dup := r.names[p.Name]; !dup {
		r.names[p.Name] = p.Pos
	}
	if _, dup := r.tenants[p.Tenant]; !dup {
		r.tenants[p.Tenant] = p.TenantPos
	}
	if p.Tenant == "" {
		return
	}
	me := owner{p.Tenant, p.Identify.Pos}
	for _, k := range exactIdentities {
		for _, v := range k.values(p.Identify) {
			if _, dup := r.identities[k][v]; !dup {
				r.identities[k][v] = me
			}
		}
	}
	for _, pre := range p.Identify.KafkaClientIDPrefixes {
		r.prefixes = append(r.prefixes, claimedPrefix{pre, me})
	}
}
