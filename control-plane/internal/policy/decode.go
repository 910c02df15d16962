package policy

import (
	"net"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decoder turns one YAML document into policy types, reporting every problem with its position.
// It walks yaml.Node trees by hand so that unknown fields and bad values are all found in one pass.
type decoder struct {
	file string
	c    *collector
	// object says the document is a Kubernetes object, rendered from what the API server
	// stored: its errors name the object and field path, not lines of the rendering, and its
	// GatewayDefaults may carry grants.
	object bool
}

func (d *decoder) pos(n *yaml.Node) Pos {
	if d.object {
		return Pos{File: d.file}
	}
	return Pos{File: d.file, Line: n.Line, Column: n.Column}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type fields map[string]func(n *yaml.Node, path string)

// mapping decodes a YAML mapping, calling the handler of each known key and reporting unknown
// or repeated keys.
func (d *decoder) mapping(n *yaml.Node, path string, known fields) {
	if n.Kind != yaml.MappingNode {
		d.c.add(d.pos(n), path, "must be a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			// A sequence, mapping or alias as a key: no field has such a name (and every one
			// has Value "", so they would all look alike).
			d.c.add(d.pos(k), join(path, "(key)"), "a field name must be a single value")
			continue
		}
		name := k.Value
		if name == "" {
			name = `""` // so that the error names a field even at the top level
		}
		p := join(path, name)
		if seen[k.Value] {
			d.c.add(d.pos(k), p, "appears more than once")
			continue
		}
		seen[k.Value] = true
		h, ok := known[k.Value]
		if to, renamed := renamedFields[p]; !ok && renamed {
			d.c.add(d.pos(k), p, "renamed to %s", to)
			continue
		}
		if !ok {
			d.c.add(d.pos(k), p, "unknown field (known: %s)", knownList(known))
			continue
		}
		h(v, p)
	}
}

// renamedFields are fields of earlier releases, by path: a policy using one is told the new name.
var renamedFields = map[string]string{
	"spec.identify.kafka.saslUsers": "saslPrincipals (the principal the broker accepted: PLAIN or SCRAM username, OAUTHBEARER claim)",
}

func knownList(known fields) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sortStrings(names)
	return strings.Join(names, ", ")
}

func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.c.add(d.pos(n), path, "must be a single value")
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path)
	if ok && n.Tag != "!!str" {
		d.c.add(d.pos(n), path, "must be a string")
		return ""
	}
	return s
}

func (d *decoder) strList(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode {
		d.c.add(d.pos(n), path, "must be a list of strings")
		return nil
	}
	if len(n.Content) == 0 {
		d.c.add(d.pos(n), path, "must not be empty")
	}
	out := make([]string, 0, len(n.Content))
	for i, e := range n.Content {
		p := path + "[" + itoa(i) + "]"
		if s := d.str(e, p); s != "" {
			out = append(out, s)
		} else if e.Kind == yaml.ScalarNode && e.Tag == "!!str" {
			d.c.add(d.pos(e), p, "must not be empty")
		}
	}
	return out
}

// nkeys decodes a list of NATS public keys of one kind ('U' user, 'A' account): 56 characters
// of base32, starting with that letter.
func (d *decoder) nkeys(n *yaml.Node, path string, prefix byte, kind string) []string {
	keys := d.strList(n, path)
	for i, k := range keys {
		if !isPublicNkey(k, prefix) {
			d.c.add(d.pos(n.Content[i]), path+"["+itoa(i)+"]", "%q is not a NATS %s public key (56 characters starting with %c)", k, kind, prefix)
		}
	}
	return keys
}

func isPublicNkey(k string, prefix byte) bool {
	if len(k) != 56 || k[0] != prefix {
		return false
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// quantity decodes a limit: `unlimited` or a value read by parse.
func (d *decoder) quantity(n *yaml.Node, path string, parse func(string) (uint64, error)) Quantity {
	q := Quantity{Set: true, Pos: d.pos(n)}
	s, ok := d.scalar(n, path)
	if !ok {
		return q
	}
	if s == unlimited {
		q.Unlimited = true
		return q
	}
	v, err := parse(s)
	if err != nil {
		d.c.add(q.Pos, path, "%v", err)
		return Quantity{} // reported once; treated as absent so no rule trips over it again
	}
	q.Value = v
	return q
}

func (d *decoder) span(n *yaml.Node, path string) Span {
	sp := Span{Set: true, Pos: d.pos(n)}
	s, ok := d.scalar(n, path)
	if !ok {
		return sp
	}
	if s == unlimited {
		sp.Unlimited = true
		return sp
	}
	v, err := parseDuration(s)
	if err != nil {
		d.c.add(sp.Pos, path, "%v", err)
		return Span{}
	}
	sp.Value = v
	return sp
}

func (d *decoder) limits(n *yaml.Node, path string) Limits {
	var l Limits
	d.mapping(n, path, fields{
		"maxMessageBytes": func(n *yaml.Node, p string) { l.MaxMessageBytes = d.quantity(n, p, parseSize) },
		"rate":            func(n *yaml.Node, p string) { l.Rate = d.rate(n, p) },
		"inFlight":        func(n *yaml.Node, p string) { l.InFlight = d.quantity(n, p, parseCount) },
		"queue": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"maxMessages": func(n *yaml.Node, p string) { l.Queue.MaxMessages = d.quantity(n, p, parseCount) },
				"maxWait":     func(n *yaml.Node, p string) { l.Queue.MaxWait = d.span(n, p) },
			})
		},
		"connections": func(n *yaml.Node, p string) { l.Connections = d.quantity(n, p, parseCount) },
		"consume":     func(n *yaml.Node, p string) { l.Consume = d.consume(n, p) },
	})
	return l
}

