//! What a tenant may do through the Kafka listeners, not only how much: the class of every API
//! key (apis.rs), and the admin requests decided per resource against the tenant's grants
//! (admin.rs). Behind the plaintext and mTLS listeners the broker sees the gateway's principal,
//! so its ACLs cannot tell one tenant from another: the gateway decides.

mod admin;
#[cfg(test)]
mod admin_tests;
mod apis;
mod data;
#[cfg(test)]
mod data_tests;
mod fetch;
mod metadata;
mod writer;

pub use admin::{
    decide, Verdict, CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED,
    TOPIC_AUTHORIZATION_FAILED,
};
pub use apis::{api_of, Api, Class, ClusterOp, APIS};
pub use data::{decide_data, TRANSACTIONAL_ID_AUTHORIZATION_FAILED};
pub use fetch::decide_fetch;
pub use metadata::{
    describes_all_topics, filter_metadata, filter_topic_partitions, metadata_request, Filtered, MetadataAsk,
};

use crate::patterns::glob_matches;

/// Whether requests of the API are read whole, to be decided per resource: those the table
/// gives a highest version.
pub fn reads_body(api_key: i16) -> bool {
    api_of(api_key).is_some_and(|a| a.max_version.is_some())
}
use serde::{de::Error as _, Deserialize, Deserializer};

/// A tenant's grants of destructive, config-altering and cluster-altering requests
/// (spec.permissions.kafka, resolved by the control plane); the default grants none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grants {
    #[serde(default)]
    pub delete_topics: Vec<String>,
    #[serde(default)]
    pub alter_topic_configs: Vec<String>,
    #[serde(default)]
    pub delete_groups: Vec<String>,
    #[serde(default)]
    pub cluster: ClusterOps,
    /// Topics it may produce to; None: every topic.
    #[serde(default)]
    pub produce: Option<Vec<String>>,
    /// Topics it may consume from; None: every topic.
    #[serde(default)]
    pub consume: Option<Vec<String>>,
    /// Consumer groups it may join, commit and fetch offsets of; None: every group.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    /// Transactional ids it may use; None: every id.
    #[serde(default)]
    pub transactional_ids: Option<Vec<String>>,
    /// Topics it may create (CreateTopics, CreatePartitions, auto-creation); None: every topic.
    #[serde(default)]
    pub create_topics: Option<Vec<String>>,
}

/// Whether a list left out (every name) or a pattern of it matches `name`.
fn listed(list: &Option<Vec<String>>, name: &[u8]) -> bool {
    list.as_ref().is_none_or(|l| l.iter().any(|g| glob_matches(g, name)))
}

impl Grants {
    pub fn may_delete_topic(&self, topic: &[u8]) -> bool {
        self.delete_topics.iter().any(|g| glob_matches(g, topic))
    }

    pub fn may_alter_topic_configs(&self, topic: &[u8]) -> bool {
        self.alter_topic_configs.iter().any(|g| glob_matches(g, topic))
    }

    pub fn may_delete_group(&self, group: &[u8]) -> bool {
        self.delete_groups.iter().any(|g| glob_matches(g, group))
    }

    pub fn cluster(&self, op: ClusterOp) -> bool {
        self.cluster.0 & op as u16 != 0
    }

    pub fn may_produce(&self, topic: &[u8]) -> bool {
        listed(&self.produce, topic)
    }

    pub fn may_consume(&self, topic: &[u8]) -> bool {
        listed(&self.consume, topic)
    }

    /// A topic is seen (in Metadata) by a tenant that may produce to it or consume from it.
    pub fn may_see(&self, topic: &[u8]) -> bool {
        self.may_produce(topic) || self.may_consume(topic)
    }

    /// Whether any topic is hidden from the tenant: then Metadata is filtered.
    pub fn limits_topics(&self) -> bool {
        self.produce.is_some() && self.consume.is_some()
    }

    pub fn may_use_group(&self, group: &[u8]) -> bool {
        listed(&self.groups, group)
    }

    pub fn may_use_transactional_id(&self, id: &[u8]) -> bool {
        listed(&self.transactional_ids, id)
    }

    pub fn may_create_topic(&self, topic: &[u8]) -> bool {
        listed(&self.create_topics, topic)
    }
}

/// Cluster-altering operations granted, by name in the configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterOps(u16);

impl ClusterOps {
    pub fn of(ops: &[ClusterOp]) -> ClusterOps {
        ClusterOps(ops.iter().fold(0, |bits, op| bits | *op as u16))
    }
}

impl<'de> Deserialize<'de> for ClusterOps {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut ops = Vec::new();
        for name in Vec::<String>::deserialize(d)? {
            ops.push(
                ClusterOp::from_name(&name)
                    .ok_or_else(|| D::Error::custom(format!("unknown cluster operation {name:?}")))?,
            );
        }
        Ok(ClusterOps::of(&ops))
    }
}

#[cfg(test)]
mod tests {
    use super::ClusterOp;
    use crate::config::Config;

    /// The configuration's `permissions` are the tenant's grants, by name.
    #[test]
    fn a_tenants_permissions_are_its_grants_and_an_unknown_operation_is_refused() {
        let doc = |permissions: &str| {
            format!(
                r#"{{"version":"1-a","protocol":"kafka","defaultTenant":"t","tenants":[{{"name":"t","limits":{{}},"permissions":{permissions}}},{{"name":"u","limits":{{}}}}]}}"#
            )
        };
        let c = Config::parse(doc(r#"{"deleteTopics":["t.*"],"cluster":["ElectLeaders"]}"#).as_bytes()).unwrap();
        let granted = &c.tenants[0].permissions;
        assert!(granted.may_delete_topic(b"t.orders") && !granted.may_delete_topic(b"u.orders"));
        assert!(granted.cluster(ClusterOp::ElectLeaders) && !granted.cluster(ClusterOp::AlterClientQuotas));
        assert_eq!(
            c.tenants[1].permissions,
            Default::default(),
            "none stated: none granted"
        );
        assert!(Config::parse(doc(r#"{"cluster":["AlterEverything"]}"#).as_bytes()).is_err());
    }
}
