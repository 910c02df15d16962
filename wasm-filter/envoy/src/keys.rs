//! Shared-data keys of a tenant's limiter state. Counters (in-flight, queue, connections) are
//! keyed by tenant alone, so a reload never forgets them; rate state is keyed by the limit's
//! fingerprint too, so an unchanged limit keeps its bucket and a changed one starts afresh.
//! With each rate and in-flight key goes this worker's lease on it.

use std::cell::RefCell;
use std::rc::Rc;
use weighstation_core::config::{Protocol, TenantPlan};
use weighstation_core::leases::{RateLease, Scope, SlotLease};
use weighstation_core::limits::RateLimit;

use crate::clients::ClientKeys;
use crate::leases;

/// A rate limit's shared-data key, whom it is for, and this worker's lease on it.
#[derive(Debug)]
pub struct RateKey {
    pub key: String,
    pub scope: Scope,
    pub lease: Rc<RefCell<RateLease>>,
}

impl RateKey {
    pub fn new(key: String, limit: &RateLimit, scope: Scope) -> RateKey {
        RateKey {
            lease: leases::rate(&key, limit, scope),
            scope,
            key,
        }
    }
}

/// The shared-data key of a tenant's rate limit (`base` is [`tenant_base`]).
pub fn tenant_rate_key(base: &str, limit: &RateLimit) -> String {
    format!("{base}/rate/{:016x}", limit.fingerprint())
}

/// The shared-data key of an override's rate limit.
pub fn override_rate_key(base: &str, fingerprint: u64) -> String {
    format!("{base}/override/{fingerprint:016x}/rate")
}

/// The shared-data key of a named client entry's rate limit (weighstation_core::clients).
pub fn named_client_rate_key(base: &str, fingerprint: u64) -> String {
    format!("{base}/clients/named/{fingerprint:016x}")
}

/// Where a tenant's state is kept in shared data.
pub fn tenant_base(protocol: Protocol, tenant: &str) -> String {
    format!("weighstation/{}/{tenant}", protocol.as_str())
}

/// The shared-data key of a tenant's connection count.
pub fn connections_key(base: &str) -> String {
    format!("{base}/connections")
}

/// An in-flight count's shared-data key and this worker's idle slots of it.
#[derive(Debug, Clone)]
pub struct SlotKey {
    pub key: Rc<str>,
    pub lease: Rc<RefCell<SlotLease>>,
}

impl SlotKey {
    pub fn new(key: String) -> SlotKey {
        let key: Rc<str> = Rc::from(key);
        SlotKey {
            lease: leases::slots(&key),
            key,
        }
    }
}

#[derive(Debug)]
pub struct OverrideKeys {
    pub rate: RateKey,
    pub in_flight: SlotKey,
    /// The override's consume bucket, if it has one.
    pub consume: Option<String>,
    /// The override's bucket of NATS deliveries, if it has one.
    pub consume_messages: Option<String>,
}

#[derive(Debug)]
pub struct TenantKeys {
    pub rate: RateKey,
    pub in_flight: SlotKey,
    pub queue: String,
    pub connections: String,
    /// The tenant's consume bucket, if it has one.
    pub consume: Option<String>,
    /// The tenant's bucket of NATS deliveries, if it has one.
    pub consume_messages: Option<String>,
    pub overrides: Vec<OverrideKeys>,
    /// Its clients' buckets, if it limits its clients.
    pub clients: Option<ClientKeys>,
}

impl TenantKeys {
    pub fn new(protocol: Protocol, tenant: &str, plan: &TenantPlan, scope: Scope) -> TenantKeys {
        let base = tenant_base(protocol, tenant);
        TenantKeys {
            rate: RateKey::new(tenant_rate_key(&base, &plan.rate), &plan.rate, scope),
            in_flight: SlotKey::new(format!("{base}/inflight")),
            queue: format!("{base}/queue"),
            connections: connections_key(&base),
            consume: plan.consume.map(|c| format!("{base}/consume/{:016x}", c.fingerprint())),
            consume_messages: plan
                .consume_messages
                .map(|c| format!("{base}/consume-messages/{:016x}", c.fingerprint())),
            overrides: plan
                .overrides
                .iter()
                .map(|o| OverrideKeys {
                    rate: RateKey::new(override_rate_key(&base, o.fingerprint), &o.rate, scope),
                    in_flight: SlotKey::new(format!("{base}/override/{:016x}/inflight", o.fingerprint)),
                    consume: o
                        .consume
                        .map(|_| format!("{base}/override/{:016x}/consume", o.consume_fingerprint)),
                    consume_messages: o.consume_messages.map(|m| {
                        format!(
                            "{base}/override/{:016x}/consume-messages/{:016x}",
                            o.consume_fingerprint,
                            m.fingerprint()
                        )
                    }),
                })
                .collect(),
            clients: plan.clients.as_ref().map(|c| {
                let overflow_metric = format!(
                    "weighstation_client_pool_overflow.protocol.{}.tenant.{tenant}",
                    protocol.as_str()
                );
                ClientKeys::new(&base, c, scope, overflow_metric)
            }),
        }
    }
}
