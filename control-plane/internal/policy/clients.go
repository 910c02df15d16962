package policy

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultClientPool is how many clients under clients.default hold a bucket of their own at a
// time when the policy does not say (api/v1alpha1 Clients.Pool).
const DefaultClientPool = 1000

// maxClientPool bounds clients.pool: every slot is two shared-data entries that Envoy never
// deletes.
const maxClientPool = 100000

// Clients has the shape of `spec.clients`: limits for each client of a tenant.
type Clients struct {
	Default *ClientLimits
	Named   []NamedClient
	Pool    Quantity
	Pos     Pos
	Set     bool
}

// ClientLimits is what one client may do (`clients.default`, `clients.named[].limits`).
type ClientLimits struct {
	Rate        Rate
	InFlight    Quantity
	MaxMessages Quantity // queue.maxMessages
	Connections Quantity
	Consume     Consume
	Pos         Pos
}

type NamedClient struct {
	Match  Match // client.ids (Kafka) and connection names, users or nkeys (NATS)
	Limits ClientLimits
	Pos    Pos
}

// EffectiveClients are a tenant's resolved client limits; nil Default: a client no entry
// names is limited only by its tenant.
type EffectiveClients struct {
	Default *Effective
	Named   []EffectiveNamedClient
	Pool    uint64
}

type EffectiveNamedClient struct {
	NATS   []string
	Kafka  []string
	Limits Effective
}

func (d *decoder) clients(n *yaml.Node, path string) Clients {
	cl := Clients{Pos: d.pos(n), Set: true}
	d.mapping(n, path, fields{
		"default": func(n *yaml.Node, p string) {
			l := d.clientLimits(n, p)
			cl.Default = &l
		},
		"named": func(n *yaml.Node, p string) { cl.Named = d.namedClients(n, p) },
		"pool":  func(n *yaml.Node, p string) { cl.Pool = d.quantity(n, p, parseCount) },
	})
	return cl
}

func (d *decoder) clientLimits(n *yaml.Node, path string) ClientLimits {
	l := ClientLimits{Pos: d.pos(n)}
	d.mapping(n, path, fields{
		"rate":     func(n *yaml.Node, p string) { l.Rate = d.rate(n, p) },
		"inFlight": func(n *yaml.Node, p string) { l.InFlight = d.quantity(n, p, parseCount) },
		"connections": func(n *yaml.Node, p string) {
			l.Connections = d.quantity(n, p, parseCount)
		},
		"queue": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{"maxMessages": func(n *yaml.Node, p string) { l.MaxMessages = d.quantity(n, p, parseCount) }})
		},
		"consume": func(n *yaml.Node, p string) { l.Consume = d.consume(n, p) },
	})
	return l
}

func (d *decoder) namedClients(n *yaml.Node, path string) []NamedClient {
	var out []NamedClient
	d.matchedList(n, path, d.clientNames, func(e *yaml.Node, p string, m *Match, limits *yaml.Node) {
		nc := NamedClient{Pos: d.pos(e)}
		if m != nil {
			nc.Match = *m
			if len(m.NATS)+len(m.Kafka) == 0 {
				d.c.add(d.pos(e), p+".match", "name at least one nats or kafka client")
			}
		}
		if limits != nil {
			nc.Limits = d.clientLimits(limits, p+".limits")
			if q := nc.Limits.Consume.MessagesPerSecond; q.Set && m != nil && len(m.NATS) == 0 && len(m.Kafka) > 0 {
				d.c.add(q.Pos, p+".limits.consume.messagesPerSecond",
					"limits NATS deliveries; an entry with only kafka clients cannot set it (Kafka consumers are limited by consume.bytesPerSecond)")
			}
		}
		out = append(out, nc)
	})
	return out
}

// clientNames decodes client names: exact, or a prefix ending in a single *.
func (d *decoder) clientNames(n *yaml.Node, path string) []string {
	names := d.strList(n, path)
	for i, s := range names {
		at := n
		if n.Kind == yaml.SequenceNode && i < len(n.Content) {
			at = n.Content[i]
		}
		if s == "" || strings.Contains(strings.TrimSuffix(s, "*"), "*") || len(s) > 255 {
			d.c.add(d.pos(at), path+"["+itoa(i)+"]", "%q is not a client name: exact, or a prefix ending in * (at most 255 characters)", s)
		}
	}
	return names
}

