package policy

import (
	"slices"
	"strings"
)

// validateSet checks the rules that span documents and resolves every tenant's limits.
func validateSet(dir string, policies []LimitPolicy, defaults []GatewayDefaults, c *collector) *Set {
	claimed := make([]*LimitPolicy, len(policies))
	for i := range policies {
		claimed[i] = &policies[i]
	}
	gd := checkClaims(dir, claimed, defaults, c)
	tenants := make([]*Tenant, len(policies))
	for i, p := range claimed {
		t := resolveTenant(p, gd, c)
		tenants[i] = &t
	}
	return newSet(gd, tenants)
}

// checkClaims checks the defaults and what the policies claim (names, tenants, identities:
// each once), and returns the GatewayDefaults the tenants resolve against.
func checkClaims(dir string, policies []*LimitPolicy, defaults []GatewayDefaults, c *collector) GatewayDefaults {
	dirPos := Pos{File: dir, Line: 1, Column: 1}
	var gd GatewayDefaults
	switch len(defaults) {
	case 0:
		c.add(dirPos, "GatewayDefaults", "no GatewayDefaults document: one must name spec.defaultTenant")
	default:
		gd = defaults[0]
		for _, extra := range defaults[1:] {
			c.add(extra.Pos, "kind", "a second GatewayDefaults (%q); the first is at %s", extra.Name, posString(gd.Pos))
		}
	}
	checkDefaultLimits(gd.DefaultLimits, c)

	claims := newRegistry(len(policies))
	for _, p := range policies {
		claims.check(p, gd, c)
		claims.add(p)
	}
	if gd.DefaultTenant != "" {
		if _, ok := claims.tenants[gd.DefaultTenant]; !ok {
			c.add(gd.TenantPos, "spec.defaultTenant", "tenant %q has no LimitPolicy", gd.DefaultTenant)
		}
	}
	return gd
}

// newSet is the set of tenants resolved against gd, sorted by name.
func newSet(gd GatewayDefaults, tenants []*Tenant) *Set {
	slices.SortFunc(tenants, func(a, b *Tenant) int { return strings.Compare(a.Policy.Tenant, b.Policy.Tenant) })
	return &Set{DefaultTenant: gd.DefaultTenant, QuotaService: gd.QuotaService, Tenants: tenants}
}

// checkDefaultLimits rejects a `defaultLimits` that sets queue or connections to values no
// tenant could use; the per-tenant resolution reports the rest with the tenant's position.
func checkDefaultLimits(l Limits, c *collector) {
	if l.Queue.MaxWait.Set && l.Queue.MaxWait.Unlimited {
		c.add(l.Queue.MaxWait.Pos, "spec.defaultLimits.queue.maxWait", "cannot be unlimited: a held message must be refused at some point")
	}
}

func posString(p Pos) string {
	if p.Line == 0 {
		return p.File // an object: a line of its rendering would mean nothing to its author
	}
	return p.File + ":" + itoa(p.Line) + ":" + itoa(p.Column)
}

// resolveTenant resolves one policy's limits against the defaults.
func resolveTenant(p *LimitPolicy, gd GatewayDefaults, c *collector) Tenant {
	// Limits that come from no field of their own are reported at the tenant, or at the
	// document when it names none.
	at := p.TenantPos
	if at == (Pos{}) {
		at = p.Pos
	}
	t := Tenant{Policy: *p, Limits: resolve(p.Limits, "spec.limits", at, gd.DefaultLimits, c),
		Permissions: resolvePermissions(p.Permissions, gd.DefaultPermissions)}
	t.Overrides = resolveOverrides(p, t.Limits, c)
	t.Clients = resolveClients(p, t.Limits, c)
	return t
}

