package v1alpha1

// Identify says who a tenant's connections are; any match wins. Credentials count once the
// broker accepted them, a client certificate once Envoy verified it; a client.id prefix is
// claimed and attributes only connections that authenticated in no way.
type Identify struct {
	// NATS identities.
	// +optional
	NATS *NATSIdentify `json:"nats,omitempty"`
	// Kafka identities.
	// +optional
	Kafka *KafkaIdentify `json:"kafka,omitempty"`
	// Client certificate identities; need a listener with a client CA.
	// +optional
	TLS *TLSIdentify `json:"tls,omitempty"`
}

// NATSIdentify names NATS clients by what nats-server accepted in their CONNECT.
type NATSIdentify struct {
	// CONNECT user names; count once nats-server accepted the CONNECT.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Users []string `json:"users,omitempty"`
	// User public keys (U…): an nkey user, or the subject of a user JWT; once accepted.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Pattern=`^U[A-Z2-7]{55}$`
	Nkeys []string `json:"nkeys,omitempty"`
	// Account public keys (A…) of user JWTs (the JWT's issuer account); once accepted.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Pattern=`^A[A-Z2-7]{55}$`
	Accounts []string `json:"accounts,omitempty"`
}

// KafkaIdentify names Kafka clients by their SASL principal or claimed client.id.
// +kubebuilder:validation:XValidation:rule="!has(self.oauthClaim) || has(self.saslPrincipals)",message="oauthClaim names the token claim saslPrincipals are matched against: set saslPrincipals too",fieldPath=".oauthClaim"
type KafkaIdentify struct {
	// Request-header client.id prefixes: claimed, never verified; attribute only a connection
	// that authenticated in no way.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	ClientIDPrefixes []string `json:"clientIdPrefixes,omitempty"`
	// The SASL principal the broker accepted (SaslAuthenticate error_code 0): PLAIN and
	// SCRAM-SHA-256/512 username, OAUTHBEARER token claim.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	SASLPrincipals []string `json:"saslPrincipals,omitempty"`
	// The OAUTHBEARER claim saslPrincipals is matched against (default sub); needs saslPrincipals.
	// +optional
	// +kubebuilder:validation:MinLength=1
	OAuthClaim string `json:"oauthClaim,omitempty"`
}

// TLSIdentify names clients by the certificate Envoy verified.
type TLSIdentify struct {
	// Client certificate subject, as Envoy renders it (RFC 2253, e.g. CN=billing,O=Acme).
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Subjects []string `json:"subjects,omitempty"`
	// Client certificate URI or DNS SAN (Envoy exposes the first of each).
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	SANs []string `json:"sans,omitempty"`
}
