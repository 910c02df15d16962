package v1alpha1

// Permissions say what a tenant's clients may do, whatever their rate. The gateway decides them
// on every listener, since behind the plaintext and mTLS listeners the broker sees the gateway,
// not the tenant; where the broker sees the tenant's own principal (SASL passed through), its
// ACLs apply as well. A list left out keeps its default: GatewayDefaults
// spec.defaultPermissions, then the built-in one (data access and topic creation open,
// destructive and cluster-altering requests refused). Patterns: Kafka names with * and ?; NATS
// subjects with whole-token * and a final >.
type Permissions struct {
	// What the tenant may do through the Kafka listeners.
	// +optional
	Kafka *KafkaPermissions `json:"kafka,omitempty"`
	// What the tenant may do through the NATS listeners.
	// +optional
	NATS *NATSPermissions `json:"nats,omitempty"`
}

// KafkaPermissions list the data a tenant may touch (the topics it may produce to, consume
// from and create, the consumer groups and transactional ids it may use) and grant the
// destructive, config-altering and cluster-altering requests. A request naming a resource
// outside its grant is refused as a broker with ACLs refuses it: per resource, with TOPIC_,
// GROUP_, TRANSACTIONAL_ID_ or CLUSTER_AUTHORIZATION_FAILED (docs/security.md).
type KafkaPermissions struct {
	// Topics it may produce to (Produce, and AddPartitionsToTxn of a transaction); [] none.
	// A topic is visible (Metadata, DescribeTopicPartitions) when it may be produced to or
	// consumed from.
	// Default: every topic.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9._*?-]+$`
	Produce []string `json:"produce,omitempty"`
	// Topics it may consume from (Fetch); [] none.
	// Default: every topic.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9._*?-]+$`
	Consume []string `json:"consume,omitempty"`
	// Consumer groups it may join and commit or fetch offsets of (FindCoordinator,
	// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
	// ConsumerGroupHeartbeat, TxnOffsetCommit, AddOffsetsToTxn); [] none. Default: every group.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	Groups []string `json:"groups,omitempty"`
	// Transactional ids it may use (FindCoordinator of a transaction, InitProducerId,
	// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit); [] none. Default: every
	// id.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	TransactionalIDs []string `json:"transactionalIds,omitempty"`
	// Topics it may create (CreateTopics, CreatePartitions, and auto-creation by Metadata);
	// [] none. Default: every topic.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9._*?-]+$`
	CreateTopics []string `json:"createTopics,omitempty"`
	// Topics it may delete or delete records of (DeleteTopics, DeleteRecords). Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9._*?-]+$`
	DeleteTopics []string `json:"deleteTopics,omitempty"`
	// Topics whose configs it may alter (AlterConfigs, IncrementalAlterConfigs): a retention
	// of 1 ms empties a topic as surely as deleting it. Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9._*?-]+$`
	AlterTopicConfigs []string `json:"alterTopicConfigs,omitempty"`
	// Consumer groups it may delete or delete offsets of (DeleteGroups, OffsetDelete).
	// Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=249
	DeleteGroups []string `json:"deleteGroups,omitempty"`
	// Requests that alter the cluster for every tenant, by name. AlterClientQuotas changes the
	// broker's quotas, never the gateway's limits (those are LimitPolicy's). Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Enum=AlterClientQuotas;AlterBrokerConfigs;CreateAcls;DeleteAcls;AlterPartitionReassignments;ElectLeaders;AlterUserScramCredentials;UpdateFeatures;UnregisterBroker
	Cluster []string `json:"cluster,omitempty"`
}

// NATSPermissions list the subjects a tenant may publish and subscribe to, and the JetStream
// streams it may destroy or change. A refusal is answered `-ERR 'Permissions Violation for
// Publish to "<subject>"'` (or `Subscription to`), which clients do not take for fatal.
type NATSPermissions struct {
	// Subjects it may publish to; [] none. Default: every subject.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	Publish []string `json:"publish,omitempty"`
	// Subjects it may subscribe to (a subscription must lie within one); [] none. Default:
	// every subject.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	Subscribe []string `json:"subscribe,omitempty"`
	// JetStream streams (names with * and ?) it may delete, purge or update, and delete
	// consumers of ($JS.API.STREAM.DELETE/PURGE/UPDATE.<stream>,
	// $JS.API.CONSUMER.DELETE.<stream>.<consumer>). Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[^.>\s/\\]+$`
	JetStreamAdmin []string `json:"jetStreamAdmin,omitempty"`
}