// resolveClients checks a policy's client limits: each names a rate, its bursts default to one
// second of it (at most a quarter of the tenant's), and a byte burst must fit one message of the
// tenant's maximum size.
func resolveClients(p *LimitPolicy, tenant Effective, c *collector) *EffectiveClients {
	cl := p.Clients
	if !cl.Set {
		return nil
	}
	const path = "spec.clients"
	if cl.Default == nil && len(cl.Named) == 0 {
		c.add(cl.Pos, path, "set default, named, or both")
	}
	out := &EffectiveClients{Pool: DefaultClientPool}
	switch q := cl.Pool; {
	case q.Set && cl.Default == nil:
		c.add(q.Pos, path+".pool", "sizes the buckets of the clients under default: set default too")
	case q.Unlimited || (q.Set && (q.Value < 1 || q.Value > maxClientPool)):
		c.add(q.Pos, path+".pool", "must be between 1 and %d", maxClientPool)
	case q.Set:
		out.Pool = q.Value
	}
	if cl.Default != nil {
		e := resolveClientLimits(*cl.Default, path+".default", tenant, c)
		out.Default = &e
	}
	seen := map[string]int{}
	for i, nc := range cl.Named {
		np := path + ".named[" + itoa(i) + "]"
		for proto, names := range map[string][]string{"nats": nc.Match.NATS, "kafka": nc.Match.Kafka} {
			for _, name := range names {
				key := proto + ":" + name
				if first, dup := seen[key]; dup {
					c.add(nc.Pos, np+".match."+proto, "%q is already matched by named[%d]", name, first)
				} else {
					seen[key] = i
				}
			}
		}
		out.Named = append(out.Named, EffectiveNamedClient{NATS: nc.Match.NATS, Kafka: nc.Match.Kafka,
			Limits: resolveClientLimits(nc.Limits, np+".limits", tenant, c)})
	}
	return out
}

func resolveClientLimits(l ClientLimits, path string, tenant Effective, c *collector) Effective {
	r := l.Rate
	for _, q := range []struct {
		q     Quantity
		field string
	}{{r.MessagesPerSecond, "rate.messagesPerSecond"}, {r.BytesPerSecond, "rate.bytesPerSecond"},
		{r.BurstMessages, "rate.burstMessages"}, {r.BurstBytes, "rate.burstBytes"},
		{l.InFlight, "inFlight"}, {l.MaxMessages, "queue.maxMessages"}, {l.Connections, "connections"},
		{l.Consume.BytesPerSecond, "consume.bytesPerSecond"}, {l.Consume.BurstBytes, "consume.burstBytes"},
		{l.Consume.MessagesPerSecond, "consume.messagesPerSecond"}} {
		switch {
		case q.q.Unlimited:
			c.add(q.q.Pos, path+"."+q.field, "a client's limit cannot be unlimited: leave it out")
		case q.q.Set && q.q.Value == 0:
			c.add(q.q.Pos, path+"."+q.field, "must be at least 1")
		}
	}
	rateSet := r.MessagesPerSecond.Set || r.BytesPerSecond.Set || r.BurstMessages.Set || r.BurstBytes.Set
	consumeSet := l.Consume.BytesPerSecond.Set || l.Consume.BurstBytes.Set || l.Consume.MessagesPerSecond.Set
	switch {
	case rateSet && !r.MessagesPerSecond.Finite() && !r.BytesPerSecond.Finite():
		c.add(l.Pos, path+".rate", "needs messagesPerSecond, bytesPerSecond, or both")
	case !rateSet && !l.InFlight.Set && !l.MaxMessages.Set && !l.Connections.Set && !consumeSet:
		c.add(l.Pos, path, "set rate, inFlight, queue, connections or consume")
	}
	// The rest is the override's rule: bursts of one second at most a quarter of the tenant's,
	// a byte burst that fits a message, a consume burst that needs its rate.
	e := resolveOverride(Limits{Rate: r, InFlight: l.InFlight, Consume: l.Consume}, path, l.Pos, tenant, "one client", c)
	if l.MaxMessages.Finite() {
		e.QueueMaxMessages = ptr(l.MaxMessages.Value)
	}
	if l.Connections.Finite() {
		e.Connections = ptr(l.Connections.Value)
	}
	return e
}
