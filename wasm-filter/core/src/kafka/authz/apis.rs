//! Every Kafka API key a client may send through the gateway, by what it can do to other
//! tenants. docs/security.md prints this table; a key it does not list is refused (the
//! connection is closed, as a broker closes one that sends an API it does not know).

/// What a request of an API can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Connection set-up: ApiVersions, SASL, client telemetry.
    Session,
    /// Reading and writing records, groups and transactions: open by default.
    Data,
    /// Reading the cluster's state: open.
    Describe,
    /// Creating topics or partitions: open by default.
    TopicCreation,
    /// Destroying another tenant's data: refused unless its resources are granted.
    Destructive,
    /// Altering configs: topics' unless granted by topic, brokers' unless granted by cluster.
    AlterConfigs,
    /// Altering the cluster for every tenant: refused unless granted by name.
    Cluster(ClusterOp),
}

impl Class {
    /// Requests of this class are read whole and decided against the tenant's grants
    /// (admin.rs); every other class passes.
    pub fn decided_per_resource(self) -> bool {
        matches!(self, Class::Destructive | Class::AlterConfigs | Class::Cluster(_))
    }
}

/// The cluster-altering requests a policy grants by name (spec.permissions.kafka.cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ClusterOp {
    AlterClientQuotas = 1,
    /// AlterConfigs and IncrementalAlterConfigs of anything but a topic: brokers, broker
    /// loggers, client metrics, groups.
    AlterBrokerConfigs = 1 << 1,
    CreateAcls = 1 << 2,
    DeleteAcls = 1 << 3,
    AlterPartitionReassignments = 1 << 4,
    ElectLeaders = 1 << 5,
    AlterUserScramCredentials = 1 << 6,
    UpdateFeatures = 1 << 7,
    UnregisterBroker = 1 << 8,
}

impl ClusterOp {
    pub const ALL: [ClusterOp; 9] = [
        ClusterOp::AlterClientQuotas,
        ClusterOp::AlterBrokerConfigs,
        ClusterOp::CreateAcls,
        ClusterOp::DeleteAcls,
        ClusterOp::AlterPartitionReassignments,
        ClusterOp::ElectLeaders,
        ClusterOp::AlterUserScramCredentials,
        ClusterOp::UpdateFeatures,
        ClusterOp::UnregisterBroker,
    ];

