package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GatewayDefaults is the platform's: the default tenant, the limits every LimitPolicy inherits,
// the quota service and, on Kubernetes, which namespaces may define which tenants.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gwd,categories=weighstation
// +kubebuilder:printcolumn:name="Default tenant",type=string,JSONPath=`.spec.defaultTenant`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (lower-case letters, digits and '-', at most 63)"
type GatewayDefaults struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GatewayDefaultsSpec `json:"spec"`
	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// GatewayDefaultsSpec is the gateway-wide part of the policy.
// +kubebuilder:validation:XValidation:rule="!has(self.defaultLimits) || !has(self.defaultLimits.queue) || !has(self.defaultLimits.queue.maxWait) || self.defaultLimits.queue.maxWait != 'unlimited'",message="cannot be unlimited: a held message must be refused at some point",fieldPath=".defaultLimits.queue.maxWait"
type GatewayDefaultsSpec struct {
	// The tenant of clients no identity matches; it must have a LimitPolicy.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	DefaultTenant string `json:"defaultTenant"`
	// Limits every LimitPolicy inherits where it leaves one out.
	// +optional
	DefaultLimits *Limits `json:"defaultLimits,omitempty"`
	// Permissions every LimitPolicy inherits where it states none.
	// +optional
	DefaultPermissions *Permissions `json:"defaultPermissions,omitempty"`
	// The weighstation quota service, through which replicas share global limits.
	// +optional
	QuotaService *QuotaService `json:"quotaService,omitempty"`
	// Kubernetes only: which namespaces' LimitPolicies may define which tenants and claim which
	// identities. LimitPolicies in the control plane's own namespace need no grant; any other
	// namespace's are Accepted=False NotPermitted unless a grant covers their tenant and every
	// identity they claim. A policy directory has no namespaces: files may not set it.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	Grants []TenantGrant `json:"grants,omitempty"`
}

// QuotaService is where replicas share global limits.
type QuotaService struct {
	// host:port of `weighstation quota`.
	// +required
	// +kubebuilder:validation:Pattern=`^[^\s]+:[0-9]+$`
	Address string `json:"address"`
	// How long a replica waits for it before falling back (10ms to 5s, default 500ms).
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('5s')",message="must be within 10ms..5s"
	Timeout string `json:"timeout,omitempty"`
}

// TenantGrant lets the LimitPolicies of some namespaces define some tenants and claim some
// identities. In every list a value ending in * grants every value with that prefix.
type TenantGrant struct {
	// The namespaces whose LimitPolicies this grant covers.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Namespaces []string `json:"namespaces"`
	// The tenants they may define.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Tenants []string `json:"tenants"`
	// The identities they may claim in spec.identify; a policy claiming any other is NotPermitted.
	// +optional
	Identities *IdentityGrant `json:"identities,omitempty"`
	// What their policies may permit in spec.permissions: each pattern a policy grants must be
	// one of these or start with the prefix of one ending in *. A policy granting anything
	// else is NotPermitted. A list set here whose default is every name (NATS publish and
	// subscribe; Kafka produce, consume, groups, transactionalIds, createTopics) binds a
	// policy that leaves it out too: it must state the list within the grant.
	// +optional
	Permissions *Permissions `json:"permissions,omitempty"`
}

// IdentityGrant lists identities by the spec.identify field that claims them. A client.id
// prefix is granted when it starts with a granted prefix.
type IdentityGrant struct {
	// spec.identify.nats.users
	// +optional
	NATSUsers []string `json:"natsUsers,omitempty"`
	// spec.identify.nats.nkeys
	// +optional
	NATSNkeys []string `json:"natsNkeys,omitempty"`
	// spec.identify.nats.accounts
	// +optional
	NATSAccounts []string `json:"natsAccounts,omitempty"`
	// spec.identify.kafka.saslPrincipals
	// +optional
	SASLPrincipals []string `json:"saslPrincipals,omitempty"`
	// spec.identify.kafka.clientIdPrefixes
	// +optional
	ClientIDPrefixes []string `json:"clientIdPrefixes,omitempty"`
	// spec.identify.kafka.oauthClaim other than sub: the claim decides which tokens a granted
	// principal matches
	// +optional
	OAuthClaims []string `json:"oauthClaims,omitempty"`
	// spec.identify.tls.subjects
	// +optional
	TLSSubjects []string `json:"tlsSubjects,omitempty"`
	// spec.identify.tls.sans
	// +optional
	TLSSANs []string `json:"tlsSans,omitempty"`
}
