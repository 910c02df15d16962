package v1alpha1

import "k8s.io/apimachinery/pkg/util/intstr"

// Limits is the shape of `spec.limits`, `spec.defaultLimits` and `spec.overrides[].limits`.
// Sizes are integers with an optional KiB, MiB or GiB; counts are integers; durations use Go
// syntax (250ms, 2s). Every limit accepts the literal `unlimited`, which is the only way to
// remove one.
type Limits struct {
	// NATS: headers plus payload of one PUB/HPUB. Kafka: one record batch as sent (Kafka's own
	// max.message.bytes meaning).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	MaxMessageBytes *intstr.IntOrString `json:"maxMessageBytes,omitempty"`
	// Messages and bytes per second, with their bucket depths.
	// +optional
	Rate *Rate `json:"rate,omitempty"`
	// Requests awaiting their reply: NATS request/reply and JetStream publishes, Kafka Produce
	// with acks other than 0.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	InFlight *intstr.IntOrString `json:"inFlight,omitempty"`
	// How many messages may be held at the gateway while rate or inFlight is exhausted, and
	// for how long each.
	// +optional
	Queue *Queue `json:"queue,omitempty"`
	// Concurrent client connections of the tenant.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	Connections *intstr.IntOrString `json:"connections,omitempty"`
	// The read side: what the tenant's consumers may receive.
	// +optional
	Consume *Consume `json:"consume,omitempty"`
}

// Consume is a tenant's read-side bucket. Kafka: the record bytes of Fetch responses; a
// response that takes the bucket into debt gets throttle_time_ms and the connection's next
// Fetch is held until the debt is paid, as Kafka's consumer_byte_rate quota does. NATS: the
// payload bytes of deliveries; a JetStream pull waits out the debt, and a core subscriber whose
// debt outruns queue.maxWait is ended as a slow consumer.
type Consume struct {
	// Bytes received per second: Kafka record batches, NATS message payloads with their headers.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	BytesPerSecond *intstr.IntOrString `json:"bytesPerSecond,omitempty"`
	// Depth of the bucket; default one second of bytesPerSecond. A Fetch asks for at most this
	// much (its max_bytes and partition_max_bytes are clamped to it).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	BurstBytes *intstr.IntOrString `json:"burstBytes,omitempty"`
	// NATS only: messages delivered per second (a bucket of one second of them). Kafka consumers
	// are limited by bytes: a Fetch response is counted in whole record batches.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	MessagesPerSecond *intstr.IntOrString `json:"messagesPerSecond,omitempty"`
}

// Rate is a tenant's token buckets, in messages and in bytes.
type Rate struct {
	// Messages (NATS messages, Kafka records) per second.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	MessagesPerSecond *intstr.IntOrString `json:"messagesPerSecond,omitempty"`
	// Bytes per second.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	BytesPerSecond *intstr.IntOrString `json:"bytesPerSecond,omitempty"`
	// Depth of the message bucket; default one second of messagesPerSecond, for a client or an
	// override at most a quarter of its tenant's burst.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	BurstMessages *intstr.IntOrString `json:"burstMessages,omitempty"`
	// Depth of the byte bucket; default one second of bytesPerSecond, for a client or an override
	// at most a quarter of its tenant's burst (but not below maxMessageBytes). At least
	// maxMessageBytes.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 0",message="must not be negative"
	BurstBytes *intstr.IntOrString `json:"burstBytes,omitempty"`
}

// Queue bounds what a tenant may have held at the gateway.
type Queue struct {
	// Messages held across the tenant's connections while rate or inFlight is exhausted.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 0",message="must not be negative"
	MaxMessages *intstr.IntOrString `json:"maxMessages,omitempty"`
	// Longest any one message is held before it is refused.
	// +optional
	// +kubebuilder:validation:Pattern=`^(([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+|unlimited)$`
	MaxWait *string `json:"maxWait,omitempty"`
}

// OverrideLimits is the shape of `spec.overrides[].limits`: the limits a subject or topic can
// narrow.
type OverrideLimits struct {
	// As in spec.limits; at most the tenant's.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(KiB|MiB|GiB)?|unlimited)$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	MaxMessageBytes *intstr.IntOrString `json:"maxMessageBytes,omitempty"`
	// As in spec.limits.
	// +optional
	Rate *Rate `json:"rate,omitempty"`
	// As in spec.limits.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^unlimited$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1 (write \"unlimited\" to remove the limit)"
	InFlight *intstr.IntOrString `json:"inFlight,omitempty"`
	// As in spec.limits: the consumers of matching topics, within the tenant's.
	// +optional
	Consume *Consume `json:"consume,omitempty"`
}
