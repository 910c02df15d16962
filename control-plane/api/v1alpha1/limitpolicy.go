package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// LimitPolicy is one tenant's limits and the identities its connections are known by.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lp,categories=weighstation
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenant`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Messages/s",type=string,JSONPath=`.spec.limits.rate.messagesPerSecond`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (lower-case letters, digits and '-', at most 63)"
type LimitPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec LimitPolicySpec `json:"spec"`
	// +optional
	Status LimitPolicyStatus `json:"status,omitempty"`
}

// LimitPolicyStatus is a policy's conditions, and what its tenant did over the last minute.
type LimitPolicyStatus struct {
	PolicyStatus `json:",inline"`
	// The tenant's traffic over the last minute, across every gateway replica and protocol:
	// written when it changes, at most every 10 s.
	// +optional
	Usage *UsageSummary `json:"usage,omitempty"`
}

// UsageSummary is a tenant's last minute, as its team sees it on its LimitPolicy.
type UsageSummary struct {
	// The end of the minute summed.
	// +required
	Until metav1.Time `json:"until"`
	// Messages (NATS messages, Kafka records) admitted.
	// +required
	Admitted int64 `json:"admitted"`
	// Messages refused, by reason (size, rate, inflight, queue, connections, permission); a
	// reason with none is left out.
	// +optional
	// +kubebuilder:validation:MaxProperties=6
	Refused map[string]int64 `json:"refused,omitempty"`
	// Bytes delivered to the tenant's consumers.
	// +optional
	ConsumedBytes int64 `json:"consumedBytes,omitempty"`
	// The clients refused most (spec.clients), most first.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	TopClients []ClientRefusals `json:"topClients,omitempty"`
}

// ClientRefusals is one client's refusals over the summary's minute.
type ClientRefusals struct {
	// The client's name (a Kafka client.id, a NATS connection name, user or nkey), or a named
	// entry's names.
	// +required
	// +kubebuilder:validation:MaxLength=255
	Client string `json:"client"`
	// +required
	Refused int64 `json:"refused"`
}

// LimitPolicySpec is what a LimitPolicy says about its tenant.
type LimitPolicySpec struct {
	// The tenant this policy governs; unique; a DNS label (it becomes a metric label).
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Tenant string `json:"tenant"`
	// How traffic is attributed to the tenant (any match wins). May be omitted only for the
	// default tenant.
	// +optional
	Identify *Identify `json:"identify,omitempty"`
	// enforce, or dryRun: count and log would-be violations, forward everything.
	// +optional
	// +kubebuilder:validation:Enum=enforce;dryRun
	// +kubebuilder:default=enforce
	Mode string `json:"mode,omitempty"`
	// delay (hold the sender: backpressure, bounded by the queue) or reject (fail fast).
	// +optional
	// +kubebuilder:validation:Enum=delay;reject
	// +kubebuilder:default=delay
	OnLimit string `json:"onLimit,omitempty"`
	// perGateway (each Envoy replica enforces the limits on its own) or global (the limits hold
	// across every replica together; needs GatewayDefaults spec.quotaService).
	// +optional
	// +kubebuilder:validation:Enum=perGateway;global
	// +kubebuilder:default=perGateway
	Scope string `json:"scope,omitempty"`
	// The tenant's limits; what it leaves out comes from GatewayDefaults spec.defaultLimits,
	// then the built-in defaults.
	// +optional
	Limits *Limits `json:"limits,omitempty"`
	// What the tenant may do, whatever its rate; what it leaves out comes from GatewayDefaults
	// spec.defaultPermissions, then the built-in default (docs/security.md).
	// +optional
	Permissions *Permissions `json:"permissions,omitempty"`
	// Narrower limits for some subjects or topics; the most specific match wins.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Overrides []Override `json:"overrides,omitempty"`
	// Limits for each client of the tenant, within the tenant's.
	// +optional
	Clients *Clients `json:"clients,omitempty"`
}

// Override narrows a tenant's limits for the subjects or topics it matches.
type Override struct {
	// The subjects (NATS: whole-token * and a final >) and topics (Kafka: names with * and ?)
	// this override governs.
	// +required
	Match Match `json:"match"`
	// The narrower limits; what it leaves out is the tenant's. queue and connections are per
	// tenant and cannot be overridden.
	// +required
	Limits OverrideLimits `json:"limits"`
}

// Match lists NATS subject and Kafka topic patterns.
// +kubebuilder:validation:XValidation:rule="has(self.nats) || has(self.kafka)",message="name at least one nats or kafka pattern"
type Match struct {
	// NATS subject patterns.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	NATS []string `json:"nats,omitempty"`
	// Kafka topic patterns.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Kafka []string `json:"kafka,omitempty"`
}

// PolicyStatus is what the control plane made of an object, per Gateway API policy conventions
// (GEP-713).
type PolicyStatus struct {
	// The generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Accepted: valid, permitted and not in conflict (reasons Accepted, Invalid, Conflicted,
	// NotPermitted). Programmed: every connected gateway acknowledged a configuration holding
	// this generation (reasons Programmed, Pending, Rejected).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// The earlier generation the gateways are given while the current one is Invalid or
	// Conflicted, with its spec: every control plane replica, and one restarted, keeps it in
	// force from here.
	// +optional
	InForce *InForceGeneration `json:"inForce,omitempty"`
}

// InForceGeneration is an earlier generation of an object and its spec.
type InForceGeneration struct {
	// +required
	Generation int64 `json:"generation"`
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec runtime.RawExtension `json:"spec"`
}
