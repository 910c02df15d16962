// Package compile turns a validated policy set into the Wasm filter's configuration.
//
// The filter reads this JSON once per (re)configuration, never on the data path. Every limit is
// resolved here (defaults applied, `unlimited` as an absent field), so the filter never needs
// to know the defaulting rules.
package compile

import (
	"encoding/json"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// Protocol selects which listener a filter configuration is for.
type Protocol string

const (
	NATS  Protocol = "nats"
	Kafka Protocol = "kafka"
)

// FilterConfig is the document the Wasm filter's on_configure parses. Field names are the
// filter's contract: wasm-filter/core/src/config.rs reads the same names.
type FilterConfig struct {
	Version       string   `json:"version"`
	Protocol      Protocol `json:"protocol"`
	DefaultTenant string   `json:"defaultTenant"`
	Tenants       []Tenant `json:"tenants"`
	// BrokerRoutes (Kafka) map the addresses brokers advertise to the gateway's, so the filter
	// can rewrite Metadata and FindCoordinator responses.
	BrokerRoutes []BrokerRoute `json:"brokerRoutes,omitempty"`
	// NATSListeners (NATS) say how each listener's clients are told of the gateway in INFO,
	// in place of the servers' own addresses.
	NATSListeners []NATSListener `json:"natsListeners,omitempty"`
	// KafkaClusters (Kafka) are the clusters the gateway discovers: which gateway port each
	// node id is handed out at, and which node ids it fronts yet.
	KafkaClusters []KafkaCluster `json:"kafkaClusters,omitempty"`
	// Quota is where global tenants' limits are shared among replicas (weighstation quota).
	Quota *Quota `json:"quota,omitempty"`
	// Reports is where the filter's workers report usage and sampled decisions (the control
	// plane's /v1/report); absent: they do not.
	Reports *Reports `json:"reports,omitempty"`
	// Feed (with Reports): the filter's workers poll the control plane for tenant changes and
	// the live replica count (internal/tenantfeed); this configuration is where they start.
	Feed bool `json:"feed,omitempty"`
	// Backlog bounds what the gateway may owe one client of its own answers (refusals, PONGs);
	// absent: the filter's defaults (32 KiB, 10 s).
	Backlog *Backlog `json:"backlog,omitempty"`
	// Rebuild counts the times this configuration was sent again. Envoy skips a filter
	// configuration equal to the one it holds, and one sent again is sent to be built anew: the
	// last may have failed to load (xds.Server.resendSnapshot). The filter has no use for it.
	Rebuild int `json:"rebuild,omitempty"`
}

// Backlog is what the filter may owe one client before it reads nothing more from it, and how
// long such a client may take nothing before it is closed as a slow consumer
// (wasm-filter/core/src/backlog.rs).
type Backlog struct {
	MaxBytes   uint32 `json:"maxBytes"`
	DeadlineMs int64  `json:"deadlineMs"`
}

// ReportsCluster is the Envoy cluster through which the filter reaches the control plane.
const ReportsCluster = "weighstation_control_plane"

// Reports tells the filter where to report and how to sample decisions.
type Reports struct {
	Cluster            string `json:"cluster"`
	Authority          string `json:"authority"`
	DecisionsPerSecond uint32 `json:"decisionsPerSecond"`
	DelayThresholdMs   uint64 `json:"delayThresholdMs"`
}

// QuotaCluster is the Envoy cluster through which the filter reaches the quota service.
const QuotaCluster = "weighstation_quota"

// Quota tells the filter how to reach the quota service and how many replicas are live: what a
// replica divides a global limit by when the service cannot answer.
type Quota struct {
	Cluster   string `json:"cluster"`
	Authority string `json:"authority"`
	Replicas  int    `json:"replicas"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// BrokerRoute is one broker the gateway fronts: the address it advertises (host:port) and the
// address clients should use instead.
type BrokerRoute struct {
	Upstream  string `json:"upstream"`
	Advertise string `json:"advertise"`
}

// KafkaCluster is one listener kind of a discovered Kafka cluster as the filter rewrites its
// responses (wasm-filter/core/src/kafka/brokers.rs): node id n is at AdvertiseHost, port
// AdvertiseFirstPort + (n - FirstNode)·Stride, once it is among Fronted; any other is withheld.
type KafkaCluster struct {
	Chain              string  `json:"chain"`
	FirstNode          int32   `json:"firstNode"`
	LastNode           int32   `json:"lastNode"`
	AdvertiseHost      string  `json:"advertiseHost"`
	AdvertiseFirstPort uint32  `json:"advertiseFirstPort"`
	Stride             uint32  `json:"stride"`
	Fronted            []int32 `json:"fronted"`
}

// NATSListener is one NATS listener as its clients' INFOs name it: the Envoy filter chain that
// serves it, its address (host, port) and the gateway addresses a client may reconnect to
// (connect_urls; none: the field is removed).
type NATSListener struct {
	Chain       string   `json:"chain"`
	Host        string   `json:"host"`
	Port        uint32   `json:"port"`
	ConnectURLs []string `json:"connectUrls,omitempty"`
}

type Tenant struct {
	Name      string     `json:"name"`
	Policy    string     `json:"policy"` // the LimitPolicy's metadata.name
	DryRun    bool       `json:"dryRun,omitempty"`
	Reject    bool       `json:"reject,omitempty"` // onLimit: reject; otherwise delay
	Global    bool       `json:"global,omitempty"` // scope: global
	Identify  Identify   `json:"identify"`
	Limits    Limits     `json:"limits"`
	Overrides []Override `json:"overrides,omitempty"`
	// Permissions (Kafka) list the data the tenant may touch and grant destructive,
	// config-altering and cluster-altering requests (wasm-filter/core/src/kafka/authz); an
	// absent data list is every name, an absent grant none.
	Permissions *Permissions `json:"permissions,omitempty"`
	// NATSPermissions (NATS) say what subjects the tenant may publish and subscribe to
	// (wasm-filter/core/src/nats/authz.rs); absent: every subject, and no stream's
	// administration.
	NATSPermissions *NATSPermissions `json:"natsPermissions,omitempty"`
	// Clients limits each client of the tenant (wasm-filter/core/src/clients); absent: none.
	Clients *Clients `json:"clients,omitempty"`
}

// Clients are a tenant's client limits for one protocol. Default (absent: a client no entry
// names is limited only by its tenant) is each other client's, in one of Pool buckets.
type Clients struct {
	Default *Limits       `json:"default,omitempty"`
	Named   []NamedClient `json:"named,omitempty"`
	Pool    uint64        `json:"pool"`
}

// NamedClient is one bucket for the clients it names: exactly, or by a prefix ending in *.
type NamedClient struct {
	Names  []string `json:"names"`
	Limits Limits   `json:"limits"`
}

// NATSPermissions are a tenant's resolved NATS permissions. A nil list is every subject; an
// empty one (written as []) none.
type NATSPermissions struct {
	Publish        *[]string `json:"publish,omitempty"`
	Subscribe      *[]string `json:"subscribe,omitempty"`
	JetStreamAdmin []string  `json:"jetStreamAdmin,omitempty"`
}

// Permissions are a tenant's resolved grants (policy.EffectivePermissions). A nil data list
// (Produce, Consume, Groups, TransactionalIDs, CreateTopics) is every name; an empty one
// (written as []) none.
type Permissions struct {
	Produce           *[]string `json:"produce,omitempty"`
	Consume           *[]string `json:"consume,omitempty"`
	Groups            *[]string `json:"groups,omitempty"`
	TransactionalIDs  *[]string `json:"transactionalIds,omitempty"`
	CreateTopics      *[]string `json:"createTopics,omitempty"`
	DeleteTopics      []string  `json:"deleteTopics,omitempty"`
	AlterTopicConfigs []string  `json:"alterTopicConfigs,omitempty"`
	DeleteGroups      []string  `json:"deleteGroups,omitempty"`
	Cluster           []string  `json:"cluster,omitempty"`
}

type Identify struct {
	NATSUsers             []string `json:"natsUsers,omitempty"`
	NATSNkeys             []string `json:"natsNkeys,omitempty"`
	NATSAccounts          []string `json:"natsAccounts,omitempty"`
	KafkaClientIDPrefixes []string `json:"kafkaClientIdPrefixes,omitempty"`
	KafkaSASLPrincipals   []string `json:"kafkaSaslPrincipals,omitempty"`
	KafkaOAuthClaim       string   `json:"kafkaOauthClaim,omitempty"`
	TLSSubjects           []string `json:"tlsSubjects,omitempty"`
	TLSSANs               []string `json:"tlsSans,omitempty"`
}

// Limits are resolved bounds; an absent field is unlimited.
type Limits struct {
	MaxMessageBytes   *uint64 `json:"maxMessageBytes,omitempty"`
	MessagesPerSecond *uint64 `json:"messagesPerSecond,omitempty"`
	BytesPerSecond    *uint64 `json:"bytesPerSecond,omitempty"`
	BurstMessages     *uint64 `json:"burstMessages,omitempty"`
	BurstBytes        *uint64 `json:"burstBytes,omitempty"`
	InFlight          *uint64 `json:"inFlight,omitempty"`
	QueueMaxMessages  *uint64 `json:"queueMaxMessages,omitempty"`
	QueueMaxWaitMs    *uint64 `json:"queueMaxWaitMs,omitempty"`
	Connections       *uint64 `json:"connections,omitempty"`
	// The read side (limits.consume).
	ConsumeBytesPerSecond *uint64 `json:"consumeBytesPerSecond,omitempty"`
	ConsumeBurstBytes     *uint64 `json:"consumeBurstBytes,omitempty"`
	// NATS deliveries per second.
	ConsumeMessagesPerSecond *uint64 `json:"consumeMessagesPerSecond,omitempty"`
}

// Override narrows limits for matching subjects (NATS) or topics (Kafka) of one protocol.
type Override struct {
	Patterns []string `json:"patterns"`
	Limits   Limits   `json:"limits"`
}

// Filter builds the configuration for one protocol's filter, for a gateway of `replicas` live
// replicas.
func Filter(set *policy.Set, version string, proto Protocol, replicas int) FilterConfig {
	fc := Frame(set, version, proto, replicas)
	fc.Tenants = make([]Tenant, 0, len(set.Tenants))
	for _, t := range set.Tenants {
		fc.Tenants = append(fc.Tenants, TenantOf(t, proto))
	}
	return fc
}

// Frame is Filter without the tenants.
func Frame(set *policy.Set, version string, proto Protocol, replicas int) FilterConfig {
	fc := FilterConfig{Version: version, Protocol: proto, DefaultTenant: set.DefaultTenant, Tenants: []Tenant{}}
	if q := set.QuotaService; q != nil {
		fc.Quota = &Quota{Cluster: QuotaCluster, Authority: q.Address, Replicas: max(replicas, 1), TimeoutMs: q.Timeout.Milliseconds()}
	}
	return fc
}

// TenantOf is one tenant as proto's filter reads it.
func TenantOf(t *policy.Tenant, proto Protocol) Tenant {
	p := &t.Policy
	ct := Tenant{
		Name:   p.Tenant,
		Policy: p.Name,
		DryRun: p.Mode == policy.ModeDryRun,
		Reject: p.OnLimit == policy.OnLimitReject,
		Global: p.Scope == policy.ScopeGlobal,
		Limits: limits(t.Limits),
	}
	ct.Identify.TLSSubjects = p.Identify.TLSSubjects
	ct.Identify.TLSSANs = p.Identify.TLSSANs
	switch proto {
	case NATS:
		ct.Identify.NATSUsers = p.Identify.NATSUsers
		ct.Identify.NATSNkeys = p.Identify.NATSNkeys
		ct.Identify.NATSAccounts = p.Identify.NATSAccounts
		if g := t.Permissions; g.NATSPublish != nil || g.NATSSubscribe != nil || len(g.NATSJetStreamAdmin) > 0 {
			ct.NATSPermissions = &NATSPermissions{Publish: list(g.NATSPublish), Subscribe: list(g.NATSSubscribe),
				JetStreamAdmin: g.NATSJetStreamAdmin}
		}
	case Kafka:
		ct.Identify.KafkaClientIDPrefixes = p.Identify.KafkaClientIDPrefixes
		ct.Identify.KafkaSASLPrincipals = p.Identify.KafkaSASLPrincipals
		ct.Identify.KafkaOAuthClaim = p.Identify.KafkaOAuthClaim
		if g := t.Permissions; g.KafkaProduce != nil || g.KafkaConsume != nil || g.KafkaGroups != nil ||
			g.KafkaTransactionalIDs != nil || g.KafkaCreateTopics != nil ||
			len(g.KafkaDeleteTopics)+len(g.KafkaAlterTopicConfigs)+len(g.KafkaDeleteGroups)+len(g.KafkaCluster) > 0 {
			ct.Permissions = &Permissions{Produce: list(g.KafkaProduce), Consume: list(g.KafkaConsume),
				Groups: list(g.KafkaGroups), TransactionalIDs: list(g.KafkaTransactionalIDs),
				CreateTopics: list(g.KafkaCreateTopics),
				DeleteTopics: g.KafkaDeleteTopics, AlterTopicConfigs: g.KafkaAlterTopicConfigs,
				DeleteGroups: g.KafkaDeleteGroups, Cluster: g.KafkaCluster}
		}
	}
	for _, o := range t.Overrides {
		if patterns := proto.pick(o.NATS, o.Kafka); len(patterns) > 0 {
			ct.Overrides = append(ct.Overrides, Override{Patterns: patterns, Limits: limits(o.Limits)})
		}
	}
	ct.Clients = clients(t.Clients, proto)
	return ct
}

// pick is the one of a NATS and a Kafka list that is the protocol's.
func (p Protocol) pick(nats, kafka []string) []string {
	if p == Kafka {
		return kafka
	}
	return nats
}

// clients keeps the client limits that apply to the protocol: the default, and the named
// entries that name one of its clients.
func clients(c *policy.EffectiveClients, proto Protocol) *Clients {
	if c == nil {
		return nil
	}
	out := &Clients{Pool: c.Pool}
	if c.Default != nil {
		l := limits(*c.Default)
		out.Default = &l
	}
	for _, n := range c.Named {
		if names := proto.pick(n.NATS, n.Kafka); len(names) > 0 {
			out.Named = append(out.Named, NamedClient{Names: names, Limits: limits(n.Limits)})
		}
	}
	if out.Default == nil && len(out.Named) == 0 {
		return nil
	}
	return out
}

// list keeps a resolved list's absence: nil (every name) stays absent, an empty list (none)
// is written as [].
func list(l []string) *[]string {
	if l == nil {
		return nil
	}
	return &l
}

func limits(e policy.Effective) Limits {
	l := Limits{
		MaxMessageBytes:   e.MaxMessageBytes,
		MessagesPerSecond: e.MessagesPerSecond,
		BytesPerSecond:    e.BytesPerSecond,
		BurstMessages:     e.BurstMessages,
		BurstBytes:        e.BurstBytes,
		InFlight:          e.InFlight,
		QueueMaxMessages:  e.QueueMaxMessages,
		Connections:       e.Connections,

		ConsumeBytesPerSecond: e.ConsumeBytesPerSecond,
		ConsumeBurstBytes:     e.ConsumeBurstBytes,

		ConsumeMessagesPerSecond: e.ConsumeMessagesPerSecond,
	}
	if e.QueueMaxWait != nil {
		ms := uint64(*e.QueueMaxWait / time.Millisecond)
		l.QueueMaxWaitMs = &ms
	}
	return l
}

// JSON renders the configuration; it cannot fail for these types.
func (fc FilterConfig) JSON() string {
	b, err := json.Marshal(fc)
	if err != nil {
		panic(err) // unreachable: only plain structs, strings and numbers
	}
	return string(b)
}
