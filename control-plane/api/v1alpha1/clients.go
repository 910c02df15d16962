package v1alpha1

// Clients limits each client of a tenant within the tenant's own limits, so that one runaway
// service cannot take its whole tenant's budget. A client is what its protocol names: on Kafka
// the client.id of each request's header (as Kafka's own client-id quotas define it), on NATS
// the connection's CONNECT name, else its user or nkey. A message passes its client's bucket,
// then its override's and its tenant's; one refused by any takes tokens from none.
// +kubebuilder:validation:XValidation:rule="has(self.default) || has(self.named)",message="set default, named, or both"
// +kubebuilder:validation:XValidation:rule="!has(self.pool) || has(self.default)",message="pool sizes the buckets of the clients under default: set default too"
type Clients struct {
	// The limits of every client that no entry of named matches, each in a bucket of its own.
	// +optional
	Default *ClientLimits `json:"default,omitempty"`
	// Clients with limits of their own; the first entry that matches a client wins. Each entry
	// is one bucket, shared by every client it matches.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Named []NamedClient `json:"named,omitempty"`
	// How many clients under default hold a bucket of their own at a time, on each gateway
	// replica. A bucket is handed to another client only once it has refilled; while every
	// bucket a client could take is busy, it shares one overflow bucket at the default limits
	// (metric weighstation_client_pool_overflow). Default 1000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Pool *int32 `json:"pool,omitempty"`
}

// NamedClient gives the clients it matches their own limits.
type NamedClient struct {
	// Which clients.
	// +required
	Match ClientMatch `json:"match"`
	// Their limits.
	// +required
	Limits ClientLimits `json:"limits"`
}

// ClientMatch names clients exactly, or by a prefix ending in *.
// +kubebuilder:validation:XValidation:rule="has(self.nats) || has(self.kafka)",message="name at least one nats or kafka client"
type ClientMatch struct {
	// Kafka client.ids.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	Kafka []string `json:"kafka,omitempty"`
	// NATS connection names (CONNECT name), else users or nkeys.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	NATS []string `json:"nats,omitempty"`
}

// ClientLimits is what one client may do, within its tenant's limits.
// +kubebuilder:validation:XValidation:rule="has(self.rate) || has(self.inFlight) || has(self.queue) || has(self.connections) || has(self.consume)",message="set rate, inFlight, queue, connections or consume"
type ClientLimits struct {
	// Messages and bytes per second of one client, with their bucket depths (default one
	// second of the rate).
	// +optional
	Rate *Rate `json:"rate,omitempty"`
	// Requests of one client awaiting their reply, as the tenant's inFlight counts them.
	// +optional
	// +kubebuilder:validation:Minimum=1
	InFlight *int64 `json:"inFlight,omitempty"`
	// Concurrent connections of one client, within its tenant's. A NATS connection counts for
	// the client it authenticated as; a Kafka connection for the client.id of its latest request
	// (one that names another client moves it, and is closed if that client has none left).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Connections *int64 `json:"connections,omitempty"`
	// How much of its tenant's queue one client may hold (onLimit: delay), so a client over its
	// limits never fills the queue for the others. maxWait is the tenant's.
	// +optional
	Queue *ClientQueue `json:"queue,omitempty"`
	// What one client's consumers may receive, within its tenant's consume. Kafka: the record
	// bytes of the responses to Fetch requests naming its client.id; such a Fetch is held while
	// the client's bucket is in debt. NATS: the deliveries to its connections; a JetStream pull
	// waits out the debt, and a core subscriber whose debt outruns queue.maxWait is ended as a
	// slow consumer.
	// +optional
	Consume *Consume `json:"consume,omitempty"`
}

// ClientQueue bounds what one client may have held at the gateway.
type ClientQueue struct {
	// Messages of the client held at once (one per held connection), each also taking a place
	// in its tenant's queue.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxMessages int64 `json:"maxMessages"`
}