func (d *decoder) consume(n *yaml.Node, path string) Consume {
	var c Consume
	d.mapping(n, path, fields{
		"bytesPerSecond":    func(n *yaml.Node, p string) { c.BytesPerSecond = d.quantity(n, p, parseSize) },
		"burstBytes":        func(n *yaml.Node, p string) { c.BurstBytes = d.quantity(n, p, parseSize) },
		"messagesPerSecond": func(n *yaml.Node, p string) { c.MessagesPerSecond = d.quantity(n, p, parseCount) },
	})
	return c
}

func (d *decoder) rate(n *yaml.Node, path string) Rate {
	var r Rate
	d.mapping(n, path, fields{
		"messagesPerSecond": func(n *yaml.Node, p string) { r.MessagesPerSecond = d.quantity(n, p, parseCount) },
		"bytesPerSecond":    func(n *yaml.Node, p string) { r.BytesPerSecond = d.quantity(n, p, parseSize) },
		"burstMessages":     func(n *yaml.Node, p string) { r.BurstMessages = d.quantity(n, p, parseCount) },
		"burstBytes":        func(n *yaml.Node, p string) { r.BurstBytes = d.quantity(n, p, parseSize) },
	})
	return r
}

func (d *decoder) identify(n *yaml.Node, path string) Identify {
	id := Identify{Set: true, Pos: d.pos(n)}
	d.mapping(n, path, fields{
		"nats": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"users":    func(n *yaml.Node, p string) { id.NATSUsers = d.strList(n, p) },
				"nkeys":    func(n *yaml.Node, p string) { id.NATSNkeys = d.nkeys(n, p, 'U', "user") },
				"accounts": func(n *yaml.Node, p string) { id.NATSAccounts = d.nkeys(n, p, 'A', "account") },
			})
		},
		"kafka": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"clientIdPrefixes": func(n *yaml.Node, p string) { id.KafkaClientIDPrefixes = d.strList(n, p) },
				"saslPrincipals":   func(n *yaml.Node, p string) { id.KafkaSASLPrincipals = d.strList(n, p) },
				"oauthClaim": func(n *yaml.Node, p string) {
					id.KafkaOAuthClaim, id.KafkaOAuthClaimPos = d.str(n, p), d.pos(n)
				},
			})
		},
		"tls": func(n *yaml.Node, p string) {
			d.mapping(n, p, fields{
				"subjects": func(n *yaml.Node, p string) { id.TLSSubjects = d.strList(n, p) },
				"sans":     func(n *yaml.Node, p string) { id.TLSSANs = d.strList(n, p) },
			})
		},
	})
	if id.KafkaOAuthClaim != "" && len(id.KafkaSASLPrincipals) == 0 {
		d.c.add(id.KafkaOAuthClaimPos, path+".kafka.oauthClaim", "names the token claim saslPrincipals are matched against: set saslPrincipals too")
	}
	return id
}

func (d *decoder) quotaService(n *yaml.Node, path string) *QuotaService {
	q := &QuotaService{Timeout: DefaultQuotaTimeout, Pos: d.pos(n)}
	d.mapping(n, path, fields{
		"address": func(n *yaml.Node, p string) {
			q.Address = d.str(n, p)
			if _, port, err := net.SplitHostPort(q.Address); q.Address != "" && (err != nil || port == "") {
				d.c.add(d.pos(n), p, "%q is not host:port", q.Address)
			}
		},
		"timeout": func(n *yaml.Node, p string) {
			sp := d.span(n, p)
			switch {
			case sp.Unlimited:
				d.c.add(sp.Pos, p, "cannot be unlimited: a replica must fall back when the service does not answer")
			case sp.Set && (sp.Value < 10*time.Millisecond || sp.Value > 5*time.Second):
				d.c.add(sp.Pos, p, "%s is outside 10ms..5s", sp.Value)
			case sp.Set:
				q.Timeout = sp.Value
			}
		},
	})
	if q.Address == "" && n.Kind == yaml.MappingNode {
		d.c.add(q.Pos, path+".address", "is required")
	}
	return q
}

