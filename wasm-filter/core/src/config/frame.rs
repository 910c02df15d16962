//! Everything of a configuration but its tenants, as the control plane sent it: what a feed
//! delta keeps of the configuration in force (see delta.rs).

use std::rc::Rc;

use super::{ConfigError, Document, QuotaService, Reports};
use crate::backlog::BacklogPolicy;
use crate::protocol::Protocol;
use crate::{kafka, nats};

/// Everything of a configuration but its tenants.
pub(super) struct Frame {
    pub(super) version: String,
    pub(super) protocol: Protocol,
    pub(super) default_tenant: String,
    pub(super) broker_routes: Vec<((String, i32), (String, i32))>,
    pub(super) nats_listeners: Vec<(String, Rc<nats::Listener>)>,
    pub(super) kafka_clusters: Vec<Rc<kafka::Cluster>>,
    pub(super) quota: Option<QuotaService>,
    pub(super) reports: Option<Reports>,
    pub(super) backlog: BacklogPolicy,
    pub(super) feed: bool,
    pub(super) replicas: u64,
}

impl Frame {
    pub(super) fn of(doc: Document<'_>) -> Result<Frame, ConfigError> {
        let mut broker_routes = Vec::new();
        for r in &doc.broker_routes {
            match (split_host_port(&r.upstream), split_host_port(&r.advertise)) {
                (Some(up), Some(gw)) => broker_routes.push((up, gw)),
                _ => {
                    return Err(ConfigError::BadBrokerRoute(format!(
                        "{} -> {}",
                        r.upstream, r.advertise
                    )))
                }
            }
        }
        let mut kafka_clusters = Vec::new();
        for mut c in doc.kafka_clusters {
            c.check()
                .map_err(|e| ConfigError::BadKafkaCluster(format!("{}: {e}", c.chain)))?;
            c.fronted.sort_unstable();
            c.fronted.dedup();
            kafka_clusters.push(Rc::new(c));
        }
        let nats_listeners = doc
            .nats_listeners
            .into_iter()
            .map(|l| {
                let listener = nats::Listener {
                    address: Some((l.host, l.port)),
                    connect_urls: l.connect_urls,
                };
                (l.chain, Rc::new(listener))
            })
            .collect();
        Ok(Frame {
            replicas: doc.quota.as_ref().map_or(1, |q| q.replicas.max(1)),
            version: doc.version,
            protocol: doc.protocol,
            default_tenant: doc.default_tenant,
            broker_routes,
            nats_listeners,
            kafka_clusters,
            quota: doc.quota,
            reports: doc.reports,
            backlog: doc.backlog,
            feed: doc.feed,
        })
    }
}

fn split_host_port(s: &str) -> Option<(String, i32)> {
    let (host, port) = s.rsplit_once(':')?;
    Some((
        host.trim_start_matches('[').trim_end_matches(']').to_owned(),
        port.parse().ok()?,
    ))
}