    /// The name a policy grants it by.
    pub fn name(self) -> &'static str {
        match self {
            ClusterOp::AlterClientQuotas => "AlterClientQuotas",
            ClusterOp::AlterBrokerConfigs => "AlterBrokerConfigs",
            ClusterOp::CreateAcls => "CreateAcls",
            ClusterOp::DeleteAcls => "DeleteAcls",
            ClusterOp::AlterPartitionReassignments => "AlterPartitionReassignments",
            ClusterOp::ElectLeaders => "ElectLeaders",
            ClusterOp::AlterUserScramCredentials => "AlterUserScramCredentials",
            ClusterOp::UpdateFeatures => "UpdateFeatures",
            ClusterOp::UnregisterBroker => "UnregisterBroker",
        }
    }

    pub fn from_name(name: &str) -> Option<ClusterOp> {
        ClusterOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

/// One row: key, name, class, and for a request the filter reads (decided per resource) the
/// highest version it answers a refusal of and the first flexible version (whose request header
/// carries tagged fields, and whose body compact encodings).
pub struct Api {
    pub key: i16,
    pub name: &'static str,
    pub class: Class,
    pub max_version: Option<i16>,
    pub flexible_from: Option<i16>,
}

const fn api(key: i16, name: &'static str, class: Class) -> Api {
    Api {
        key,
        name,
        class,
        max_version: None,
        flexible_from: None,
    }
}

/// A request the filter reads: it answers versions up to `max`, flexible from `flexible`
/// (i16::MAX: never).
const fn read(key: i16, name: &'static str, class: Class, max: i16, flexible: i16) -> Api {
    Api {
        key,
        name,
        class,
        max_version: Some(max),
        flexible_from: Some(flexible),
    }
}

impl Api {
    /// Whether a request of this version is flexible (only known for the requests it reads).
    pub fn flexible(&self, version: i16) -> bool {
        self.flexible_from.is_some_and(|from| version >= from)
    }
}

use Class::*;
use ClusterOp as Op;

/// The table. Keys only brokers and controllers send one another (LeaderAndIsr, Vote,
/// BrokerHeartbeat, WriteTxnMarkers, …) are absent, and so are delegation tokens (a token made
/// through the gateway would be the gateway's credential) and AlterReplicaLogDirs.
pub const APIS: &[Api] = &[
    api(0, "Produce", Data),
    api(1, "Fetch", Data),
    api(2, "ListOffsets", Data),
    read(3, "Metadata", Data, 12, 9),
    read(8, "OffsetCommit", Data, 9, 8),
    read(9, "OffsetFetch", Data, 9, 6),
    read(10, "FindCoordinator", Data, 6, 3),
    read(11, "JoinGroup", Data, 9, 6),
    read(12, "Heartbeat", Data, 4, 4),
    read(13, "LeaveGroup", Data, 5, 4),
    read(14, "SyncGroup", Data, 5, 4),
    api(15, "DescribeGroups", Describe),
    api(16, "ListGroups", Describe),
    api(17, "SaslHandshake", Session),
    api(18, "ApiVersions", Session),
    read(19, "CreateTopics", TopicCreation, 7, 5),
    // v6 names topics by id, which the filter cannot match against a pattern.
    read(20, "DeleteTopics", Destructive, 5, 4),
    read(21, "DeleteRecords", Destructive, 2, 2),
    read(22, "InitProducerId", Data, 5, 2),
    api(23, "OffsetForLeaderEpoch", Data),
    // v4+ batches transactions: brokers send it, clients never.
    read(24, "AddPartitionsToTxn", Data, 3, 3),
    read(25, "AddOffsetsToTxn", Data, 4, 3),
    read(26, "EndTxn", Data, 5, 3),
    read(28, "TxnOffsetCommit", Data, 4, 3),
    api(29, "DescribeAcls", Describe),
    read(30, "CreateAcls", Cluster(Op::CreateAcls), 3, 2),
    read(31, "DeleteAcls", Cluster(Op::DeleteAcls), 3, 2),
    api(32, "DescribeConfigs", Describe),
    read(33, "AlterConfigs", AlterConfigs, 2, 2),
    api(35, "DescribeLogDirs", Describe),
    api(36, "SaslAuthenticate", Session),
    read(37, "CreatePartitions", TopicCreation, 3, 2),
    read(42, "DeleteGroups", Destructive, 2, 2),
    read(43, "ElectLeaders", Cluster(Op::ElectLeaders), 2, 2),
    read(44, "IncrementalAlterConfigs", AlterConfigs, 1, 1),
    read(
        45,
        "AlterPartitionReassignments",
        Cluster(Op::AlterPartitionReassignments),
        0,
        0,
    ),
    api(46, "ListPartitionReassignments", Describe),
    read(47, "OffsetDelete", Destructive, 0, i16::MAX),
    // Answered for the caller's own entities (kafka/quotas.rs).
    read(48, "DescribeClientQuotas", Describe, 1, 1),
    read(49, "AlterClientQuotas", Cluster(Op::AlterClientQuotas), 1, 1),
    api(50, "DescribeUserScramCredentials", Describe),
    read(
        51,
        "AlterUserScramCredentials",
        Cluster(Op::AlterUserScramCredentials),
        0,
        0,
    ),
    api(55, "DescribeQuorum", Describe),
    read(57, "UpdateFeatures", Cluster(Op::UpdateFeatures), 2, 0),
    api(60, "DescribeCluster", Describe),
    api(61, "DescribeProducers", Describe),
    read(64, "UnregisterBroker", Cluster(Op::UnregisterBroker), 0, 0),
    api(65, "DescribeTransactions", Describe),
    api(66, "ListTransactions", Describe),
    read(68, "ConsumerGroupHeartbeat", Data, 1, 0),
    api(69, "ConsumerGroupDescribe", Describe),
    api(71, "GetTelemetrySubscriptions", Session),
    api(72, "PushTelemetry", Session),
    api(74, "ListConfigResources", Describe),
    // Filtered by the topics the tenant may see, as Metadata is.
    read(75, "DescribeTopicPartitions", Describe, 0, 0),
];

/// The row of an API key; None: refused.
pub fn api_of(key: i16) -> Option<&'static Api> {
    APIS.iter().find(|a| a.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_key_once_in_order() {
        for pair in APIS.windows(2) {
            assert!(pair[0].key < pair[1].key, "{} before {}", pair[0].name, pair[1].name);
        }
    }

    #[test]
    fn every_request_the_issue_names_is_in_its_class() {
        let class = |k| api_of(k).map(|a| a.class);
        for k in [20, 21, 42, 47] {
            assert_eq!(class(k), Some(Destructive), "key {k}");
        }
        assert_eq!(class(19), Some(TopicCreation));
        assert_eq!(class(37), Some(TopicCreation));
        assert_eq!(class(49), Some(Cluster(Op::AlterClientQuotas)));
        assert_eq!(class(33), Some(AlterConfigs));
        assert_eq!(class(44), Some(AlterConfigs));
        for k in [4, 5, 6, 7, 27, 38, 39, 40, 41, 34, 52, 62, 63, 999, -1] {
            assert_eq!(class(k), None, "key {k} is refused");
        }
    }

    /// docs/security.md prints the table: each API in the row of its class.
    #[test]
    fn the_security_page_lists_every_api_in_its_class() {
        let page = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/security.md"));
        let row = |class: &str| {
            page.lines()
                .find(|l| l.starts_with(&format!("| {class} |")))
                .unwrap_or_else(|| panic!("docs/security.md has no row for {class}"))
        };
        for a in APIS {
            let class = match a.class {
                Session => "session",
                Data => "data",
                Describe => "describe",
                TopicCreation => "topic creation",
                Destructive => "destructive",
                AlterConfigs => "config-altering",
                Cluster(ClusterOp::AlterBrokerConfigs) => "config-altering",
                Cluster(_) => "cluster-altering",
            };
            let listed = row(class)
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == a.name);
            assert!(listed, "docs/security.md: {} is not in the {class} row", a.name);
        }
        for op in ClusterOp::ALL {
            assert!(page.contains(op.name()), "docs/security.md does not name {}", op.name());
        }
    }

    #[test]
    fn every_cluster_op_is_named_and_found_by_its_name() {
        for op in ClusterOp::ALL {
            assert_eq!(ClusterOp::from_name(op.name()), Some(op));
            assert!(APIS.iter().any(|a| a.class == Cluster(op)) || op == ClusterOp::AlterBrokerConfigs);
        }
        assert_eq!(ClusterOp::from_name("Everything"), None);
    }
}