func (d *decoder) overrides(n *yaml.Node, path string) []Override {
	var out []Override
	d.matchedList(n, path, d.strList, func(e *yaml.Node, p string, m *Match, limits *yaml.Node) {
		o := Override{Pos: d.pos(e)}
		if m != nil {
			o.Match = *m
		}
		if limits != nil {
			o.Limits = d.limits(limits, p+".limits")
		}
		out = append(out, o)
	})
	return out
}

// matchedList decodes a list whose entries have a match (nats and kafka lists, read by names)
// and limits, both required: each gets an entry with its path, its match and its limits' node
// (each nil when missing, which is reported).
func (d *decoder) matchedList(n *yaml.Node, path string, names func(*yaml.Node, string) []string,
	each func(e *yaml.Node, p string, m *Match, limits *yaml.Node)) {
	if n.Kind != yaml.SequenceNode {
		d.c.add(d.pos(n), path, "must be a list")
		return
	}
	for i, e := range n.Content {
		p := path + "[" + itoa(i) + "]"
		var m *Match
		var limits *yaml.Node
		d.mapping(e, p, fields{
			"match": func(n *yaml.Node, p string) {
				m = &Match{}
				d.mapping(n, p, fields{
					"nats":  func(n *yaml.Node, p string) { m.NATS = names(n, p) },
					"kafka": func(n *yaml.Node, p string) { m.Kafka = names(n, p) },
				})
			},
			"limits": func(n *yaml.Node, p string) { limits = n },
		})
		if e.Kind == yaml.MappingNode && m == nil {
			d.c.add(d.pos(e), p+".match", "is required")
		}
		if e.Kind == yaml.MappingNode && limits == nil {
			d.c.add(d.pos(e), p+".limits", "is required")
		}
		each(e, p, m, limits)
	}
}

