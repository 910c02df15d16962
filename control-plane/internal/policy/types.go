// Package policy loads, validates and resolves weighstation policy documents
// (LimitPolicy and GatewayDefaults, contract §2).
package policy

import "time"

const (
	APIVersion         = "weighstation.io/v1alpha1"
	KindLimitPolicy    = "LimitPolicy"
	KindGatewayDefault = "GatewayDefaults"
)

// Mode says whether a tenant's limits are enforced or only counted.
type Mode string

const (
	ModeEnforce Mode = "enforce"
	ModeDryRun  Mode = "dryRun"
)

// OnLimit says what happens to a message that cannot be admitted now.
type OnLimit string

const (
	OnLimitDelay  OnLimit = "delay"
	OnLimitReject OnLimit = "reject"
)

// Quantity is one limit value as written: absent, the literal `unlimited`, or a number.
type Quantity struct {
	Set       bool
	Unlimited bool
	Value     uint64
	Pos       Pos
}

// Finite reports whether the quantity is a concrete bound.
func (q Quantity) Finite() bool { return q.Set && !q.Unlimited }

// Span is a duration limit as written: absent, `unlimited`, or a Go duration.
type Span struct {
	Set       bool
	Unlimited bool
	Value     time.Duration
	Pos       Pos
}

// Pos is a place in a policy file.
type Pos struct {
	File   string
	Line   int
	Column int
}

type Rate struct {
	MessagesPerSecond Quantity
	BytesPerSecond    Quantity
	BurstMessages     Quantity
	BurstBytes        Quantity
}

// Consume is the read side's bucket (spec.limits.consume).
type Consume struct {
	BytesPerSecond    Quantity
	BurstBytes        Quantity
	MessagesPerSecond Quantity
}

type Queue struct {
	MaxMessages Quantity
	MaxWait     Span
}

// Limits has the shape of `spec.limits`, `spec.defaultLimits` and `overrides[].limits`.
type Limits struct {
	MaxMessageBytes Quantity
	Rate            Rate
	InFlight        Quantity
	Queue           Queue
	Connections     Quantity
	Consume         Consume
}

// Identify has the shape of `spec.identify`: who a tenant's connections are. Credentials count
// only once the broker accepted them; a client certificate once Envoy verified it; a client.id
// prefix is claimed and attributes only connections that authenticated in no way.
type Identify struct {
	NATSUsers             []string
	NATSNkeys             []string // user public keys (U…): an nkey user, or the subject of a user JWT
	NATSAccounts          []string // account public keys (A…) of user JWTs
	KafkaClientIDPrefixes []string
	KafkaSASLPrincipals   []string // PLAIN/SCRAM username; OAUTHBEARER: the claim KafkaOAuthClaim names
	KafkaOAuthClaim       string   // default "sub"
	KafkaOAuthClaimPos    Pos
	TLSSubjects           []string // client certificate subject, RFC 2253 as Envoy renders it
	TLSSANs               []string // client certificate URI or DNS SAN
	Pos                   Pos
	Set                   bool
}

type Match struct {
	NATS  []string
	Kafka []string
}

type Override struct {
	Match  Match
	Limits Limits
	Pos    Pos
}

// Scope says whom a tenant's limits are for: each gateway replica alone, or all together.
type Scope string

const (
	ScopePerGateway Scope = "perGateway"
	ScopeGlobal     Scope = "global"
)

// QuotaService is where replicas share global limits (`GatewayDefaults.spec.quotaService`):
// the `weighstation quota` service, which keeps its state in Redis.
type QuotaService struct {
	Address string // host:port
	Timeout time.Duration
	Pos     Pos
}

// DefaultQuotaTimeout is how long a replica waits for the quota service before falling back.
const DefaultQuotaTimeout = 500 * time.Millisecond

// LimitPolicy is one tenant's policy document.
type LimitPolicy struct {
	Name        string
	Tenant      string
	Identify    Identify
	Mode        Mode
	OnLimit     OnLimit
	Scope       Scope
	ScopePos    Pos
	Limits      Limits
	Overrides   []Override
	Permissions Permissions
	Clients     Clients
	Pos         Pos // of the document
	TenantPos   Pos
}

// GatewayDefaults names the default tenant and the limits every policy inherits.
type GatewayDefaults struct {
	Name               string
	DefaultTenant      string
	DefaultLimits      Limits
	DefaultPermissions Permissions
	QuotaService       *QuotaService
	Grants             []Grant // objects only: see Grant
	Pos                Pos
	TenantPos          Pos
}

// Grant lets the LimitPolicy objects of some namespaces define some tenants and claim some
// identities (GatewayDefaults spec.grants). A value ending in * grants every value with that
// prefix; a client.id prefix is granted when it starts with a granted prefix.
type Grant struct {
	Namespaces       []string
	Tenants          []string
	NATSUsers        []string
	NATSNkeys        []string
	NATSAccounts     []string
	SASLPrincipals   []string
	ClientIDPrefixes []string
	OAuthClaims      []string
	TLSSubjects      []string
	TLSSANs          []string
	// What the policies may permit in spec.permissions.
	Permissions Permissions
}

// Tenant is one LimitPolicy with its limits and permissions resolved against the defaults.
type Tenant struct {
	Policy      LimitPolicy
	Limits      Effective
	Overrides   []EffectiveOverride
	Permissions EffectivePermissions
	Clients     *EffectiveClients // nil: no client limits
}

// EffectiveOverride narrows some limits for matching subjects or topics; a nil bound in
// Limits means the override does not narrow that limit.
type EffectiveOverride struct {
	NATS   []string
	Kafka  []string
	Limits Effective
}

// Set is a whole, valid policy directory.
type Set struct {
	DefaultTenant string
	QuotaService  *QuotaService // nil: no tenant is global
	// Tenants are sorted by tenant name. Sets loaded one after another share the Tenants of
	// unchanged policies (Decoded), and a publish recompiles only the others (by pointer):
	// a Tenant is never changed once in a set.
	Tenants []*Tenant
	Hash    string // sha256 over the files' names and their contents' sha256, in path order
	// Warnings are findings that do not stop the set loading (see bursts.go), in position order.
	Warnings Errors
}
