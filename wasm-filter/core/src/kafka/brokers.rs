//! Which gateway address a broker is handed out at, if any.
//!
//! A Kafka cluster the gateway discovers (docs/kafka.md "In front of a Kafka cluster") is
//! declared as a range of node ids and a first port: broker `n` is fronted at the advertised
//! host, port `first_port + (n - first_node) * stride`, so every gateway replica answers a
//! client alike without sharing state (Kroxylicious' `portIdentifiesNode`). The port alone is
//! not enough: the gateway can only forward to a broker the control plane has given a listener
//! and an upstream, so a broker is handed out only once its node id is `fronted` in the
//! configuration; until then, and for good if its id is outside the range, it is withheld and
//! the client sees no address for it at all (its partitions have no reachable leader, a
//! retriable state every client refreshes metadata for).
//!
//! Brokers listed by address (`--kafka-broker`, the older form) are routed by the address the
//! broker advertises; an address no route names is kept, since it may be the gateway's own.

use serde::Deserialize;

/// What a rewritten response says about one broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// The gateway's address for it.
    To(&'a str, i32),
    /// As the broker sent it.
    Keep,
    /// Left out: the gateway cannot front it.
    Withhold,
}

/// Where clients should reach each broker a response names.
pub trait BrokerMap {
    fn route(&self, node: i32, host: &[u8], port: i32) -> Route<'_>;

    /// A KRaft controller (DescribeCluster `endpoint_type` 2, KIP-919): its id is not a
    /// broker's.
    fn route_controller(&self, node: i32, host: &[u8], port: i32) -> Route<'_> {
        self.route(node, host, port)
    }
}

/// The most node ids one cluster's range may span: each is a listener on every replica.
pub const MAX_NODES: i32 = 1024;

/// A discovered cluster as the control plane configures it for one listener kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    /// The Envoy filter chain name of this kind's listeners (bootstrap and every node's).
    pub chain: String,
    pub first_node: i32,
    pub last_node: i32,
    /// What clients are told: host, and the port of `first_node`.
    pub advertise_host: String,
    pub advertise_first_port: i32,
    /// Ports between consecutive node ids (1; the local stack's replicas interleave).
    #[serde(default = "one")]
    pub stride: i32,
    /// Node ids the gateway has a listener and an upstream for, ascending.
    #[serde(default)]
    pub fronted: Vec<i32>,
}

fn one() -> i32 {
    1
}

impl Cluster {
    /// Why the configuration is unusable, if it is.
    pub fn check(&self) -> Result<(), String> {
        let span = i64::from(self.last_node) - i64::from(self.first_node);
        if self.first_node < 0 || !(0..i64::from(MAX_NODES)).contains(&span) {
            return Err(format!(
                "node ids {}-{}: need 0 <= first <= last, at most {MAX_NODES} ids",
                self.first_node, self.last_node
            ));
        }
        let last_port = i64::from(self.advertise_first_port) + span * i64::from(self.stride);
        if self.stride < 1 || self.advertise_first_port < 1 || last_port > 65535 {
            return Err(format!(
                "ports from {} by {} for node ids {}-{} pass 65535",
                self.advertise_first_port, self.stride, self.first_node, self.last_node
            ));
        }
        Ok(())
    }

    /// The gateway port of a node id in the range (fronted or not).
    pub fn port_of(&self, node: i32) -> Option<i32> {
        if node < self.first_node || node > self.last_node {
            return None;
        }
        // check() bounds the range and its ports, so this stays within a port.
        Some(self.advertise_first_port + (node - self.first_node) * self.stride)
    }

    pub fn in_range(&self, node: i32) -> bool {
        self.port_of(node).is_some()
    }

    pub fn fronts(&self, node: i32) -> bool {
        self.in_range(node) && self.fronted.binary_search(&node).is_ok()
    }
}

impl BrokerMap for Cluster {
    fn route(&self, node: i32, _host: &[u8], _port: i32) -> Route<'_> {
        match self.port_of(node) {
            Some(port) if self.fronts(node) => Route::To(&self.advertise_host, port),
            _ => Route::Withhold,
        }
    }

    /// The gateway fronts brokers only: clients reach the controllers through them.
    fn route_controller(&self, _node: i32, _host: &[u8], _port: i32) -> Route<'_> {
        Route::Withhold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            chain: "weighstation-kafka-sasl".into(),
            first_node: 1,
            last_node: 4,
            advertise_host: "gw.example.com".into(),
            advertise_first_port: 9193,
            stride: 3,
            fronted: vec![1, 2, 4],
        }
    }

    #[test]
    fn a_fronted_node_is_at_its_port_and_any_other_is_withheld() {
        let c = cluster();
        assert_eq!(c.check(), Ok(()));
        assert_eq!(c.route(1, b"kafka-1", 9092), Route::To("gw.example.com", 9193));
        assert_eq!(c.route(4, b"kafka-4", 9092), Route::To("gw.example.com", 9202));
        assert_eq!(
            c.route(3, b"kafka-3", 9092),
            Route::Withhold,
            "in range, not fronted yet"
        );
        for outside in [0, 5, -1, i32::MIN, i32::MAX] {
            assert_eq!(c.route(outside, b"kafka-x", 9092), Route::Withhold, "node {outside}");
        }
    }

    #[test]
    fn ranges_and_ports_are_checked() {
        let bad = [
            Cluster {
                first_node: 5,
                last_node: 4,
                ..cluster()
            },
            Cluster {
                first_node: -1,
                ..cluster()
            },
            Cluster {
                last_node: MAX_NODES + 1,
                ..cluster()
            },
            Cluster {
                advertise_first_port: 65530,
                ..cluster()
            },
            Cluster { stride: 0, ..cluster() },
            Cluster {
                advertise_first_port: 0,
                ..cluster()
            },
        ];
        for c in bad {
            assert!(c.check().is_err(), "{c:?}");
        }
        let widest = Cluster {
            first_node: 0,
            last_node: MAX_NODES - 1,
            advertise_first_port: 1,
            stride: 1,
            ..cluster()
        };
        assert_eq!(widest.check(), Ok(()));
    }

    #[test]
    fn a_configuration_finds_its_discovered_cluster_by_chain_and_checks_it() {
        use crate::config::{Config, ConfigError};
        let doc = r#"{"version":"1-a","protocol":"kafka","defaultTenant":"t","tenants":[{"name":"t","limits":{}}],
            "kafkaClusters":[{"chain":"weighstation-kafka-sasl","firstNode":1,"lastNode":4,
            "advertiseHost":"gw.example.com","advertiseFirstPort":9193,"stride":1,"fronted":[3,1,1]}]}"#;
        let c = Config::parse(doc.as_bytes()).unwrap();
        assert!(c.rewrites_brokers() && c.discovers_kafka_clusters());
        let cluster = c.kafka_cluster("weighstation-kafka-sasl").unwrap();
        assert_eq!(cluster.fronted, vec![1, 3], "sorted, once each");
        assert_eq!(cluster.route(3, b"kafka-3", 9093), Route::To("gw.example.com", 9195));
        assert!(c.kafka_cluster("weighstation-kafka-ssl").is_none());
        let bad = doc.replace(r#""lastNode":4"#, r#""lastNode":0"#);
        assert!(matches!(
            Config::parse(bad.as_bytes()),
            Err(ConfigError::BadKafkaCluster(_))
        ));
        let unknown = doc.replace(r#""stride":1"#, r#""stride":1,"ports":[1]"#);
        assert!(
            Config::parse(unknown.as_bytes()).is_err(),
            "an unknown field is an error"
        );
    }
}
