//! Broker addresses in a connection's responses (weighstation_core::kafka rewrite.rs): rewritten
//! by the discovered cluster its listener fronts (known by the filter chain's name, read once),
//! each broker named recorded for the control plane (crate::discovery); on a listener of no
//! discovered cluster, by the brokers listed by address.

use std::cell::Cell;
use std::rc::Rc;
use weighstation_core::config::{Config, Protocol};
use weighstation_core::kafka::{rewrite_brokers, rewrite_produce_endpoints, BrokerMap, Cluster, Route};

use super::Conn;
use crate::{discovery, state, trust};

/// The first Produce version whose responses may carry `NodeEndpoints` (KIP-951).
const FIRST_NODE_ENDPOINTS_PRODUCE: i16 = 10;

/// A cluster's map that tells discovery of every broker it is asked about, as seen at a time
/// (ms) read once per response, and only if the response names a broker (most Produce
/// responses name none).
struct Discovering<'a>(&'a Cluster, Cell<Option<u64>>);

impl<'a> Discovering<'a> {
    fn new(cluster: &'a Cluster) -> Self {
        Discovering(cluster, Cell::new(None))
    }

    fn at_ms(&self) -> u64 {
        let at_ms = self.1.get().unwrap_or_else(discovery::now_ms);
        self.1.set(Some(at_ms));
        at_ms
    }
}

impl BrokerMap for Discovering<'_> {
    fn route(&self, node: i32, host: &[u8], port: i32) -> Route<'_> {
        // Node ids are never negative; a hostile response's are withheld, and not reported.
        if node >= 0 {
            discovery::saw(&self.0.chain, node, host, port, self.at_ms());
        }
        self.0.route(node, host, port)
    }

    fn route_controller(&self, node: i32, host: &[u8], port: i32) -> Route<'_> {
        self.0.route_controller(node, host, port)
    }
}

impl Conn {
    /// Whether responses naming brokers must be read whole and rewritten.
    pub(super) fn rewrites_brokers(&self) -> bool {
        state::active(Protocol::Kafka).is_some_and(|c| c.rewrites_brokers())
    }

    /// Whether a Produce response of this version must be read whole for its NodeEndpoints.
    pub(super) fn reads_produce_endpoints(&mut self, version: i16) -> bool {
        version >= FIRST_NODE_ENDPOINTS_PRODUCE
            && state::active(Protocol::Kafka).is_some_and(|c| self.cluster(&c).is_some())
    }

    /// A Metadata, FindCoordinator or DescribeCluster response rewritten; None: as it is.
    pub(super) fn rewrite_addresses(&mut self, frame: &[u8], api_key: i16, version: i16) -> Option<Vec<u8>> {
        let config = state::active(Protocol::Kafka)?;
        match self.cluster(&config) {
            Some(cluster) => rewrite_brokers(frame, api_key, version, &Discovering::new(&cluster)),
            None => rewrite_brokers(frame, api_key, version, config.as_ref()),
        }
    }

    /// A Produce response's NodeEndpoints rewritten; None: it has none, or this connection's
    /// listener fronts no discovered cluster.
    pub(super) fn rewrite_produce_endpoints(&mut self, frame: &[u8], version: i16) -> Option<Vec<u8>> {
        let config = state::active(Protocol::Kafka)?;
        let cluster = self.cluster(&config)?;
        rewrite_produce_endpoints(frame, version, &Discovering::new(&cluster))
    }

    fn cluster(&mut self, config: &Config) -> Option<Rc<Cluster>> {
        if !config.discovers_kafka_clusters() {
            return None;
        }
        let chain = self.chain.get_or_insert_with(trust::filter_chain);
        config.kafka_cluster(chain.as_deref()?)
    }
}