// document decodes one YAML document into a LimitPolicy or GatewayDefaults (at most one is non-nil).
func (d *decoder) document(root *yaml.Node) (*LimitPolicy, *GatewayDefaults) {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		d.c.add(d.pos(n), "(document)", "must be a mapping with apiVersion, kind, metadata and spec")
		return nil, nil
	}
	var apiVersion, kind, name string
	var specNode, metaNode *yaml.Node
	var kindPos Pos
	d.mapping(n, "", fields{
		"apiVersion": func(n *yaml.Node, p string) { apiVersion = d.str(n, p) },
		"kind":       func(n *yaml.Node, p string) { kind, kindPos = d.str(n, p), d.pos(n) },
		"metadata":   func(n *yaml.Node, p string) { metaNode = n },
		"spec":       func(n *yaml.Node, p string) { specNode = n },
	})
	docPos := d.pos(n)
	if apiVersion != APIVersion {
		d.c.add(docPos, "apiVersion", "must be %q, got %q", APIVersion, apiVersion)
	}
	if metaNode == nil {
		d.c.add(docPos, "metadata", "is required")
	} else {
		d.mapping(metaNode, "metadata", fields{"name": func(n *yaml.Node, p string) {
			name = d.str(n, p)
			if name != "" && !isDNSLabel(name) {
				d.c.add(d.pos(n), p, "%q is not a DNS label (lower-case letters, digits and '-', at most 63)", name)
			}
		}})
		if name == "" {
			d.c.add(d.pos(metaNode), "metadata.name", "is required")
		}
	}
	if specNode == nil {
		d.c.add(docPos, "spec", "is required")
		return nil, nil
	}
	switch kind {
	case KindLimitPolicy:
		lp := &LimitPolicy{Name: name, Pos: docPos, Mode: ModeEnforce, OnLimit: OnLimitDelay, Scope: ScopePerGateway}
		d.mapping(specNode, "spec", fields{
			"tenant": func(n *yaml.Node, p string) {
				lp.Tenant, lp.TenantPos = d.str(n, p), d.pos(n)
				if lp.Tenant != "" && !isDNSLabel(lp.Tenant) {
					d.c.add(lp.TenantPos, p, "%q is not a DNS label (lower-case letters, digits and '-', at most 63)", lp.Tenant)
				}
			},
			"identify": func(n *yaml.Node, p string) { lp.Identify = d.identify(n, p) },
			"mode": func(n *yaml.Node, p string) {
				switch m := Mode(d.str(n, p)); m {
				case ModeEnforce, ModeDryRun:
					lp.Mode = m
				default:
					d.c.add(d.pos(n), p, "%q is not a mode (enforce or dryRun)", m)
				}
			},
			"onLimit": func(n *yaml.Node, p string) {
				switch o := OnLimit(d.str(n, p)); o {
				case OnLimitDelay, OnLimitReject:
					lp.OnLimit = o
				default:
					d.c.add(d.pos(n), p, "%q is not an onLimit action (delay or reject)", o)
				}
			},
			"scope": func(n *yaml.Node, p string) {
				switch s := Scope(d.str(n, p)); s {
				case ScopePerGateway, ScopeGlobal:
					lp.Scope, lp.ScopePos = s, d.pos(n)
				default:
					d.c.add(d.pos(n), p, "%q is not a scope (perGateway or global)", s)
				}
			},
			"limits":      func(n *yaml.Node, p string) { lp.Limits = d.limits(n, p) },
			"overrides":   func(n *yaml.Node, p string) { lp.Overrides = d.overrides(n, p) },
			"permissions": func(n *yaml.Node, p string) { lp.Permissions = d.permissions(n, p) },
			"clients":     func(n *yaml.Node, p string) { lp.Clients = d.clients(n, p) },
		})
		if lp.Tenant == "" && lp.TenantPos == (Pos{}) {
			d.c.add(d.pos(specNode), "spec.tenant", "is required")
		}
		return lp, nil
	case KindGatewayDefault:
		gd := &GatewayDefaults{Name: name, Pos: docPos}
		d.mapping(specNode, "spec", fields{
			"defaultTenant":      func(n *yaml.Node, p string) { gd.DefaultTenant, gd.TenantPos = d.str(n, p), d.pos(n) },
			"defaultLimits":      func(n *yaml.Node, p string) { gd.DefaultLimits = d.limits(n, p) },
			"defaultPermissions": func(n *yaml.Node, p string) { gd.DefaultPermissions = d.permissions(n, p) },
			"quotaService":       func(n *yaml.Node, p string) { gd.QuotaService = d.quotaService(n, p) },
			"grants": func(n *yaml.Node, p string) {
				if !d.object {
					d.c.add(d.pos(n), p, "grants say which namespaces' LimitPolicy objects may define which tenants (--policy-source=kubernetes); a policy directory has no namespaces")
					return
				}
				gd.Grants = d.grants(n, p)
			},
		})
		if gd.DefaultTenant == "" && gd.TenantPos == (Pos{}) {
			d.c.add(d.pos(specNode), "spec.defaultTenant", "is required")
		}
		return nil, gd
	default:
		p := kindPos
		if p == (Pos{}) {
			p = docPos
		}
		d.c.add(p, "kind", "must be %s or %s, got %q", KindLimitPolicy, KindGatewayDefault, kind)
		return nil, nil
	}
}

func (d *decoder) grants(n *yaml.Node, path string) []Grant {
	if n.Kind != yaml.SequenceNode {
		d.c.add(d.pos(n), path, "must be a list")
		return nil
	}
	out := make([]Grant, 0, len(n.Content))
	for i, e := range n.Content {
		p := path + "[" + itoa(i) + "]"
		var g Grant
		d.mapping(e, p, fields{
			"namespaces": func(n *yaml.Node, p string) { g.Namespaces = d.strList(n, p) },
			"tenants":    func(n *yaml.Node, p string) { g.Tenants = d.strList(n, p) },
			"identities": func(n *yaml.Node, p string) {
				d.mapping(n, p, fields{
					"natsUsers":        func(n *yaml.Node, p string) { g.NATSUsers = d.strList(n, p) },
					"natsNkeys":        func(n *yaml.Node, p string) { g.NATSNkeys = d.strList(n, p) },
					"natsAccounts":     func(n *yaml.Node, p string) { g.NATSAccounts = d.strList(n, p) },
					"saslPrincipals":   func(n *yaml.Node, p string) { g.SASLPrincipals = d.strList(n, p) },
					"clientIdPrefixes": func(n *yaml.Node, p string) { g.ClientIDPrefixes = d.strList(n, p) },
					"oauthClaims":      func(n *yaml.Node, p string) { g.OAuthClaims = d.strList(n, p) },
					"tlsSubjects":      func(n *yaml.Node, p string) { g.TLSSubjects = d.strList(n, p) },
					"tlsSans":          func(n *yaml.Node, p string) { g.TLSSANs = d.strList(n, p) },
				})
			},
			"permissions": func(n *yaml.Node, p string) { g.Permissions = d.permissions(n, p) },
		})
		if e.Kind == yaml.MappingNode && (len(g.Namespaces) == 0 || len(g.Tenants) == 0) {
			d.c.add(d.pos(e), p, "needs namespaces and tenants")
		}
		out = append(out, g)
	}
	return out
}