// resolveOverrides checks each override and resolves its limits. An override may only narrow
// the tenant's per-message limits (size, rate, inFlight); queue and connections are per tenant.
func resolveOverrides(p *LimitPolicy, tenant Effective, c *collector) []EffectiveOverride {
	out := make([]EffectiveOverride, 0, len(p.Overrides))
	seenPatterns := map[string]int{}
	for i, o := range p.Overrides {
		path := "spec.overrides[" + itoa(i) + "]"
		if len(o.Match.NATS) == 0 && len(o.Match.Kafka) == 0 {
			c.add(o.Pos, path+".match", "needs at least one nats subject or kafka topic pattern")
		}
		for _, s := range o.Match.NATS {
			if why := natsSubjectPatternError(s); why != "" {
				c.add(o.Pos, path+".match.nats", "%q %s", s, why)
			}
			checkPatternOnce(seenPatterns, "nats:"+s, i, o.Pos, path+".match.nats", c)
		}
		for _, t := range o.Match.Kafka {
			if why := kafkaGlobError(t); why != "" {
				c.add(o.Pos, path+".match.kafka", "%q %s", t, why)
			}
			checkPatternOnce(seenPatterns, "kafka:"+t, i, o.Pos, path+".match.kafka", c)
		}
		l := o.Limits
		lp := path + ".limits"
		for _, q := range []struct {
			q     Quantity
			field string
		}{
			{l.MaxMessageBytes, "maxMessageBytes"}, {l.Rate.MessagesPerSecond, "rate.messagesPerSecond"},
			{l.Rate.BytesPerSecond, "rate.bytesPerSecond"}, {l.Rate.BurstMessages, "rate.burstMessages"},
			{l.Rate.BurstBytes, "rate.burstBytes"}, {l.InFlight, "inFlight"},
			{l.Consume.BytesPerSecond, "consume.bytesPerSecond"}, {l.Consume.BurstBytes, "consume.burstBytes"},
			{l.Consume.MessagesPerSecond, "consume.messagesPerSecond"},
		} {
			if q.q.Unlimited {
				c.add(q.q.Pos, lp+"."+q.field, "an override can only narrow a limit; %q is not allowed here", unlimited)
			}
		}
		if l.Consume.MessagesPerSecond.Set && len(o.Match.Kafka) > 0 {
			c.add(l.Consume.MessagesPerSecond.Pos, lp+".consume.messagesPerSecond",
				"limits NATS deliveries; an override with kafka topics cannot set it (Kafka consumers are limited by consume.bytesPerSecond)")
		}
		if l.Queue.MaxMessages.Set || l.Queue.MaxWait.Set {
			c.add(o.Pos, lp+".queue", "the queue is shared by all of a tenant's messages and cannot be overridden")
		}
		if l.Connections.Set {
			c.add(l.Connections.Pos, lp+".connections", "connections are counted per tenant and cannot be overridden")
		}
		if l.MaxMessageBytes.Finite() && tenant.MaxMessageBytes != nil && l.MaxMessageBytes.Value > *tenant.MaxMessageBytes {
			c.add(l.MaxMessageBytes.Pos, lp+".maxMessageBytes", "%d is above the tenant's maxMessageBytes (%d): an override can only narrow a limit",
				l.MaxMessageBytes.Value, *tenant.MaxMessageBytes)
		}
		out = append(out, EffectiveOverride{NATS: o.Match.NATS, Kafka: o.Match.Kafka, Limits: resolveOverride(l, lp, o.Pos, tenant, "the override's messages", c)})
	}
	return out
}

func checkPatternOnce(seen map[string]int, key string, i int, pos Pos, field string, c *collector) {
	if first, dup := seen[key]; dup {
		c.add(pos, field, "%q is already matched by overrides[%d]", key[strings.IndexByte(key, ':')+1:], first)
		return
	}
	seen[key] = i
}

// resolveOverride keeps only what the override narrows; bursts default to one second of the
// override's own rate, at most a quarter of the tenant's (bursts.go), and the byte burst must
// still fit one message of the maximum size. of says whose bucket it is, for warnings.
func resolveOverride(l Limits, path string, pos Pos, tenant Effective, of string, c *collector) Effective {
	val := func(q Quantity) *uint64 {
		if !q.Finite() {
			return nil
		}
		return ptr(q.Value)
	}
	e := Effective{
		MaxMessageBytes:   val(l.MaxMessageBytes),
		MessagesPerSecond: val(l.Rate.MessagesPerSecond),
		BytesPerSecond:    val(l.Rate.BytesPerSecond),
		InFlight:          val(l.InFlight),
	}
	for _, z := range []struct {
		q     Quantity
		field string
	}{{l.MaxMessageBytes, "maxMessageBytes"}, {l.Rate.MessagesPerSecond, "rate.messagesPerSecond"},
		{l.Rate.BytesPerSecond, "rate.bytesPerSecond"}, {l.InFlight, "inFlight"}, {l.Rate.BurstMessages, "rate.burstMessages"},
		{l.Consume.BytesPerSecond, "consume.bytesPerSecond"}, {l.Consume.BurstBytes, "consume.burstBytes"},
		{l.Consume.MessagesPerSecond, "consume.messagesPerSecond"}} {
		if z.q.Finite() && z.q.Value == 0 {
			c.add(z.q.Pos, path+"."+z.field, "must be at least 1")
		}
	}
	if e.MessagesPerSecond != nil {
		tenantDepth := depth(tenant.BurstMessages, tenant.MessagesPerSecond)
		e.BurstMessages = ptr(defaultBurst(*e.MessagesPerSecond, tenantDepth, 1))
		if l.Rate.BurstMessages.Finite() {
			e.BurstMessages = ptr(l.Rate.BurstMessages.Value)
			warnEmptiesTenant(l.Rate.BurstMessages, path+".rate.burstMessages", of, tenantDepth, *e.MessagesPerSecond, 1, c)
		}
	} else if l.Rate.BurstMessages.Set {
		c.add(l.Rate.BurstMessages.Pos, path+".rate.burstMessages", "needs rate.messagesPerSecond in the same limits")
	}
	if e.BytesPerSecond != nil {
		maxMsg := resolved{tenant.MaxMessageBytes, source{pos, path}}
		if e.MaxMessageBytes != nil {
			maxMsg.value = e.MaxMessageBytes
		}
		floor := uint64(1)
		if maxMsg.value != nil {
			floor = *maxMsg.value
		}
		tenantDepth := depth(tenant.BurstBytes, tenant.BytesPerSecond)
		burst := resolved{ptr(defaultBurst(*e.BytesPerSecond, tenantDepth, floor)), source{l.Rate.BytesPerSecond.Pos, path + ".rate.bytesPerSecond"}}
		if l.Rate.BurstBytes.Finite() {
			burst = resolved{ptr(l.Rate.BurstBytes.Value), source{l.Rate.BurstBytes.Pos, path + ".rate.burstBytes"}}
			warnEmptiesTenant(l.Rate.BurstBytes, path+".rate.burstBytes", of, tenantDepth, *e.BytesPerSecond, floor, c)
		}
		e.BurstBytes = burst.value
		checkBurstFitsMessage(burst, maxMsg, c)
	} else if l.Rate.BurstBytes.Set {
		c.add(l.Rate.BurstBytes.Pos, path+".rate.burstBytes", "needs rate.bytesPerSecond in the same limits")
	}
	if l.Consume.BytesPerSecond.Finite() {
		e.ConsumeBytesPerSecond = ptr(l.Consume.BytesPerSecond.Value)
		e.ConsumeBurstBytes = e.ConsumeBytesPerSecond
		if l.Consume.BurstBytes.Finite() {
			e.ConsumeBurstBytes = ptr(l.Consume.BurstBytes.Value)
		}
	} else if l.Consume.BurstBytes.Set {
		c.add(l.Consume.BurstBytes.Pos, path+".consume.burstBytes", "needs consume.bytesPerSecond in the same limits")
	}
	if l.Consume.MessagesPerSecond.Finite() {
		e.ConsumeMessagesPerSecond = ptr(l.Consume.MessagesPerSecond.Value)
	}
	return e
}
